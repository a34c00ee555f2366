package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/runhold"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// A shell in a run's sandbox, `ocx run shell RUN [-- CMD...]` (issue 43
// item 1, D100): checked here, entered by cmd/ocx through unixhost's
// StartEnter, its start and end written on the run's thread as plain
// notes by the node user (seed 001, E1).

// RunShellTarget is a run a shell may enter, and what entering it takes.
type RunShellTarget struct {
	Project node.Project
	Run     string
	// Record is where the run is: its thread's root post, or its ticket;
	// Ticket says which. The notes go there.
	Record string
	Ticket bool
	// Spec is the run's process as its holder started it: its command,
	// environment, directory, sandbox, limits and cgroup, values in place.
	Spec runhold.Spec
	// Init is the sandbox's first process (PID 1 inside), whose
	// namespaces the shell joins.
	Init int
	// By is the caller's login.
	By string
}

// runShellRefusal says why no shell may be opened in run st on the node
// whose user is self, in the order a person would fix them; nil when one
// may. confined says the run has a sandbox layer.
func runShellRefusal(st RunState, confined bool, self string) error {
	switch {
	case st.Node != self:
		return fmt.Errorf("run: %s runs on node %q, not here (%q): open its shell on that node", st.Run, st.Node, self)
	case st.Ended != "":
		return fmt.Errorf("run: %s has ended (%s, ended %s): its sandbox is gone", st.Run, st.Outcome, st.Ended)
	case st.Started == "":
		return fmt.Errorf("run: %s has not started (%s): there is no sandbox yet", st.Run, st.State)
	case !confined:
		return fmt.Errorf("run: %s is not confined (it has no sandbox layer): there is no sandbox to enter", st.Run)
	case !st.InCare || !st.Alive:
		return fmt.Errorf("run: %s has no process running on this node (in its care %v, its holder alive %v): there is no sandbox to enter", st.Run, st.InCare, st.Alive)
	}
	return nil
}

// RunShellOpen checks that the caller may open a shell in run in.Run and
// finds what entering its sandbox takes: the caller holding admin or
// setup, authenticated by the server; the run this node's, started, not
// ended, confined, its process running here (runShellRefusal).
func (n actions) RunShellOpen(ctx context.Context, in RunInput) (RunShellTarget, error) {
	p, r, err := n.toolRepoIn(in.Project)
	if err != nil {
		return RunShellTarget{}, err
	}
	defer r.Close()
	ok, caps, err := n.node.CallerPrivileged(ctx, r, p)
	if err != nil {
		return RunShellTarget{}, fmt.Errorf("caller: %w", err)
	}
	if !ok {
		return RunShellTarget{}, fmt.Errorf("caller: %q has capabilities %q on %s, without admin (a) or setup (s): only such a user may open a shell in a run's sandbox (D100)", n.node.Caller.Login, caps, p.Name)
	}
	st, m, _, err := n.runOf(ctx, r, "run", in.Run)
	if err != nil {
		return RunShellTarget{}, err
	}
	run, _ := m.Msg.(*runmsg.Run)
	if err := runShellRefusal(st, run != nil && run.Sandbox != nil, n.node.Config.User); err != nil {
		return RunShellTarget{}, err
	}
	code, err := r.ProjectCode(ctx)
	if err != nil {
		return RunShellTarget{}, err
	}
	c := &fossilio.Client{URL: p.URL, Login: n.node.Caller.Login, Password: n.node.Caller.Password, Cookie: n.node.Caller.Cookie, ProjectCode: code, Now: n.node.Now}
	if _, err := c.Fetch(ctx, st.Run); err != nil {
		return RunShellTarget{}, fmt.Errorf("caller: %q is not authenticated by the server: %w", n.node.Caller.Login, err)
	}
	t := RunShellTarget{Project: p, Run: st.Run, Record: m.Record, Ticket: m.Ticket, By: n.node.Caller.Login}
	if !m.Ticket {
		t.Record = st.Run
	}
	careDir := n.node.Layout.RunCare()
	careFile, err := n.node.Layout.RunCareFile(st.Run)
	if err != nil {
		return RunShellTarget{}, err
	}
	b, err := unixhost.Below(n.node.Layout.Root()).ReadFile(careFile, unixhost.SmallFile)
	if err != nil {
		return RunShellTarget{}, fmt.Errorf("run: %s: its care file: %w", st.Run, err)
	}
	care, err := protocol.DecodeRunCare(b)
	if err != nil {
		return RunShellTarget{}, fmt.Errorf("run: %s: its care file: %w", st.Run, err)
	}
	if care.Socket == "" {
		return RunShellTarget{}, fmt.Errorf("run: %s: its care file names no holder: its process is not running", st.Run)
	}
	if t.Spec, err = runhold.ReadSpec(runhold.RunFilesBase(careDir, st.Run) + ".spec"); err != nil {
		return RunShellTarget{}, fmt.Errorf("run: %s: %w", st.Run, err)
	}
	if t.Spec.Sandbox == nil {
		return RunShellTarget{}, fmt.Errorf("run: %s is not confined (its process runs with no sandbox): there is no sandbox to enter", st.Run)
	}
	q, err := runhold.Query(care.Socket)
	if err != nil {
		return RunShellTarget{}, fmt.Errorf("run: %s: its holder does not answer: %w", st.Run, err)
	}
	if t.Init, err = unixhost.SandboxInit(q.PID); err != nil {
		return RunShellTarget{}, fmt.Errorf("run: %s: %w", st.Run, err)
	}
	return t, nil
}

