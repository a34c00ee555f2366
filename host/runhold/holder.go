package runhold

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/keptlog"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/protocol"
)

// Timings of a holder's end, and of its clients.
const (
	// drainGrace is how long output is still read after the command exits,
	// when something it left behind still holds the terminal or the pipe.
	drainGrace = time.Second
	// flushGrace is how long attached clients are given to take the last
	// of the output before they are cut off.
	flushGrace = 2 * time.Second
	// commandWait is how long a connection may take to send its request.
	commandWait = 5 * time.Second
	// clientWrite is how long a client may take to take one chunk of output.
	clientWrite = 10 * time.Second
	// clientQueue is how many chunks of output wait for a slow client
	// before it is cut off (it never slows the command).
	clientQueue = 1024
	// screenKeep is how much of the terminal's output a client that
	// attaches is shown first.
	screenKeep = 16 << 10
	// maxRequest bounds a request's first line: a delivery's line holds a
	// post's whole text.
	maxRequest = 8 << 20
)

// detachKey is the key that detaches `ocx attach`: Ctrl-], as telnet's.
const detachKey = 0x1d

// holder is one running holder's state.
type holder struct {
	log      *slog.Logger
	terminal bool
	pid      int

	// in is the terminal's master, or the write end of the command's
	// standard input; inClosed, under writeMu, once it is closed. typed is
	// closed once the first lines are typed in.
	in       *os.File
	typed    chan struct{}
	writeMu  sync.Mutex // one writer into the command's input at a time
	inClosed bool

	mu        sync.Mutex
	clients   map[*client]struct{}
	conns     map[net.Conn]struct{}
	listeners []net.Listener
	ended     bool
	screen    *tail
	stdout    *tail
	stderr    *tail
	// keptOut and keptErr filter what reaches the stdout and stderr
	// tails (D98): the kept logs are the filtered streams.
	keptOut, keptErr *keptlog.Writer

	wg sync.WaitGroup // accept loops and connections
}

// client is one attached connection.
type client struct {
	conn   net.Conn
	out    chan []byte
	closed bool // out is closed; under holder.mu
	done   chan struct{}
}

// streams are the command's standard streams: the holder's ends, and the
// command's, which the holder closes once the command has started.
type streams struct {
	input, stdout, stderr *os.File
	child                 []*os.File // stdin, stdout, stderr
}

// openStreams makes a terminal (its master the input and the output) or
// three pipes, and a pipe for standard error either way (seed 004 §8.1).
func openStreams(terminal bool) (streams, error) {
	var s streams
	errR, errW, err := os.Pipe()
	if err != nil {
		return s, err
	}
	s.stderr = errR
	if terminal {
		master, tty, err := unixhost.OpenPTY()
		if err != nil {
			errR.Close()
			errW.Close()
			return s, err
		}
		s.input, s.stdout, s.child = master, master, []*os.File{tty, tty, errW}
		return s, nil
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		errR.Close()
		errW.Close()
		return s, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		errR.Close()
		errW.Close()
		inR.Close()
		inW.Close()
		return s, err
	}
	s.input, s.stdout, s.child = inW, outR, []*os.File{inR, outW, errW}
	return s, nil
}

// closeChild closes the command's ends (a terminal's once only).
func (s streams) closeChild() {
	seen := map[*os.File]bool{}
	for _, f := range s.child {
		if f != nil && !seen[f] {
			seen[f] = true
			f.Close()
		}
	}
}

func (s streams) close() {
	s.closeChild()
	for _, f := range []*os.File{s.input, s.stdout, s.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// runSpec is the command the holder starts: its spec file's, or Argv in
// Dir with the holder's environment, unconfined.
// It returns the lines to type in after the first, and the kept logs'
// filter (nil: none), too.
func (o Options) runSpec() (host.RunSpec, []string, *keptlog.Filter, error) {
	if o.Spec != "" {
		s, err := ReadSpec(o.Spec)
		if err != nil {
			return host.RunSpec{}, nil, nil, err
		}
		var f *keptlog.Filter
		if s.Keep != nil {
			if f, err = s.Keep.Filter(); err != nil {
				return host.RunSpec{}, nil, nil, fmt.Errorf("runhold: spec %s: keep: %w", o.Spec, err)
			}
		}
		return host.RunSpec{Command: s.Command, Env: s.Env, Dir: s.Dir, Sandbox: s.Sandbox, Limits: s.Limits, Cgroup: s.Cgroup}, s.Input, f, nil
	}
	dir := o.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return host.RunSpec{}, nil, nil, fmt.Errorf("runhold: the holder's directory: %w", err)
		}
		dir = wd
	}
	return host.RunSpec{Command: o.Argv, Env: os.Environ(), Dir: dir}, nil, nil, nil
}

