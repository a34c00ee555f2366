//go:build linux

package unixhost

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages/protocol"
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

// startOnTerminal starts argv as a run's process with a terminal (seed 004
// §8.1): its standard input and output the terminal, standard error a pipe.
// It returns the master, the pipe's read end and the exit, to come.
func startOnTerminal(t *testing.T, argv ...string) (*os.File, *os.File, protocol.ProcID, <-chan host.Exit) {
	t.Helper()
	l := newLauncher(t, nil)
	master, tty, err := OpenPTY()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	exits := make(chan host.Exit, 1)
	id, err := l.StartRun(host.RunSpec{Command: argv, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/",
		Stdin: tty, Stdout: tty, Stderr: errW, Terminal: true}, func(x host.Exit) { exits <- x })
	tty.Close()
	errW.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close(); errR.Close() })
	return master, errR, id, exits
}

func exitWithin(t *testing.T, exits <-chan host.Exit) host.Exit {
	t.Helper()
	select {
	case x := <-exits:
		return x
	case <-time.After(60 * time.Second):
		t.Fatal("the process did not exit within 60s")
		return host.Exit{}
	}
}

// A run's process on a terminal (RunSpec.Terminal): standard input and
// output are the terminal, which is the controlling terminal of the
// command's own session; standard error is a pipe; a line typed into the
// master reaches it; its output, and the pipe's, are read to their ends
// after it exits.
func TestStartRunOnATerminal(t *testing.T) {
	master, stderr, id, exits := startOnTerminal(t, "/bin/sh", "-c", `test -t 0 && test -t 1 && ! test -t 2 && echo tty:yes
read l; echo got:$l; echo err >&2
set -- $(cat /proc/self/stat | sed 's/.*) //'); echo sid:$4 tty:$5; exit 3`)
	if _, err := master.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	errOut := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stderr); errOut <- string(b) }()
	out := readAllMaster(t, master)
	if x := exitWithin(t, exits); x.Code != 3 {
		t.Fatalf("exit: %s", x)
	}
	for _, want := range []string{"tty:yes", "got:hello", "hello\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal showed %q, not %q", out, want)
		}
	}
	// The session's leader is the command itself (field 6 of stat is
	// the session, 7 the controlling terminal: not 0).
	pidField := "sid:" + strconv.Itoa(id.PID) + " "
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
	master, _, _, exits := startOnTerminal(t, "/bin/sh", "-c", `trap 'echo hup > "$1"; exit 7' HUP; echo ready; while :; do sleep 0.05; done`, "sh", mark)
	buf := make([]byte, 64)
	master.SetReadDeadline(time.Now().Add(60 * time.Second))
	if n, err := master.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "ready") {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	master.Close()
	if x := exitWithin(t, exits); x.Code != 7 {
		t.Errorf("exit %s, not the HUP trap's 7", x)
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
