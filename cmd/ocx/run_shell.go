package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/host/unixhost"
)

// shellDetachKey is Ctrl-], as ocx attach reads it.
const shellDetachKey = 0x1d

// shellDrainWait bounds how long the shell's last output is read after it
// ended, as a holder does (docs/runs.md §8.1).
const shellDrainWait = time.Second

const runShellUsage = `run shell RUN --user USER [--project P] [-- COMMAND [ARG...]]

shell opens a shell in the sandbox of run RUN (a hash or its beginning),
which runs on this node: COMMAND, by default the sandbox's /bin/sh, in the
run's namespaces, as its sandbox's uid and gid, with its environment, its
directory, its capabilities (none unless it keeps some), its rlimits and
its cgroup (docs/runs.md, "A shell in a run's sandbox"; D100). The caller
holds admin or setup, and the server authenticates them. On a terminal
the shell has a terminal of its own, and Ctrl-] detaches, which ends the
shell (its terminal closes, which hangs it up; Ctrl-] again kills it);
otherwise it runs on this process's
standard streams. ocx exits as the shell did. The run's end ends the
shell. Its start and end are written as notes in the run's thread by the
node user.`

// runRunShell is `ocx run shell`.
// shellStreams gives the shell its streams: on a terminal, a pty of its
// own (the master returned, for the relay), sized as ocx's; else ocx's
// own streams. close closes what it opened.
func shellStreams(enter *unixhost.Enter, terminal bool) (master *os.File, close func(), err error) {
	if !terminal {
		enter.Stdin, enter.Stdout, enter.Stderr = os.Stdin, os.Stdout, os.Stderr
		return nil, func() {}, nil
	}
	m, tty, err := unixhost.OpenPTY()
	if err != nil {
		return nil, nil, err
	}
	if unixhost.IsTerminal(os.Stdout) {
		if size, err := unixhost.GetWindowSize(os.Stdout); err == nil {
			unixhost.SetWindowSize(tty, size)
		}
	}
	enter.Stdin, enter.Stdout, enter.Stderr = tty, tty, tty
	return m, func() { tty.Close(); m.Close() }, nil
}

func runRunShell(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "run shell", runShellUsage, true, false)
	project := fs.String("project", "", "the project (default: the node's one project)")
	pos, rest, err := parseArgs(fs, args, oneArg("run's hash"))
	if err != nil {
		return err
	}
	if c.json {
		return fmt.Errorf("%w: run shell has no answer to give in JSON: the shell runs on this terminal, or on ocx's own streams", errUsage)
	}
	n, err := c.open(e)
	if err != nil {
		return err
	}
	t, err := tools.Of(n).RunShellOpen(ctx, tools.RunInput{Project: *project, Run: pos[0]})
	if err != nil {
		return err
	}
	initStat, err := unixhost.ReadStat(t.Init)
	if err != nil {
		return fmt.Errorf("run: %s: the sandbox's process: %w", t.Run, err)
	}
	command := tools.ShellCommand(rest)
	terminal := unixhost.IsTerminal(os.Stdin)
	enter := t.Enter(command, "", terminal) // this very ocx runs in the sandbox
	master, closeStreams, err := shellStreams(&enter, terminal)
	if err != nil {
		return err
	}
	defer closeStreams()
	sh, err := unixhost.StartEnter(enter)
	if terminal {
		enter.Stdin.Close() // the shell's alone now: its end reads as EIO on the master
	}
	if err != nil {
		return fmt.Errorf("run: %s: the shell did not start: %w", t.Run, err)
	}
	// The evidence first: no note, no shell.
	if _, err := tools.Of(n).RunShellNote(ctx, t, tools.RunShellStartNote(t, n.Config.User, command, sh.PID)); err != nil {
		sh.Abandon()
		return fmt.Errorf("run: %s: the shell did not start: %w", t.Run, err)
	}
	opened := time.Now()
	if err := sh.Go(); err != nil {
		sh.HangUp()
	}
	// An interrupt or a TERM to ocx hangs the shell up; ocx ends with it.
	stopWatch := context.AfterFunc(ctx, sh.HangUp)
	defer stopWatch()

	var detached atomic.Bool
	drain := func() {}
	if terminal {
		restore, err := unixhost.MakeRaw(os.Stdin)
		if err == nil {
			defer restore()
		}
		fmt.Fprintf(e.stderr, "[a shell in the sandbox of run %s: Ctrl-] detaches, which ends it]\r\n", t.Run)
		var stop func()
		drain, stop = relayTerminal(e, master, sh, &detached)
		defer stop()
	}
	code, sig, err := sh.Wait()
	drain()
	if err != nil && code < 0 {
		return fmt.Errorf("run: %s: the shell: %w", t.Run, err)
	}
	open := time.Since(opened)
	end := tools.RunShellEnd{Exit: code, Signal: sig, Detached: detached.Load()}
	// The sandbox's first process in its exit has had the kernel end
	// the rest of its PID namespace, the shell with it.
	if st, err := unixhost.ReadStat(t.Init); err != nil || st.Start != initStat.Start || st.Ending() {
		end.RunGone = true
	}
	if terminal {
		fmt.Fprintf(e.stderr, "\r\n[the shell ended after %s: exit %d]\r\n", open.Round(time.Millisecond), code)
	}
	if _, err := tools.Of(n).RunShellNote(context.WithoutCancel(ctx), t, tools.RunShellEndNote(t, command, open, end)); err != nil {
		fmt.Fprintf(e.stderr, "ocx run shell: %v\n", err)
		if code == 0 {
			return err
		}
	}
	if code != 0 {
		return errExit{code}
	}
	return nil
}