// hold runs a holder in this process until its command exits, and returns
// the exit. It serves on ln when ln is not nil, else it listens on
// o.Socket. A signal on signals is sent to the command's process group
// (its session), but SIGUSR1, which binds the socket again if it was
// removed; ctx's end sends SIGTERM. The socket is removed, and ln closed,
// before hold returns.
//
// The command is started as the daemon would start it (unixhost's
// StartRun: the sandbox through bwrap, the limits before its first
// instruction), in a session of its own, and is hung up (SIGHUP) if the
// holder is killed outright, as a terminal's closing master would.
func hold(ctx context.Context, o Options, ln net.Listener, signals <-chan host.Signal, log *slog.Logger) (Status, error) {
	if err := o.Check(); err != nil {
		if ln != nil {
			ln.Close()
		}
		return Status{}, err
	}
	if ln == nil {
		var err error
		if ln, err = unixhost.ListenSocketAt(o.Socket); err != nil {
			return Status{}, err
		}
	}
	exits := make(chan host.Exit, 1)
	st, id, stop, input, filter, err := o.start(exits)
	if err != nil {
		return o.startFailed(ln, st, stop, err)
	}
	defer stop()
	h := &holder{
		log: log, terminal: o.Terminal, pid: id.PID, in: st.input, typed: make(chan struct{}),
		clients: map[*client]struct{}{}, conns: map[net.Conn]struct{}{},
		screen: newTail(screenKeep), stdout: newTail(o.KeepStdout), stderr: newTail(o.KeepStderr),
	}
	h.keptOut, h.keptErr = filter.Writer(h.stdout), filter.Writer(h.stderr)
	log.Info("run holder started", slog.Int("pid", h.pid), slog.String("socket", o.Socket), slog.Bool("terminal", o.Terminal))
	var pumps sync.WaitGroup
	pumps.Go(func() { h.pump(st.stdout, false) })
	pumps.Go(func() { h.pump(st.stderr, true) })
	h.serve(ln)
	if o.FirstLine != "" {
		input = append([]string{o.FirstLine}, input...)
	}
	// The first lines, beside the wait: a command that does not read them
	// is still signalled and seen to exit. A line typed through the
	// socket waits for them.
	go func() {
		defer close(h.typed)
		for _, l := range input {
			if err := h.typeLine(l); err != nil {
				log.Warn("a line was not typed in", slog.String("error", err.Error()))
			}
		}
		if !o.Terminal && !o.Feed {
			h.closeInput()
		}
	}()
	x := h.wait(ctx, exits, signals, o.Socket)
	status := statusOf(x.Status())

	// The output the command left in the terminal and the pipes, then the
	// end: kept logs, the status, the clients, the socket.
	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		st.stdout.SetReadDeadline(time.Now())
		st.stderr.SetReadDeadline(time.Now())
		<-drained
	}
	st.stderr.Close()
	if !o.Terminal {
		st.stdout.Close()
	}
	errs := h.keepLogs(o, &status)
	errs = append(errs, writeStatus(o.Status, status))
	// The input first: a first line still being typed is cut short, and a
	// line asked meanwhile is answered, before the connections are ended.
	h.closeInput()
	<-h.typed
	h.end()
	if err := os.Remove(o.Socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	log.Info("run holder ended", slog.Int("pid", h.pid), slog.Int("exit", status.Exit), slog.String("signal", status.Signal))
	return status, errors.Join(errs...)
}

// start opens the command's streams and starts it, as Hold describes,
// telling exits its end; stop closes the launcher (nil when none was made).
// On failure the caller closes st and calls stop.
func (o Options) start(exits chan<- host.Exit) (st streams, id protocol.ProcID, stop func(), input []string, filter *keptlog.Filter, err error) {
	var spec host.RunSpec
	spec, input, filter, err = o.runSpec()
	if err == nil {
		st, err = openStreams(o.Terminal)
	}
	if err == nil {
		var l *unixhost.Launcher
		if l, err = unixhost.NewLauncher(unixhost.LauncherOptions{}); err == nil {
			stop = func() { l.Close() }
			spec.Stdin, spec.Stdout, spec.Stderr = st.child[0], st.child[1], st.child[2]
			spec.Terminal, spec.HangUpWithStarter = o.Terminal, true
			if sb := spec.Sandbox; sb != nil && o.Terminal {
				// The terminal's session is the run's own session:
				// bwrap's --new-session would take the terminal away.
				c := *sb
				c.OwnSession = false
				spec.Sandbox = &c
			}
			id, err = l.StartRun(spec, func(x host.Exit) { exits <- x })
			st.closeChild()
		}
	}
	return st, id, stop, input, filter, err
}

