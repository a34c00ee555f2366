//go:build linux

package unixhost

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readAllMaster reads the master until the terminal's last holder closes it
// (EIO), failing the test after a generous bound.
func readAllMaster(t *testing.T, master *os.File) string {
	t.Helper()
	master.SetReadDeadline(time.Now().Add(60 * time.Second))
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := master.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			if os.IsTimeout(err) {
				t.Fatalf("the terminal did not close within 60s; read %q", out.String())
			}
			return out.String()
		}
	}
}

// StartOnPTY: standard input and output are the terminal, which is the
// controlling terminal of the command's own session; standard error is a
// pipe; a line typed into the master reaches it; its output, and the
// pipe's, are read to their ends after it exits.
func TestStartOnPTY(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `test -t 0 && test -t 1 && ! test -t 2 && echo tty:yes
read l; echo got:$l; echo err >&2
set -- $(cat /proc/self/stat | sed 's/.*) //'); echo sid:$4 tty:$5; exit 3`)
	master, stderr, err := StartOnPTY(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer stderr.Close()
	if _, err := master.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	errOut := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stderr); errOut <- string(b) }()
	out := readAllMaster(t, master)
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("exit: %v", err)
	}
	for _, want := range []string{"tty:yes", "got:hello", "hello\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal showed %q, not %q", out, want)
		}
	}
	// The session's leader is the command itself (field 6 of stat is
	// the session, 7 the controlling terminal: not 0).
	pidField := "sid:" + strconv.Itoa(cmd.Process.Pid) + " "
	if !strings.Contains(out, pidField) || strings.Contains(out, "tty:0") {
		t.Errorf("not the leader of a session with a terminal: %q (want %q)", out, pidField)
	}
	if got := <-errOut; got != "err\n" {
		t.Errorf("standard error: %q", got)
	}
}

// Closing the master hangs up the session on the terminal (reference D.3:
// why the master is held by a holder, not by ocxd).
func TestClosingTheMasterHangsUp(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "hup")
	cmd := exec.Command("/bin/sh", "-c", `trap 'echo hup > "$1"; exit 7' HUP; echo ready; while :; do sleep 0.05; done`, "sh", mark)
	master, stderr, err := StartOnPTY(cmd)
	if err != nil {
		t.Fatal(err)
	}
	stderr.Close()
	buf := make([]byte, 64)
	master.SetReadDeadline(time.Now().Add(60 * time.Second))
	if n, err := master.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "ready") {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	master.Close()
	cmd.Wait()
	if got := cmd.ProcessState.ExitCode(); got != 7 {
		t.Errorf("exit %d, not the HUP trap's 7", got)
	}
	if b, _ := os.ReadFile(mark); string(b) != "hup\n" {
		t.Errorf("the trap wrote %q", b)
	}
}

// A new terminal is canonical; MakeRaw leaves it and puts it back; the
// window size set is the size read.
func TestTerminalModes(t *testing.T) {
	master, tty, err := OpenPTY()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer tty.Close()
	if !IsTerminal(tty) || !IsTerminal(master) {
		t.Fatal("not terminals")
	}
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	if IsTerminal(r) {
		t.Error("a pipe is a terminal")
	}
	if c, err := Canonical(master); err != nil || !c {
		t.Fatalf("canonical %v, %v", c, err)
	}
	restore, err := MakeRaw(tty)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := Canonical(master); c {
		t.Error("raw, and still canonical")
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if c, _ := Canonical(master); !c {
		t.Error("not canonical once restored")
	}
	want := WindowSize{Rows: 33, Cols: 101}
	if err := SetWindowSize(master, want); err != nil {
		t.Fatal(err)
	}
	if got, err := GetWindowSize(tty); err != nil || got != want {
		t.Errorf("size %v, %v", got, err)
	}
}
