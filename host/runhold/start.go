package runhold

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// Descriptors a detached holder is handed by Start.
const (
	listenFD    = 3
	firstLineFD = 4
)

// Start binds o.Socket and leaves a holder running on it in a session of
// its own, and returns its process once it has started: the socket is bound
// and listening already, so a client may connect at once, and the first
// line travels on a pipe, not on the holder's command line. holder is the
// holder's program and its first words (the release's ocx and "run",
// "hold"); env is its environment and so the command's (nil: this
// process's); log, when not empty, is appended the holder's own messages.
// The holder is this process's child: the caller reaps it, or releases it
// and exits (`ocx run hold --detach`); it outlives the caller either way.
func Start(holder []string, o Options, env []string, log string) (*os.Process, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	ln, err := unixhost.ListenSocketAt(o.Socket)
	if err != nil {
		return nil, err
	}
	defer ln.Close() // this process's copy; the holder's stays bound
	started := false
	defer func() {
		if !started {
			os.Remove(o.Socket)
		}
	}()
	lf, err := ln.(*net.UnixListener).File()
	if err != nil {
		return nil, fmt.Errorf("runhold: start: %w", err)
	}
	defer lf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("runhold: start: %w", err)
	}
	defer r.Close()
	defer w.Close()
	cmd := exec.Command(holder[0], append(append([]string{}, holder[1:]...), o.args(listenFD, firstLineFD)...)...)
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{lf, r} // descriptors 3 and 4
	if log != "" {
		f, err := unixhost.OpenLog(log, unixhost.LogText)
		if err != nil {
			return nil, fmt.Errorf("runhold: start: %w", err)
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f.File(), f.File()
	}
	cmd.SysProcAttr = unixhost.SessionAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("runhold: start %s: %w", holder[0], err)
	}
	started = true
	r.Close()
	// The holder reads the line to its end before it starts the command.
	if _, err := io.WriteString(w, o.FirstLine); err != nil {
		return cmd.Process, fmt.Errorf("runhold: the first line: %w", err)
	}
	return cmd.Process, nil
}

// Main is a holder's command line run in this process (`ocx run hold`):
// with --detach it starts one (holder names the program and its first
// words) and prints "PID SOCKET"; else it holds, and its exit code is the
// command's.
func Main(ctx context.Context, holder []string, args []string, stdout, stderr io.Writer, log *slog.Logger) (int, error) {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return 2, err
	}
	if f.Detach {
		if f.ListenFD != 0 || f.FirstLineFD != 0 {
			return 2, errors.New("--detach hands out descriptors; it takes none")
		}
		p, err := Start(holder, f.Options, nil, f.Log)
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(stdout, "%d %s\n", p.Pid, f.Socket)
		return 0, p.Release()
	}
	var ln net.Listener
	if f.ListenFD != 0 {
		lf := os.NewFile(uintptr(f.ListenFD), f.Socket)
		ln, err = net.FileListener(lf)
		lf.Close()
		if err != nil {
			return 1, fmt.Errorf("runhold: the socket on descriptor %d: %w", f.ListenFD, err)
		}
	}
	if f.FirstLineFD != 0 {
		lf := os.NewFile(uintptr(f.FirstLineFD), "first line")
		b, err := io.ReadAll(io.LimitReader(lf, 1<<20))
		lf.Close()
		if err != nil {
			return 1, fmt.Errorf("runhold: the first line on descriptor %d: %w", f.FirstLineFD, err)
		}
		f.FirstLine = string(b)
		if err := f.Check(); err != nil {
			if ln != nil {
				ln.Close()
			}
			return 2, err
		}
	}
	osig := make(chan os.Signal, 4)
	signal.Notify(osig, unixhost.OSSignals(host.SIGUSR1, host.SIGHUP, host.SIGINT, host.SIGTERM)...)
	defer signal.Stop(osig)
	sigs := make(chan host.Signal, 4)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case s := <-osig:
				if hs, ok := unixhost.SignalOf(s); ok {
					sigs <- hs
				}
			case <-stop:
				return
			}
		}
	}()
	st, err := hold(context.WithoutCancel(ctx), f.Options, ln, sigs, log)
	return st.Exit, err
}