// startFailed ends a Hold whose command did not start: it closes what
// start opened and ln, removes the socket, and writes the status file (the
// caller, a detached start, may be gone: the status file tells).
func (o Options) startFailed(ln net.Listener, st streams, stop func(), err error) (Status, error) {
	st.close()
	if stop != nil {
		stop()
	}
	s := Status{Exit: 127, Error: err.Error()}
	werr := writeStatus(o.Status, s)
	ln.Close()
	os.Remove(o.Socket)
	return s, errors.Join(fmt.Errorf("runhold: start the command: %w", err), werr)
}

// wait waits for the command's exit, passing on the signals that come
// meanwhile (SIGUSR1 binds the socket again) and SIGTERM once ctx ends.
func (h *holder) wait(ctx context.Context, exits <-chan host.Exit, signals <-chan host.Signal, socket string) host.Exit {
	done := ctx.Done()
	for {
		select {
		case x := <-exits:
			return x
		case <-done:
			done = nil
			h.signal(host.SIGTERM)
		case s := <-signals:
			if s == host.SIGUSR1 {
				h.relisten(socket)
			} else {
				h.signal(s)
			}
		}
	}
}

// keepLogs writes the kept ends of the outputs that wrote anything to
// their logs, and counts the outputs' bytes in status.
func (h *holder) keepLogs(o Options, status *Status) []error {
	var errs []error
	h.mu.Lock()
	defer h.mu.Unlock()
	// The last lines, which have no newline, through the filter.
	h.keptOut.Flush()
	h.keptErr.Flush()
	if h.stdout.wrote && o.StdoutLog != "" {
		errs = append(errs, unixhost.WriteFileAtomic(o.StdoutLog, h.stdout.Bytes(), 0o600))
	}
	if h.stderr.wrote && o.StderrLog != "" {
		errs = append(errs, unixhost.WriteFileAtomic(o.StderrLog, h.stderr.Bytes(), 0o600))
	}
	status.StdoutBytes, status.StderrBytes = h.stdout.total, h.stderr.total
	return errs
}

// pump copies one of the command's outputs to the clients and its tail
// until it ends. Standard error is shown as the terminal would show it,
// each newline a carriage return and a newline.
func (h *holder) pump(f *os.File, stderr bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			h.output(buf[:n], stderr)
		}
		if err != nil {
			return
		}
	}
}

func (h *holder) output(p []byte, stderr bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if stderr {
		h.keptErr.Write(p)
		p = bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))
	} else {
		h.keptOut.Write(p)
		p = bytes.Clone(p)
	}
	h.screen.Write(p)
	for c := range h.clients {
		select {
		case c.out <- p:
		default: // too slow: cut off, never waited for
			h.log.Warn("an attached client is too slow, cut off")
			h.dropLocked(c)
		}
	}
}

// typeLine types line and a newline into the terminal, or writes them to
// the command's input.
func (h *holder) typeLine(line string) error {
	if err := checkControl(line); err != nil {
		return err
	}
	if !h.terminal {
		return h.write([]byte(line + "\n"))
	}
	// A long line is whole only once the command has left canonical mode.
	if len(line)+1 > unixhost.MaxCanonicalLine {
		if canon, err := unixhost.Canonical(h.in); err != nil || canon {
			return CheckLine(line)
		}
	}
	return h.write([]byte(line + "\n"))
}

// errInputClosed answers a line typed into a command whose input closed.
var errInputClosed = errors.New("the command's input is closed: only a session that feeds is given lines")

// write writes keys or a line into the command's input.
func (h *holder) write(p []byte) error {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	if h.inClosed {
		return errInputClosed
	}
	_, err := h.in.Write(p)
	return err
}

// closeInput closes the command's input: it reads its end. A write under
// way is cut short first.
func (h *holder) closeInput() {
	h.in.SetWriteDeadline(time.Now())
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	if !h.inClosed {
		h.inClosed = true
		h.in.Close()
	}
}

// signal sends s to the command's process group.
func (h *holder) signal(s host.Signal) {
	if err := unixhost.KillGroup(h.pid, s); err != nil {
		h.log.Warn("signal not sent", slog.String("signal", s.String()), slog.String("error", err.Error()))
	}
}