// relayTerminal relays between ocx's terminal and the shell's (its
// master): the output to e.stdout, the keys typed into the master, and
// the size as ocx's changes. Ctrl-] detaches (detached is set): the
// master closes, which hangs the shell up; Ctrl-] again kills it. drain,
// once the shell has ended, waits for its last output (at most
// shellDrainWait, when something it left in the sandbox holds its
// terminal); stop ends the size's relay.
func relayTerminal(e *env, master *os.File, sh *unixhost.Entered, detached *atomic.Bool) (drain, stop func()) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, unixhost.WindowChanged)
	go func() {
		for range winch {
			if size, err := unixhost.GetWindowSize(os.Stdout); err == nil {
				unixhost.SetWindowSize(master, size)
			}
		}
	}()
	output := make(chan struct{})
	go func() {
		defer close(output)
		io.Copy(e.stdout, master) // ends with EIO once every holder of the shell's terminal closed it
	}()
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := os.Stdin.Read(buf)
			if i := bytes.IndexByte(buf[:k], shellDetachKey); i >= 0 {
				if !detached.Swap(true) {
					// The kernel hangs up the session of a terminal whose
					// master closes. Keys go nowhere after.
					master.Write(buf[:i])
					fmt.Fprint(e.stderr, "\r\n[detached: the shell is hung up; Ctrl-] again kills it]\r\n")
					master.Close()
				} else {
					sh.Kill()
				}
			} else if k > 0 && !detached.Load() {
				if _, werr := master.Write(buf[:k]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	drain = func() {
		select {
		case <-output:
		case <-time.After(shellDrainWait):
			master.Close()
			<-output
		}
	}
	stop = func() {
		signal.Stop(winch)
		close(winch)
	}
	return drain, stop
}

// runRunEnter is `ocx run enter --socket-fd N`: the process `ocx run
// shell` starts in a run's sandbox through nsenter (unixhost.EnterMain).
// It returns only when the command could not be started.
func runRunEnter(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("run enter", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fd := fs.Int("socket-fd", -1, "the descriptor of the socket to the starter, ocx run shell")
	if err := fs.Parse(args); err != nil {
		return usageErr(err)
	}
	if *fd < 3 || fs.NArg() != 0 {
		return fmt.Errorf("%w: run enter is started by ocx run shell, with --socket-fd N", errUsage)
	}
	err := unixhost.EnterMain(*fd)
	fmt.Fprintf(e.stderr, "ocx run shell: in the sandbox: %v\n", err)
	if errors.Is(err, os.ErrNotExist) {
		return errExit{127} // as a shell says of a command it cannot find
	}
	return errExit{126}
}
