package session

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// startWait bounds how long `workspace start` waits for the session it
// detached to say it is listening: its start pulls the clone, which is
// tried again a few times when the server does not answer.
const startWait = 2 * time.Minute

// startDetached is `workspace start`: the same as run, detached in a session
// of its own, its output appended to WS/session/log. It prints the PID once
// the session says it is listening, or why it did not start.
func startDetached(o options, stdout, stderr io.Writer) int {
	s := &session{o: o, errOut: stderr}
	defer s.close()
	if err := s.check(); err != nil {
		fmt.Fprintf(stderr, "workspace start: %v\n", err)
		return exitFailed
	}
	if err := refuseIfNamed(s.layout, o.Key.String()); err != nil {
		fmt.Fprintf(stderr, "workspace start: %v\n", err)
		return exitFailed
	}
	if err := s.root.MkdirAll(s.ws.Session, 0o700); err != nil {
		fmt.Fprintf(stderr, "workspace start: %v\n", err)
		return exitFailed
	}
	logf, err := s.root.OpenFile(s.ws.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "workspace start: %v\n", err)
		return exitFailed
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull) // trust:outside /dev/null
	if err != nil {
		fmt.Fprintf(stderr, "workspace start: %v\n", err)
		return exitFailed
	}
	defer devnull.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "workspace start: %v\n", err)
		return exitFailed
	}
	defer readyR.Close()
	exe, err := os.Executable()
	if err != nil {
		readyW.Close()
		fmt.Fprintf(stderr, "workspace start: %v\n", err)
		return exitFailed
	}
	// The key comes first after the verb and the root is absolute, so the
	// process table reads which workspace the process names (D1, D16).
	args := []string{exe, verbStart, o.Key.String(), "--root", o.Root}
	if o.Session != "" {
		args = append(args, "--session", o.Session)
	}
	args = append(args, "--ready-fd", "3")
	cmd := &exec.Cmd{Path: exe, Args: args, Env: os.Environ(), Dir: s.ws.Tree,
		Stdin: devnull, Stdout: logf, Stderr: logf, ExtraFiles: []*os.File{readyW},
		SysProcAttr: unixhost.SessionAttr()}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		fmt.Fprintf(stderr, "workspace start: %v\n", err)
		return exitFailed
	}
	pid := cmd.Process.Pid
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(readyR).ReadString('\n')
		said <- strings.TrimSpace(line)
	}()
	select {
	case line := <-said:
		if line == "ready" {
			_ = cmd.Process.Release()
			fmt.Fprintln(stdout, pid)
			return ExitOK
		}
		// The pipe closed without a word: the session ended at its start.
		state, _ := cmd.Process.Wait()
		fmt.Fprintf(stderr, "workspace start: the session (PID %d) did not start: %v; its log is %s\n", pid, state, s.ws.Log)
		return exitFailed
	case <-time.After(startWait):
		// readyR is closed on return, which ends the goroutine's read.
		_ = cmd.Process.Release()
		fmt.Fprintf(stderr, "workspace start: the session (PID %d) is not listening after %s; see %s\n", pid, startWait, s.ws.Log)
		return exitFailed
	}
}

// refuseIfNamed refuses to start a session in a workspace that a running
// process already names: a workspace runs one session at a time (seed 000),
// and the daemon refuses its launches on the same rule. A table that cannot
// tell refuses too, as everywhere else: only "no process names it" lets a
// start through.
func refuseIfNamed(l host.Layout, key string) error {
	k, err := messages.ParseWorkspaceKey(key)
	if err != nil {
		return err
	}
	t, err := unixhost.NewProcTable(unixhost.ProcOptions{Layout: l})
	if err != nil {
		return err
	}
	defer t.Close()
	// A process that ends while the table is read leaves the answer
	// unknown for that scan only; the table is read again, a few times,
	// before an unknown answer refuses.
	for attempt := 1; ; attempt++ {
		tab, err := t.Scan()
		if err != nil {
			return fmt.Errorf("workspace %s: cannot tell whether a process names it, so no session starts: %w", key, err)
		}
		v := tab.Naming(k)
		err = namedRefusal(tab, v, os.Getpid())
		if err == nil || v.Named == host.Yes || attempt == namingScans {
			return err
		}
	}
}

// namingScans bounds the reads of the process table before a start refuses
// on an unknown answer.
const namingScans = 3

// namedRefusal words the verdict on the workspace for a session process
// self that is about to run in it: nil only when no process but self names
// it and none left the answer unknown.
func namedRefusal(tab host.Table, v host.Verdict, self int) error {
	var others []string
	for _, id := range v.By {
		if id.PID == self {
			continue
		}
		desc := strconv.Itoa(id.PID)
		if p, ok := tab.Find(id); ok {
			desc += " (" + strings.Join(p.Argv, " ") + ")"
		}
		others = append(others, desc)
	}
	if len(others) > 0 {
		return fmt.Errorf("workspace %s is in use: process %s names it; a workspace runs one session at a time%s", v.Key, strings.Join(others, ", "), v.Ignored())
	}
	var unsure []string
	for _, pid := range v.Unsure {
		if pid != self {
			unsure = append(unsure, strconv.Itoa(pid))
		}
	}
	if len(unsure) > 0 {
		return fmt.Errorf("workspace %s: cannot tell whether a process names it (process %s could not be read, or names it under a root that cannot be matched or from a PID namespace that cannot be read), so no session starts; a workspace runs one session at a time%s", v.Key, strings.Join(unsure, ", "), v.Ignored())
	}
	return nil
}
