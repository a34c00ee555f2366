// Package runhold is a run's watcher (seed 002, "watch a run"; seed 004
// §8, §8.1; docs/runs.md §8.1): a small per-run process, `ocx run hold`,
// that starts the run's command (on a terminal of its own, or on pipes),
// holds its streams so that the run outlives ocxd, serves the daemon's
// deliveries and the people who join a terminal (`ocx attach`) on a Unix
// socket, keeps the ends of the output, and records the exit in a file.
package runhold

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/host/unixhost"
)

// defaultKeep is how much of the end of each stream is kept by default
// (seed 004 §8 keep: 64K, 64K).
const defaultKeep = 64 << 10

// Options say what a holder runs and where it keeps what.
type Options struct {
	// Socket is where the holder listens for clients (mode 0600).
	Socket string
	// Status is the file the holder writes the exit to, atomically, before
	// it removes its socket.
	Status string
	// StdoutLog and StderrLog, when set, are rewritten at the exit with the
	// ends of the terminal's output and of standard error, when they
	// printed at least one byte.
	StdoutLog, StderrLog string
	// KeepStdout and KeepStderr are how many bytes of each end are kept.
	KeepStdout, KeepStderr int
	// FirstLine is typed into the terminal once the command starts, when
	// set: the line {"run", "objective"}, without its newline.
	FirstLine string
	// Terminal: the command runs on a terminal the holder owns; else its
	// standard streams are pipes the holder holds.
	Terminal bool
	// Feed keeps a command's standard input open after the first line,
	// for the lines typed in (a session that feeds); without it, and
	// without a terminal, the input closes after the first line.
	Feed bool
	// The command is either Spec, a file holding a Spec (the daemon's:
	// the run's environment, sandbox and limits), or Argv, the command
	// and its arguments (a bare name found on the holder's PATH) in Dir
	// (empty: the holder's), unconfined, with the holder's environment.
	Spec string
	Dir  string
	Argv []string
}

// Check refuses options a holder cannot run with.
func (o Options) Check() error {
	switch {
	case o.Socket == "" || !filepath.IsAbs(o.Socket):
		return errors.New("runhold: --socket must be an absolute path")
	case len(o.Socket) > unixhost.MaxSocketPath:
		return fmt.Errorf("runhold: --socket %s: longer than a Unix socket's %d bytes", o.Socket, unixhost.MaxSocketPath)
	case o.Status == "" || !filepath.IsAbs(o.Status):
		return errors.New("runhold: --status must be an absolute path")
	case o.StdoutLog != "" && !filepath.IsAbs(o.StdoutLog):
		return errors.New("runhold: --stdout-log must be an absolute path")
	case o.StderrLog != "" && !filepath.IsAbs(o.StderrLog):
		return errors.New("runhold: --stderr-log must be an absolute path")
	case o.KeepStdout < 0 || o.KeepStderr < 0:
		return errors.New("runhold: --keep-stdout and --keep-stderr are sizes, 0 or more")
	case o.Spec != "" && (len(o.Argv) > 0 || o.Dir != ""):
		return errors.New("runhold: --spec names the command and its directory: no command after --, no --dir")
	case o.Spec != "" && !filepath.IsAbs(o.Spec):
		return errors.New("runhold: --spec must be an absolute path")
	case o.Spec == "" && (len(o.Argv) == 0 || o.Argv[0] == ""):
		return errors.New("runhold: no command after --, and no --spec")
	case o.Feed && o.Terminal:
		return errors.New("runhold: --feed is for a command on pipes: a terminal takes every line typed in")
	}
	check := checkControl // a pipe takes a line of any length
	if o.Terminal {
		check = CheckLine
	}
	if o.FirstLine != "" {
		if err := check(o.FirstLine); err != nil {
			return fmt.Errorf("runhold: the first line: %w", err)
		}
	}
	return nil
}

// CheckLine refuses a line the holder cannot type into a terminal as it
// is: one holding a control character (the terminal would act on it: ^C,
// ^D, erase) and one longer than a canonical-mode terminal takes whole,
// its newline counted (a longer line is typed only once the command has
// put its terminal out of canonical mode). A JSON line escapes every
// control character but DEL, so a delivery is refused only for its length.
func CheckLine(line string) error {
	if len(line)+1 > unixhost.MaxCanonicalLine {
		return fmt.Errorf("%d bytes and its newline: a terminal in canonical mode takes at most %d", len(line), unixhost.MaxCanonicalLine)
	}
	return checkControl(line)
}

// checkControl refuses a line holding a control character.
func checkControl(line string) error {
	for i := 0; i < len(line); i++ {
		if c := line[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("byte %d is the control character %#02x, which the terminal would act on", i, c)
		}
	}
	return nil
}

// flags is how a holder's command line is read: `ocx run hold` and the
// test binaries that stand in for it parse it alike.
type flags struct {
	Options
	// ListenFD, when not 0, is a descriptor holding the socket, bound and
	// listening already (Start's child).
	ListenFD int
	// FirstLineFD, when not 0, is a descriptor the first line is read from,
	// to its end (Start's child: the line stays out of the command line).
	FirstLineFD int
	// Detach: bind the socket, leave the holder running in a session of its
	// own, print "PID SOCKET", and return (Start).
	Detach bool
	// Log is where a detached holder's own messages are appended.
	Log string
}

// Usage is the holder's command line.
const Usage = `run hold --socket PATH --status PATH [--stdout-log PATH] [--stderr-log PATH]
            [--keep-stdout BYTES] [--keep-stderr BYTES] [--first-line LINE]
            [--terminal | --feed] [--detach [--log PATH]]
            (--spec FILE | [--dir DIR] -- COMMAND [ARG...])`