// relisten binds the socket again when it is gone (abduco's SIGUSR1).
func (h *holder) relisten(p string) {
	if _, err := os.Lstat(p); err == nil {
		return
	}
	ln, err := unixhost.ListenSocketAt(p)
	if err != nil {
		h.log.Warn("the socket was not bound again", slog.String("error", err.Error()))
		return
	}
	h.log.Info("the socket is bound again", slog.String("socket", p))
	h.serve(ln)
}

// serve accepts connections on ln until the holder ends.
func (h *holder) serve(ln net.Listener) {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		ln.Close()
		return
	}
	h.listeners = append(h.listeners, ln)
	h.mu.Unlock()
	h.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			if h.ended {
				h.mu.Unlock()
				c.Close()
				continue
			}
			h.conns[c] = struct{}{}
			h.wg.Go(func() { h.handle(c) })
			h.mu.Unlock()
		}
	})
}

// handle answers one connection.
func (h *holder) handle(c net.Conn) {
	defer func() {
		c.Close()
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
	}()
	if err := unixhost.SameUser(c); err != nil {
		h.log.Warn("a connection refused", slog.String("error", err.Error()))
		return
	}
	c.SetReadDeadline(time.Now().Add(commandWait))
	r := bufio.NewReaderSize(c, 4096)
	line, err := readLine(r, maxRequest)
	if err != nil {
		return
	}
	cmd, err := parseCommand(line)
	if err != nil {
		fmt.Fprintf(c, "error: %v\n", err)
		return
	}
	switch cmd.Verb {
	case "type":
		<-h.typed
		if err := h.typeLine(cmd.Line); err != nil {
			fmt.Fprintf(c, "error: %v\n", err)
			return
		}
		io.WriteString(c, "ok\n")
	case "status":
		h.mu.Lock()
		b, _ := json.Marshal(info{PID: h.pid, Clients: len(h.clients), Holder: os.Getpid()})
		h.mu.Unlock()
		c.Write(append(b, '\n'))
	case "attach":
		if !h.terminal {
			io.WriteString(c, "error: the run has no terminal to join (its process.terminal is false)\n")
			return
		}
		c.SetReadDeadline(time.Time{})
		if cmd.Size.Rows > 0 && cmd.Size.Cols > 0 {
			if err := unixhost.SetWindowSize(h.in, cmd.Size); err != nil {
				h.log.Warn("window size not set", slog.String("error", err.Error()))
			}
		}
		h.attach(c, r)
	}
}

// attach serves an attached client: the screen's end and then the output
// to it, its keys into the terminal, until either side ends.
func (h *holder) attach(c net.Conn, r *bufio.Reader) {
	cl := &client{conn: c, out: make(chan []byte, clientQueue), done: make(chan struct{})}
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return
	}
	if b := h.screen.Bytes(); len(b) > 0 {
		cl.out <- b
	}
	h.clients[cl] = struct{}{}
	h.mu.Unlock()
	go func() {
		defer close(cl.done)
		for b := range cl.out {
			c.SetWriteDeadline(time.Now().Add(clientWrite))
			if _, err := c.Write(b); err != nil {
				c.Close()
				for range cl.out {
				}
				return
			}
		}
		c.Close() // the holder ended: the client sees the connection end
	}()
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if werr := h.write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	h.mu.Lock()
	h.dropLocked(cl)
	h.mu.Unlock()
	<-cl.done
}

// dropLocked ends a client's output; h.mu is held.
func (h *holder) dropLocked(c *client) {
	delete(h.clients, c)
	if !c.closed {
		c.closed = true
		close(c.out)
	}
}

// end stops accepting, lets attached clients take the last of the output,
// then ends every connection and waits for them.
func (h *holder) end() {
	h.mu.Lock()
	h.ended = true
	for _, ln := range h.listeners {
		ln.Close()
	}
	var dones []chan struct{}
	for c := range h.clients {
		dones = append(dones, c.done)
		h.dropLocked(c)
	}
	h.mu.Unlock()
	deadline := time.After(flushGrace)
	for _, d := range dones {
		select {
		case <-d:
		case <-deadline:
		}
	}
	h.mu.Lock()
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// readLine reads one line, without its newline, of at most max bytes.
func readLine(r *bufio.Reader, max int) (string, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > max {
			return "", errors.New("request too long")
		}
		if err == nil {
			return string(bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return "", err
		}
	}
}
