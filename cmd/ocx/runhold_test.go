package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/runhold"
	"github.com/ocx-go/ocx/host/unixhost"
)

// `ocx run hold` in the foreground exits as its command did, and writes
// the status and the kept logs.
func TestRunHoldExitsAsItsCommand(t *testing.T) {
	dir := shortDir(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"run", "hold", "--socket", filepath.Join(dir, "t.sock"),
		"--status", filepath.Join(dir, "st.json"), "--stdout-log", filepath.Join(dir, "stdout.log"),
		"--first-line", `{"run":"r","objective":"o"}`, "--", "/bin/sh", "-c", "read l; echo got:$l; exit 3"}, &out, &errb)
	if code != 3 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if st, err := runhold.ReadStatus(filepath.Join(dir, "st.json")); err != nil || st.Exit != 3 {
		t.Errorf("status %+v, %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "stdout.log")); !strings.Contains(string(b), `got:{"run":"r","objective":"o"}`) {
		t.Errorf("stdout.log %q", b)
	}
	if code := run(context.Background(), []string{"run", "hold", "--socket", "/x.sock"}, &out, &errb); code != 2 {
		t.Errorf("no status, no command: exit %d", code)
	}
}

// The release's ocx: `run hold --detach` prints PID SOCKET and returns
// with the run going on; `ocx attach` joins it, what it types reaches the
// command, and it ends when the run does; another detaches with Ctrl-].
func TestRunHoldDetachAndAttach(t *testing.T) {
	ocx := filepath.Join(builtRelease(t), "ocx")
	dir := shortDir(t)
	sock := filepath.Join(dir, "t.sock")
	hold := exec.Command(ocx, "run", "hold", "--detach", "--socket", sock, "--status", filepath.Join(dir, "st.json"),
		"--log", filepath.Join(dir, "holder.log"), "--first-line", `{"run":"r","objective":"o"}`, "--terminal",
		"--", "/bin/sh", "-c", "read l; echo got:$l; read m; echo got2:$m; exit 3")
	b, err := hold.Output()
	if err != nil {
		t.Fatalf("run hold --detach: %v", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[1] != sock {
		t.Fatalf("run hold --detach printed %q", b)
	}
	pid, _ := strconv.Atoi(f[0])
	t.Cleanup(func() { unixhost.Kill(pid, host.SIGKILL) }) // orphaned: not this process's to reap

	// One attaches and detaches: the run goes on.
	quitter := exec.Command(ocx, "attach", sock)
	quitter.Stdin = strings.NewReader("\x1d")
	var qerr bytes.Buffer
	quitter.Stderr = &qerr
	if out, err := quitter.Output(); err != nil || !strings.Contains(qerr.String(), "[detached") {
		t.Fatalf("attach then Ctrl-]: %v, %q, %q", err, out, qerr.String())
	}
	if _, err := runhold.Query(sock); err != nil {
		t.Fatalf("the run did not go on: %v", err)
	}

	att := exec.Command(ocx, "attach", "--socket", sock)
	keys, _ := att.StdinPipe()
	outp, _ := att.StdoutPipe()
	var aerr bytes.Buffer
	att.Stderr = &aerr
	if err := att.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { att.Process.Kill(); att.Wait() })
	lines := make(chan string, 16)
	go func() {
		s := bufio.NewScanner(outp)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for sawFirst := false; !sawFirst; {
		select {
		case l := <-lines:
			sawFirst = strings.Contains(l, "got:")
		case <-deadline:
			t.Fatal("attach never showed the first line's answer")
		}
	}
	io.WriteString(keys, "typed\n")
	var seen []string
	for l := range lines {
		seen = append(seen, l)
	}
	if err := att.Wait(); err != nil || !strings.Contains(strings.Join(seen, "\n"), "got2:typed") || !strings.Contains(aerr.String(), "[the run ended]") {
		t.Errorf("attach: %v, saw %q, %q", err, seen, aerr.String())
	}
	var st runhold.Status
	deadline = time.After(60 * time.Second)
	for {
		if st, err = runhold.ReadStatus(filepath.Join(dir, "st.json")); err == nil {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("no status: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if st.Exit != 3 {
		t.Errorf("status %+v", st)
	}
}

// shortDir is a directory with a path short enough for a socket.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "ocxrh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