// Enter is what unixhost.StartEnter takes to open a shell running
// command in t's sandbox: the sandbox's uid, gid and capabilities, the
// run's environment, directory, rlimits and cgroup.
func (t RunShellTarget) Enter(command []string, exe string, terminal bool) unixhost.Enter {
	sb := t.Spec.Sandbox
	return unixhost.Enter{Init: t.Init, Exe: exe, Limits: t.Spec.Limits, Cgroup: t.Spec.Cgroup,
		Spec: unixhost.EnterSpec{Command: command, Env: t.Spec.Env, Dir: t.Spec.Dir,
			UID: sb.UID, GID: sb.GID, Capabilities: sb.Capabilities, Terminal: terminal}}
}

// ShellCommand is the command a shell runs: the one given, or the
// sandbox's /bin/sh.
func ShellCommand(given []string) []string {
	if len(given) == 0 {
		return []string{"/bin/sh"}
	}
	return given
}

// quoteCommand writes a command as a note shows it: each word as it is,
// or quoted when it holds a space, a quote or a control character.
func quoteCommand(c []string) string {
	w := make([]string, len(c))
	for i, s := range c {
		if s == "" || strings.ContainsAny(s, " \t\n\"'`\\$") || strconv.Quote(s) != `"`+s+`"` {
			s = strconv.Quote(s)
		}
		w[i] = s
	}
	return strings.Join(w, " ")
}

// RunShellEnd is how a shell ended, as its end note says it.
type RunShellEnd struct {
	// Exit is its code, or 128 and N for a signal N; Signal names it.
	Exit   int
	Signal string
	// Detached: the person pressed Ctrl-], which closed the shell's
	// terminal and so hung it up.
	Detached bool
	// RunGone: the run's sandbox had ended when the shell did.
	RunGone bool
}

// words says how a shell ended, in a note's words.
func (e RunShellEnd) words() string {
	var s string
	switch {
	case e.Signal != "":
		s = fmt.Sprintf("it was ended by %s (exit %d)", e.Signal, e.Exit)
	default:
		s = fmt.Sprintf("it exited %d", e.Exit)
	}
	switch {
	case e.Detached:
		s += ", hung up as Ctrl-] detached it"
	case e.RunGone:
		s += ", as the run's sandbox ended"
	}
	return s
}

// RunShellStartNote is the note written when a shell is opened.
func RunShellStartNote(t RunShellTarget, node string, command []string, pid int) string {
	return fmt.Sprintf("A shell was opened in the sandbox of run %s by %s, on node %s: `%s` (PID %d on the host).\n",
		t.Run, t.By, node, quoteCommand(command), pid)
}

// RunShellEndNote is the note written when a shell ends.
func RunShellEndNote(t RunShellTarget, command []string, open time.Duration, end RunShellEnd) string {
	return fmt.Sprintf("The shell %s opened in the sandbox of run %s, `%s`, was open %s: %s.\n",
		t.By, t.Run, quoteCommand(command), open.Round(time.Millisecond/10), end.words())
}

// RunShellNote writes text where run t is, as the node user: a reply to
// the run's post in its thread, or a change to its ticket. It returns
// the note's hash.
func (n actions) RunShellNote(ctx context.Context, t RunShellTarget, text string) (string, error) {
	_, r, err := n.toolRepoIn(t.Project.Name)
	if err != nil {
		return "", err
	}
	defer r.Close()
	code, err := r.ProjectCode(ctx)
	if err != nil {
		return "", err
	}
	note := fossilio.NoteWrite{Login: n.node.Config.User, Ticket: t.Record, Text: text}
	if !t.Ticket {
		info, err := r.Info(ctx, t.Run)
		if err != nil {
			return "", fmt.Errorf("run %s: %w", t.Run, err)
		}
		note = fossilio.NoteWrite{Login: n.node.Config.User, Thread: info.Root, ReplyTo: info.Hash, Text: text}
	}
	hash, err := n.node.Writer(t.Project, code).WriteNote(ctx, note)
	if err != nil {
		return "", fmt.Errorf("the shell's note on run %s: %w", t.Run, err)
	}
	n.node.Backoffice(ctx, node.NewAnswer("run shell", false), t.Project)
	return hash, nil
}