// parseFlags reads a holder's command line (the words after `run hold`).
func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("run hold", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ocx %s\n\n", Usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.Socket, "socket", "", "the Unix socket clients attach on and deliveries arrive on")
	fs.StringVar(&f.Status, "status", "", `the file the exit is written to: {"exit":N} or {"exit":128+N,"signal":"SIGX"}`)
	fs.StringVar(&f.StdoutLog, "stdout-log", "", "rewritten at the exit with the end of the terminal's output")
	fs.StringVar(&f.StderrLog, "stderr-log", "", "rewritten at the exit with the end of standard error")
	fs.IntVar(&f.KeepStdout, "keep-stdout", defaultKeep, "bytes of the terminal's output kept")
	fs.IntVar(&f.KeepStderr, "keep-stderr", defaultKeep, "bytes of standard error kept")
	fs.StringVar(&f.FirstLine, "first-line", "", "the line typed in once the command starts")
	fs.IntVar(&f.FirstLineFD, "first-line-fd", 0, "read the first line from this descriptor (internal)")
	fs.StringVar(&f.Dir, "dir", "", "the command's working directory")
	fs.StringVar(&f.Spec, "spec", "", "a file naming the command, its environment, directory, sandbox and limits (the daemon's)")
	fs.BoolVar(&f.Terminal, "terminal", false, "run the command on a terminal the holder owns (else on pipes)")
	fs.BoolVar(&f.Feed, "feed", false, "keep the command's input open after the first line, for lines typed in")
	fs.IntVar(&f.ListenFD, "listen-fd", 0, "serve on this descriptor, bound by --detach (internal)")
	fs.BoolVar(&f.Detach, "detach", false, "bind the socket, leave the holder running in a session of its own, print PID SOCKET")
	fs.StringVar(&f.Log, "log", "", "with --detach: append the holder's own messages here")
	var argv []string
	for i, a := range args {
		if a == "--" {
			args, argv = args[:i], args[i+1:]
			break
		}
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("%q: the command follows --", fs.Arg(0))
	}
	f.Argv = argv
	if f.FirstLine != "" && f.FirstLineFD != 0 {
		return f, errors.New("--first-line and --first-line-fd: one or the other")
	}
	if f.FirstLineFD == 0 {
		if err := f.Check(); err != nil {
			return f, err
		}
	}
	return f, nil
}

// args is the holder's command line for o, serving on listenFD and reading
// the first line from firstLineFD when they are not 0.
func (o Options) args(listenFD, firstLineFD int) []string {
	a := []string{"--socket", o.Socket, "--status", o.Status}
	if o.StdoutLog != "" {
		a = append(a, "--stdout-log", o.StdoutLog)
	}
	if o.StderrLog != "" {
		a = append(a, "--stderr-log", o.StderrLog)
	}
	a = append(a, "--keep-stdout", strconv.Itoa(o.KeepStdout), "--keep-stderr", strconv.Itoa(o.KeepStderr))
	if o.Terminal {
		a = append(a, "--terminal")
	}
	if o.Feed {
		a = append(a, "--feed")
	}
	if o.Dir != "" {
		a = append(a, "--dir", o.Dir)
	}
	if o.Spec != "" {
		a = append(a, "--spec", o.Spec)
	}
	if listenFD != 0 {
		a = append(a, "--listen-fd", strconv.Itoa(listenFD))
	}
	if firstLineFD != 0 {
		a = append(a, "--first-line-fd", strconv.Itoa(firstLineFD))
	} else if o.FirstLine != "" {
		a = append(a, "--first-line", o.FirstLine)
	}
	if len(o.Argv) == 0 {
		return a
	}
	return append(append(a, "--"), o.Argv...)
}

// command is one request on the holder's socket: its first line.
type command struct {
	Verb string // "attach", "type" or "status"
	Line string // type's line
	// Size is attach's terminal size, when given.
	Size unixhost.WindowSize
}

// parseCommand reads a request's first line (without its newline):
//
//	attach [ROWS COLS]   join the terminal; the connection then carries
//	                     the terminal's output one way and keys the other
//	type LINE            type LINE and a newline in; answered "ok" or "error: WHY"
//	status               answered with one JSON line: {"pid":N,"clients":K}
func parseCommand(line string) (command, error) {
	verb, rest, _ := strings.Cut(line, " ")
	switch verb {
	case "attach":
		if rest == "" {
			return command{Verb: verb}, nil
		}
		f := strings.Fields(rest)
		if len(f) != 2 {
			return command{}, fmt.Errorf("attach takes ROWS COLS or nothing, not %q", rest)
		}
		r, err1 := strconv.ParseUint(f[0], 10, 16)
		c, err2 := strconv.ParseUint(f[1], 10, 16)
		if err1 != nil || err2 != nil {
			return command{}, fmt.Errorf("attach: %q is not ROWS COLS", rest)
		}
		return command{Verb: verb, Size: unixhost.WindowSize{Rows: uint16(r), Cols: uint16(c)}}, nil
	case "type":
		if err := checkControl(rest); err != nil {
			return command{}, fmt.Errorf("type: %w", err)
		}
		return command{Verb: verb, Line: rest}, nil
	case "status":
		if rest != "" {
			return command{}, errors.New("status takes nothing")
		}
		return command{Verb: verb}, nil
	}
	return command{}, fmt.Errorf("%q is not a request (attach, type, status)", verb)
}
