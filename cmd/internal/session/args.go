package session

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/messages"
)

// The verbs of the workspace command (D1).
const (
	verbServe = "serve"
	verbRun   = "run"
	verbStart = "start"
)

// options is a parsed command line.
type options struct {
	Verb string
	Key  messages.WorkspaceKey
	// Root is the agents root, absolute and clean.
	Root string
	// Launch is the launch note served (serve only).
	Launch string
	// Session names the post holding the session definition (run and start);
	// "" takes the newest on the workspace's record.
	Session string
	// ReadyFD, for the process `workspace start` detaches, is the descriptor
	// on which it says it is listening; 0 otherwise.
	ReadyFD int
}

// UsageError is a bad command line: nothing was read or written, and the
// command exits 2.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp is --help: usage on standard output, exit 0.
var errHelp = errors.New("help")

// errVersion is --version: the version line on standard output, exit 0.
var errVersion = errors.New("version")

// synopsisText is what a refused command line is shown: the forms alone.
const synopsisText = `usage:
  workspace serve LOGIN/PROJECT --root AGENTS --launch HASH
  workspace run   LOGIN/PROJECT --root AGENTS [--session HASH]
  workspace start LOGIN/PROJECT --root AGENTS [--session HASH]
  workspace --version
`

// usageText is --help's: the forms, what each verb does, where to read on.
const usageText = synopsisText + `
serve   the session process the daemon launches for a launch note, inside the
        workspace's sandbox: it holds the wake pipe and answers what it reads
run     the same loop in the foreground, at a terminal, unsandboxed
start   run, detached in a session of its own, its output appended to
        AGENTS/LOGIN/projects/PROJECT/session/log; prints the PID
--version  print the build's version and check-in, one line

Run "workspace VERB --help" for a verb's flags.
`

// ParseArgs reads the command line after the program's name. Every value is
// checked here, before anything is read or written: a key that is not
// LOGIN/PROJECT, a relative root, a hash that is not a full hash.
func ParseArgs(args []string) (options, error) {
	if len(args) == 0 {
		return options{}, usageErr("no verb; the verbs are serve, run and start")
	}
	var o options
	switch a := args[0]; a {
	case "-h", "--help", "-help", "help":
		return options{}, errHelp
	case "--version":
		if len(args) > 1 {
			return options{}, usageErr("--version takes no arguments")
		}
		return options{}, errVersion
	case verbServe, verbRun, verbStart:
		o.Verb = a
	default:
		return o, usageErr("%q is not a verb of workspace (serve, run, start)", a)
	}
	fs := newFlagSet(&o, io.Discard)
	// The key may stand before or among the flags.
	var positional []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return options{Verb: o.Verb}, errHelp
			}
			return o, usageErr("%v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch len(positional) {
	case 0:
		return o, usageErr("the workspace LOGIN/PROJECT is missing")
	case 1:
	default:
		return o, usageErr("one workspace LOGIN/PROJECT is named, not %d (%s)", len(positional), strings.Join(positional, " "))
	}
	key, err := messages.ParseWorkspaceKey(positional[0])
	if err != nil {
		return o, usageErr("%v", err)
	}
	// host's rule is stricter: a login never names the daemon's own files.
	if _, err := messages.ParseWorkspaceKey(positional[0]); err != nil {
		return o, usageErr("%v", err)
	}
	o.Key = key
	switch {
	case o.Root == "":
		return o, usageErr("--root AGENTS is missing")
	case !filepath.IsAbs(o.Root):
		// A relative root cannot be matched against the agents root in the
		// process table (D16), so the daemon would count this process as
		// unknown for every workspace.
		return o, usageErr("--root %q is not an absolute path", o.Root)
	case filepath.Clean(o.Root) != o.Root:
		return o, usageErr("--root %q is not a clean path (clean, it is %q)", o.Root, filepath.Clean(o.Root))
	}
	if o.Verb == verbServe {
		if o.Launch == "" {
			return o, usageErr("--launch HASH is missing; serve runs for a launch note")
		}
		if err := messages.ValidateHash(o.Launch); err != nil {
			return o, usageErr("--launch: %v", err)
		}
	}
	if o.Session != "" {
		if err := messages.ValidateHash(o.Session); err != nil {
			return o, usageErr("--session: %v", err)
		}
	}
	if o.ReadyFD < 0 {
		return o, usageErr("--ready-fd %d is not a descriptor", o.ReadyFD)
	}
	return o, nil
}

// newFlagSet declares a verb's flags into o; out receives the flag package's
// own messages.
func newFlagSet(o *options, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("workspace "+o.Verb, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.Root, "root", "", "the agents root, an absolute path (required)")
	if o.Verb == verbServe {
		fs.StringVar(&o.Launch, "launch", "", "the launch note this session serves, a full hash (required)")
	} else {
		fs.StringVar(&o.Session, "session", "", "the post holding the session definition, a full hash (default: the newest on the workspace's record)")
	}
	if o.Verb == verbStart {
		fs.IntVar(&o.ReadyFD, "ready-fd", 0, "(set by start for the process it detaches) the descriptor to say it is listening on")
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: workspace %s LOGIN/PROJECT --root AGENTS %s\n\n%s\nflags:\n", o.Verb, verbArgs[o.Verb], verbHelp[o.Verb])
		fs.PrintDefaults()
	}
	return fs
}

var verbArgs = map[string]string{verbServe: "--launch HASH", verbRun: "[--session HASH]", verbStart: "[--session HASH]"}

var verbHelp = map[string]string{
	verbServe: `The session process the daemon launches for a launch note, inside the
workspace's sandbox. It holds the wake pipe AGENTS/LOGIN/projects/PROJECT/session/wake,
answers each post whose hash it reads there with one turn, and writes as the
agent login. Exit 0 when stopped (a stop request, TERM), when a completes
session's report is written, or when a CI result is tagged; 1 when it cannot
run; 2 for a bad command line.
`,
	verbRun: `A terminal session: the same loop as serve, in the foreground, unsandboxed.
Ctrl-C stops it with a stopped note. Without --session it runs the newest
session definition on the workspace's record.
`,
	verbStart: `The same as run, detached in a session of its own, its output appended to
AGENTS/LOGIN/projects/PROJECT/session/log. It prints the session's PID once the
session is listening.
`,
}

// checkRoot checks the agents root exists and is a directory.
func checkRoot(root string) error {
	st, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("agents root: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("agents root %s is not a directory", root)
	}
	return nil
}
