package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/actors/turn"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/runner"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/host/usage"
	"github.com/ocx-go/ocx/host/version"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// Exit codes of the workspace command.
const (
	// ExitOK: the session ended as it should: stopped on request or by a
	// signal, a completes session's report written, a CI result tagged.
	ExitOK = 0
	// exitFailed: the session could not run, or a CI run could not put its
	// result on the record.
	exitFailed = 1
	// ExitUsage: the command line is wrong; nothing was read or written.
	ExitUsage = 2
)

// Log attribute keys, one place for all (STYLE 7).
const (
	keyWorkspace = "workspace"
	keyEvent     = "event"
	keyPost      = "post"
	keyRecord    = "record"
	keyLaunch    = "launch"
	keyErr       = "error"
	keyAttempt   = "attempt"
	keyHash      = "hash"
	keyWhy       = "why"
	keyEnded     = "ended"
	keyLine      = "line"
	keySignal    = "signal"
	keyPID       = "pid"
	keyCheckin   = "checkin"
	keyTag       = "tag"
	keyFiles     = "files"
)

// Main runs the workspace command with args (the command line after the
// program's name) and returns its exit code. It handles its own signals,
// since TERM is part of a session's life: passed on to a running turn, then
// a stopped note on the record.
func Main(args []string, stdout, stderr io.Writer) int {
	o, err := ParseArgs(args)
	switch {
	case errors.Is(err, errHelp):
		writeUsage(stdout, o.Verb)
		return ExitOK
	case errors.Is(err, errVersion):
		fmt.Fprint(stdout, version.Line("workspace"))
		return ExitOK
	case err != nil:
		if o.Verb == "" {
			fmt.Fprintf(stderr, "workspace: %v\n%sRun \"workspace --help\" for what each verb does.\n", err, synopsisText)
			return ExitUsage
		}
		fmt.Fprintf(stderr, "workspace %s: %v\nusage: workspace %s LOGIN/PROJECT --root AGENTS %s (workspace %s --help says more)\n",
			o.Verb, err, o.Verb, verbArgs[o.Verb], o.Verb)
		return ExitUsage
	}
	if o.Verb == verbStart && o.ReadyFD == 0 {
		return startDetached(o, stdout, stderr)
	}
	if o.ReadyFD > 0 {
		// The descriptor `start` passed is for this process alone: no fossil
		// command or turn started meanwhile may hold it open.
		unixhost.CloseOnExec(o.ReadyFD)
	}
	// Signals are caught before anything else, so that TERM during the start
	// still ends in a stopped note rather than a bare death.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unixhost.OSSignals(host.SIGTERM, host.SIGINT, host.SIGHUP)...)
	defer signal.Stop(sigs)
	log := slog.New(unixhost.LogHandler(stderr, unixhost.LogText, nil)).With(keyWorkspace, o.Key.String())
	s := &session{o: o, log: log, errOut: stderr, sigs: sigs, retry: defaultRetry}
	return s.Run(context.Background())
}

func writeUsage(w io.Writer, verb string) {
	if verb == "" {
		fmt.Fprint(w, usageText)
		return
	}
	fs := newFlagSet(&options{Verb: verb}, w)
	fs.Usage()
}

// retryPolicy bounds how often a failure to reach the server is tried again.
type retryPolicy struct {
	attempts int
	delay    time.Duration // before the second attempt; doubled after each
}

var defaultRetry = retryPolicy{attempts: 5, delay: 200 * time.Millisecond}

// record is the session's own record: the thread or ticket it was started
// for, where its definition, work and report go (seed 000).
type record struct {
	Kind messages.ListenKind // thread or ticket
	// ID is the thread's root post or the ticket's id.
	ID string
	// First is the record's first post (the root) or first ticket change.
	First string
	// Objective is the text of the record's first post: what a completes
	// session's first turn works on.
	Objective string
}

// session is one session process.
type session struct {
	o      options
	log    *slog.Logger
	errOut io.Writer
	sigs   chan os.Signal
	retry  retryPolicy

	layout host.Layout
	ws     host.Workspace
	root   *unixhost.Root
	b      *messages.Binding
	fsl    *fossilio.Fossil
	// remote is the node as the session reaches it (remote.go); tools is
	// it when the clone remembers no password (D39), else nil.
	remote remote
	tools  *toolsRemote
	// sync is the way to the server through the node's sync socket
	// (sync.go, D49), nil when the session reaches it over the network
	// (a terminal session) or through the tools.
	sync  *syncLink
	clone *fossilio.Repo
	// node is the node's repository, where senders are known; nil unless it
	// is readable, which it is only outside the sandbox.
	node *fossilio.Repo
	// held is the workspace directory, flocked for the session's life
	// (holdWorkspace).
	held *unixhost.Dir

	def     *messages.SessionDefinition
	defHash string
	launch  *messages.LaunchNote
	// launchPost is where the launch note is, to reply to it.
	launchPost turn.Post
	rec        record

	// readMode is how a woken post is read: readFetch, or readPull
	// (OCX_SESSION_READ=pull).
	readMode string

	// answered are the posts this process handled; answeredLog those the
	// workspace's sessions answered (WS/session/answered).
	answered    map[string]bool
	answeredLog *answeredLog
	wakes       *wakeQueue
	reader      *unixhost.PipeReader
	readDone    chan error
	// stopSig is the first stopping signal received, nil until one is.
	stopSig os.Signal
	// turns is the session's account of its turns (D50); nil when it
	// could not be started.
	turns *usage.Turns
}

// Run runs the session until it ends, and returns the exit code.
func (s *session) Run(ctx context.Context) int {
	s.answered = make(map[string]bool)
	defer s.close()
	if err := s.check(); err != nil {
		fmt.Fprintf(s.errOut, "workspace %s: %v\n", s.o.Verb, err)
		return exitFailed
	}
	if s.o.Verb == verbRun {
		if err := refuseIfNamed(s.layout, s.o.Key.String()); err != nil {
			fmt.Fprintf(s.errOut, "workspace %s: %v\n", s.o.Verb, err)
			return exitFailed
		}
	}
	if err := s.holdWorkspace(); err != nil {
		fmt.Fprintf(s.errOut, "workspace %s: %v\n", s.o.Verb, err)
		s.log.Error("cannot run", keyEvent, "failed", keyErr, err)
		return exitFailed
	}
	if err := s.listen(); err != nil {
		fmt.Fprintf(s.errOut, "workspace %s: %v\n", s.o.Verb, err)
		return exitFailed
	}
	s.log.Info("listening", keyEvent, "listening", keyPID, os.Getpid(), "wake", s.ws.Wake, keyLaunch, s.o.Launch)
	if err := s.prepare(ctx); err != nil {
		s.log.Error("cannot run", keyEvent, "failed", keyErr, err)
		return s.finish(exitFailed, "cannot run")
	}
	s.log.Info("ready", keyEvent, "ready", keyRecord, s.rec.ID, "kind", string(s.def.Kind),
		"lifetime", string(s.def.Lifetime), "definition", s.defHash)
	s.sayReady()
	s.startTurns()
	if stop := s.armWall(); stop != nil {
		defer stop()
	}
	if s.signaled() {
		return s.stopBySignal(ctx)
	}
	if s.launch != nil && s.launch.Checkin != "" {
		return s.ci(ctx)
	}
	if s.def.Lifetime == messages.Completes {
		first := turn.Post{Hash: s.rec.First, Kind: s.rec.Kind, Record: s.rec.ID, Text: s.rec.Objective}
		s.log.Info("first turn on the record's objective", keyEvent, "objective", keyPost, first.Hash)
		if s.turn(ctx, first) {
			return s.finish(ExitOK, "report written")
		}
		if s.stopSig != nil {
			return s.stopBySignal(ctx)
		}
	}
	return s.loop(ctx)
}

// check validates the workspace before anything is written: it exists, its
// binding decodes and names this workspace, its clone and tree are there.
func (s *session) check() error {
	if err := checkRoot(s.o.Root); err != nil {
		return err
	}
	l, err := host.NewLayout(s.o.Root)
	if err != nil {
		return err
	}
	ws, err := l.Workspace(s.o.Key)
	if err != nil {
		return err
	}
	s.layout, s.ws = l, ws
	st, err := os.Lstat(ws.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("workspace %s does not exist: no directory %s", s.o.Key, ws.Dir)
	}
	if err != nil {
		return fmt.Errorf("workspace %s: %w", s.o.Key, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("workspace %s: %s is not a directory", s.o.Key, ws.Dir)
	}
	root, err := unixhost.OpenRoot(s.o.Root)
	if err != nil {
		return err
	}
	s.root = root
	data, err := root.ReadFile(ws.Binding, unixhost.SmallFile)
	if err != nil {
		return fmt.Errorf("workspace %s: read binding: %w", s.o.Key, err)
	}
	b, err := messages.DecodeBinding(data)
	if err != nil {
		return fmt.Errorf("workspace %s: %s: %w", s.o.Key, ws.Binding, err)
	}
	if b.Key() != s.o.Key {
		return fmt.Errorf("workspace %s: %s is the binding of %s", s.o.Key, ws.Binding, b.Key())
	}
	s.b = b
	for _, p := range []string{ws.Clone, ws.Tree} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("workspace %s is incomplete: %w", s.o.Key, err)
		}
	}
	return nil
}

// listen makes the wake pipe if it is missing and opens it for reading:
// from then on the session is listening (seed 000). Lines are queued as they
// come, so a turn never makes the session miss one.
func (s *session) listen() error {
	if err := s.root.MkdirAll(s.ws.Session, 0o700); err != nil {
		return err
	}
	if err := s.root.Mkfifo(s.ws.Wake, 0o600); err != nil {
		return err
	}
	r, err := unixhost.OpenPipeReader(s.root, s.ws.Wake)
	if err != nil {
		return err
	}
	s.reader = r
	s.wakes = newWakeQueue()
	s.readDone = make(chan error, 1)
	go func() {
		s.readDone <- r.Run(func(line []byte) {
			s.log.Info("wake read", keyEvent, "wake", keyLine, string(line))
			s.wakes.push(string(line))
		})
	}()
	return nil
}

// prepare reaches the server and reads what the session is: the launch note,
// the session definition, the record; then rebuilds the listening index.
func (s *session) prepare(ctx context.Context) error {
	rem, err := fossilio.Remembered(ctx, s.ws.Clone)
	sock := os.Getenv(host.MCPSocketEnv)
	switch {
	case errors.Is(err, fossilio.ErrNoPassword) && sock != "":
		// restrict no_password (D39): the node writes for the session, as its
		// agent login, through the tools on its MCP socket.
		s.tools = &toolsRemote{path: sock, wait: mcpWait}
		s.remote = s.tools
		s.log.Info("the clone remembers no password: the session reads and writes through the node's tools", keyEvent, "no-password", "socket", sock)
	case errors.Is(err, fossilio.ErrNoPassword):
		return fmt.Errorf("the password the clone remembers: %w, and no $%s names the node's tools to write through instead (D39)", err, host.MCPSocketEnv)
	case err != nil:
		return fmt.Errorf("the password the clone remembers: %w", err)
	default:
		c := &fossilio.Client{URL: s.b.Remote, Login: s.b.Login, Password: rem.Password, ProjectCode: s.b.ProjectCode}
		if syncSock := os.Getenv(host.SyncSocketEnv); syncSock != "" {
			// Under the daemon: the server through the node, never by the
			// sandbox's network (D49).
			if s.sync, err = s.openSync(ctx, syncSock); err != nil {
				return err
			}
			c.HTTP = s.sync.http()
			s.log.Info("the session reaches its project's server through the node's sync socket", keyEvent, "sync",
				"socket", syncSock, "relay", s.sync.proxy())
		}
		s.remote = syncRemote{c}
	}
	if rem.Login != s.b.Login {
		return fmt.Errorf("the clone %s remembers login %q, not the workspace's %q", s.ws.Clone, rem.Login, s.b.Login)
	}
	s.fsl = &fossilio.Fossil{Home: s.ws.Dir, User: s.b.Login, Dir: s.ws.Tree}
	if s.sync != nil {
		s.fsl.Proxy = s.sync.proxy()
	}
	s.readMode = readFetch
	if os.Getenv("OCX_SESSION_READ") == readPull {
		s.readMode = readPull
	}
	if s.answeredLog, err = loadAnswered(s.root, answeredFile(s.ws.Session)); err != nil {
		s.log.Warn("the answered posts cannot be read; taken as none", keyEvent, "answered-file", keyErr, err)
	}
	// The clone is pulled once, at the start: the launch note, the session
	// definition and the record are read there, and a turn's runner finds
	// the record as it was then. Each post a wake line names is fetched
	// alone.
	s.pull(ctx)
	clone, err := fossilio.OpenClone(s.ws.Clone, nil)
	if err != nil {
		return err
	}
	s.clone = clone
	s.openNode()
	if s.o.Verb == verbServe {
		if err := s.readLaunch(ctx); err != nil {
			return err
		}
	} else if err := s.findDefinition(ctx); err != nil {
		return err
	}
	if err := s.readRecord(ctx); err != nil {
		return err
	}
	if s.launch != nil && s.launch.Checkin != "" && s.def.Kind != messages.Mechanical {
		return fmt.Errorf("launch %s names check-in %s, but its session %s is not mechanical: CI runs a command", s.o.Launch, s.launch.Checkin, s.defHash)
	}
	if err := s.findProgram(); err != nil {
		return err
	}
	return s.indexFromNode(ctx)
}

// findProgram checks the program every turn runs is on PATH, so that a
// session that could answer nothing says so at its start rather than in
// every answer. A program named with a '/' is left to the turn: it may be
// in the tree, which a CI run only then puts on its check-in.
func (s *session) findProgram() error {
	prog, what := "", ""
	switch s.def.Kind {
	case messages.Mechanical:
		prog, what = s.def.Command[0], "command"
	case messages.LLM:
		prog, what = "ocx-runner-"+s.def.Runner, "runner"
	}
	if prog == "" || strings.Contains(prog, "/") {
		return nil
	}
	if _, err := exec.LookPath(prog); err != nil {
		return fmt.Errorf("the session's %s %s is not on PATH (%s): %w", what, prog, os.Getenv("PATH"), err)
	}
	return nil
}

// openNode opens the node's repository when it is readable (a terminal
// session on the node's host), so that a post's sender is known. Inside the
// sandbox it never is.
func (s *session) openNode() {
	data, err := unixhost.Below(s.layout.Root()).ReadFile(s.layout.NodeJSON(), unixhost.NodeFile)
	if err != nil {
		return
	}
	nc, err := messages.DecodeNodeConfig(data)
	if err != nil {
		s.log.Warn("node.json does not decode; senders stay unknown", keyEvent, "node", keyErr, err)
		return
	}
	p, ok := nc.Projects[s.b.Project]
	if !ok {
		return
	}
	r, err := fossilio.OpenNode(p.Repository, nil)
	if err != nil {
		return
	}
	s.node = r
}

// sayReady tells `workspace start`, which detached this process, that it is
// listening and knows what it is.
func (s *session) sayReady() {
	if s.o.ReadyFD <= 0 {
		return
	}
	f := os.NewFile(uintptr(s.o.ReadyFD), "ready")
	if f == nil {
		return
	}
	_, _ = f.WriteString("ready\n")
	f.Close()
}

// loop answers wake lines until the session ends, and returns its exit code.
func (s *session) loop(ctx context.Context) int {
	for {
		select {
		case sig := <-s.sigs:
			s.noteSignal(sig)
			return s.stopBySignal(ctx)
		case err := <-s.readDone:
			s.readDone <- err
			s.log.Error("the wake pipe cannot be read", keyEvent, "failed", keyErr, err)
			return s.finish(exitFailed, "wake pipe lost")
		case <-s.wakes.ready:
			for {
				line, ok := s.wakes.pop()
				if !ok {
					break
				}
				switch s.handle(ctx, line) {
				case outcomeStop:
					return s.finish(ExitOK, "stopped on request")
				case outcomeReport:
					return s.finish(ExitOK, "report written")
				}
				if s.stopSig != nil {
					return s.stopBySignal(ctx)
				}
			}
		}
	}
}

type outcome int

const (
	outcomeGoOn outcome = iota
	outcomeStop
	outcomeReport
)

// handle acts on one wake line: one turn, a skip, or a stop.
func (s *session) handle(ctx context.Context, line string) outcome {
	wl, err := pipe.ParseWakeLine([]byte(line))
	if err != nil {
		s.log.Warn("wake line is not a post's hash and its sender; not answered", keyEvent, "refused", keyLine, line, keyErr, err)
		return outcomeGoOn
	}
	hash := wl.Post
	if s.launch != nil && s.launch.Checkin != "" {
		s.log.Info("a CI session answers no post", keyEvent, "not-answered", keyPost, hash)
		return outcomeGoOn
	}
	if s.answered[hash] {
		s.log.Info("already seen", keyEvent, "skip", keyPost, hash, keyWhy, "this session already handled it")
		return outcomeGoOn
	}
	if s.isAnswered(hash) {
		// Told before reading anything: WS/session/answered names it.
		s.answered[hash] = true
		s.log.Info("woken", keyEvent, turn.SkipAnswered.String(), keyPost, hash, keyWhy, "a session of this workspace already answered it")
		return outcomeGoOn
	}
	p, err := s.readWoken(ctx, hash)
	if err != nil {
		s.log.Error("post not answered: it cannot be read", keyEvent, "not-answered", keyPost, hash, keyErr, err)
		return outcomeGoOn
	}
	// Who sent it is what the hook read on the node, never the name inside.
	p.Sender = wl.From
	if p.Checkin {
		return s.handleCheckin(ctx, p)
	}
	// Whether it was answered was told above, from WS/session/answered.
	d := turn.Decide(s.b.Login, s.rec.ID, p, false)
	s.log.Info("woken", keyEvent, d.Action.String(), keyPost, hash, keyRecord, p.Record, "from", p.Sender, "author", p.Author, keyWhy, d.Why)
	switch d.Action {
	case turn.Answer:
		if s.signaled() {
			s.log.Warn("post not answered: the session is stopping", keyEvent, "not-answered", keyPost, hash)
			return outcomeGoOn
		}
		if s.turn(ctx, p) {
			return outcomeReport
		}
	case turn.Stop:
		if s.writeStopped(ctx, &messages.StoppedNote{Login: s.b.Login, Project: s.b.Project, Launch: s.o.Launch,
			Cause: messages.StopByRequest, Request: hash}, p, true) {
			// A stop request woken again must not stop the next session.
			s.markAnswered(hash)
		}
		s.answered[hash] = true
		return outcomeStop
	case turn.SkipStop:
		// Not remembered: whether a stop counts depends on the line too (a
		// line naming no sender), so a later wake for it is decided again.
	default:
		s.answered[hash] = true
	}
	return outcomeGoOn
}

// handleCheckin answers a check-in the hook gave the session (seed 001
// E7): one turn on it, its answer on the session's own record. A session
// that asked for no check-ins, or whose own login sent it, answers nothing.
func (s *session) handleCheckin(ctx context.Context, p turn.Post) outcome {
	s.answered[p.Hash] = true
	switch {
	case len(s.def.Checkins) == 0:
		s.log.Warn("given a check-in, but the session's definition names no checkins; not answered", keyEvent, "not-answered", keyPost, p.Hash, "from", p.Sender)
		return outcomeGoOn
	case p.Sender == s.b.Login:
		s.log.Info("woken", keyEvent, turn.SkipOwn.String(), keyPost, p.Hash, keyWhy, "the agent sent the check-in")
		return outcomeGoOn
	case s.signaled():
		s.log.Warn("check-in not answered: the session is stopping", keyEvent, "not-answered", keyPost, p.Hash)
		return outcomeGoOn
	}
	p.Kind, p.Record, p.Text = s.rec.Kind, s.rec.ID, turn.CheckinTurn(p)
	s.log.Info("woken", keyEvent, turn.Answer.String(), keyPost, p.Hash, keyRecord, p.Record, "from", p.Sender, keyWhy, "a check-in on a branch the session is given")
	if s.turn(ctx, p) {
		return outcomeReport
	}
	return outcomeGoOn
}

// turn runs one turn on post p and replies with its answer; it says whether
// the answer was a report now on the record (which ends a completes session).
func (s *session) turn(ctx context.Context, p turn.Post) bool {
	s.holdTurn(p.Hash)
	spec, who, err := s.turnSpec(p)
	var out turn.Output
	var ended turn.Ended
	if err != nil {
		ended = turn.Ended{StartErr: err}
	} else {
		started := s.beforeTurn()
		out, ended = s.runTurn(spec)
		s.afterTurn(p.Hash, started, ended)
	}
	s.releaseTurn()
	s.log.Info("turn ended", keyEvent, "turn", keyPost, p.Hash, keyEnded, ended.String(), "bytes", int64(len(out.Tail))+out.Dropped)
	text := turn.AnswerText(who, out, ended)
	if s.def.Kind == messages.LLM && !ended.OK() {
		// A failed turn says what failed, briefly; a completes session
		// ends on it with a failed report, unless it is being stopped
		// (the turn then failed on the signal passed on to it).
		failed := s.def.Lifetime == messages.Completes && s.stopSig == nil
		text = turn.FailedTurnText(spec.argv[0], out, ended, failed)
		s.log.Warn("the runner failed", keyEvent, "turn-failed", keyPost, p.Hash, keyEnded, ended.String(), "report", failed)
	}
	if s.def.Kind == messages.Mechanical && s.def.Lifetime == messages.Completes && !s.signaled() {
		// A job (D56): its command's end is its result, a report replying
		// to the request that asked for it; a job stopped by a signal has
		// none (its stopped note follows), as a stopped CI run has no tag.
		text = turn.JobResultText(text, out, ended)
		s.log.Info("the job's result", keyEvent, "job-result", keyPost, p.Hash, keyEnded, ended.String())
	}
	h, err := s.replyTo(ctx, p, text)
	if err != nil {
		s.log.Error("answer not written", keyEvent, "not-answered", keyPost, p.Hash, keyErr, err)
		return false
	}
	s.markAnswered(p.Hash)
	report := turn.ReportOf(text)
	s.log.Info("answered", keyEvent, "answered", keyPost, p.Hash, keyHash, h, "report", report != nil)
	return report != nil && s.def.Lifetime == messages.Completes
}

// turnSpec says what a turn on p runs: the session's command with the
// post's text on standard input, or its runner with one line of JSON (D4, D9).
func (s *session) turnSpec(p turn.Post) (turnSpec, string, error) {
	env := append(s.turnEnv(), "OCX_POST="+p.Hash, "OCX_RECORD="+p.Record)
	if from := p.From(); from != "" {
		env = append(env, "OCX_FROM="+from)
	}
	if p.Checkin {
		env = append(env, "OCX_CHECKIN="+p.Hash)
	}
	switch s.def.Kind {
	case messages.Mechanical:
		return turnSpec{argv: s.def.Command, env: env, dir: s.ws.Tree, stdin: []byte(p.Text), combined: true}, "command", nil
	case messages.LLM:
		prog := "ocx-runner-" + s.def.Runner
		in := runner.Input{Post: p.Hash, From: p.From(), Text: p.Text, Record: p.Record, Objective: s.rec.Objective,
			Login: s.b.Login, Session: s.rec.ID}
		env = append(env, "OCX_SESSION_DIR="+s.ws.Session, runner.EnvTurnUsage+"="+s.ws.RunnerUsage())
		return turnSpec{argv: []string{prog, "--model", s.def.Model}, env: env, dir: s.ws.Tree, stdin: in.Line()}, "runner", nil
	}
	return turnSpec{}, "session", fmt.Errorf("session kind %q is not known", s.def.Kind)
}

// turnEnv is the session's environment for a turn, with the relay to the
// node's sync socket (fossilProxyEnv) when it has one.
func (s *session) turnEnv() []string {
	env := os.Environ()
	if s.sync != nil {
		env = append(env, fossilProxyEnv+"="+s.sync.proxy())
	}
	return env
}

// holdTurn writes WS/session/turn while a turn runs (contracts 6): the
// session is working while it exists.
func (s *session) holdTurn(hash string) {
	if err := s.root.WriteFile(s.turnFile(), []byte(hash+"\n"), 0o644); err != nil {
		s.log.Warn("turn file not written", keyEvent, "turn-file", keyErr, err)
	}
}

func (s *session) releaseTurn() {
	if err := s.root.Remove(s.turnFile()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("turn file not removed", keyEvent, "turn-file", keyErr, err)
	}
}

func (s *session) turnFile() string { return filepath.Join(s.ws.Session, "turn") }

// signaled says whether a stopping signal has arrived, taking any waiting.
func (s *session) signaled() bool {
	for {
		select {
		case sig := <-s.sigs:
			s.noteSignal(sig)
		default:
			return s.stopSig != nil
		}
	}
}

func (s *session) noteSignal(sig os.Signal) {
	s.log.Info("signal received", keyEvent, "signal", keySignal, signalName(sig))
	if s.stopSig == nil {
		s.stopSig = sig
	}
}

func signalName(sig os.Signal) string {
	if n, ok := unixhost.SignalOf(sig); ok {
		return n.String()
	}
	return sig.String()
}

// stopBySignal writes the stopped note for the signal received, or for the
// session's own budget, and ends.
func (s *session) stopBySignal(ctx context.Context) int {
	n := &messages.StoppedNote{Login: s.b.Login, Project: s.b.Project, Launch: s.o.Launch,
		Cause: messages.StopBySignal, Signal: signalName(s.stopSig)}
	if b, ok := s.stopSig.(budgetStop); ok {
		n.Cause, n.Signal, n.Budget = messages.StopByBudget, "", b.limit
	}
	if s.rec.ID == "" {
		s.log.Error("stopped before its record was known; no stopped note", keyEvent, "stopped", keySignal, n.Signal)
		return s.finish(ExitOK, "stopped by "+n.Signal)
	}
	to := s.launchPost
	if to.Hash == "" || to.Record != s.rec.ID {
		to = turn.Post{Hash: s.rec.First, Kind: s.rec.Kind, Record: s.rec.ID}
	}
	s.writeStopped(ctx, n, to, false)
	return s.finish(ExitOK, "stopped by "+signalName(s.stopSig))
}

// budgetStop stands among the stopping signals for the session's own wall
// limit: past it the session stops as on TERM (a turn's group gets TERM),
// and its stopped note says cause budget, naming the limit (D40).
type budgetStop struct{ limit string }

func (b budgetStop) String() string { return "budget " + b.limit }

// Signal makes budgetStop an os.Signal.
func (budgetStop) Signal() {}

// wallBackstop is how long past its wall a `serve` session waits for the
// daemon, which enforces the wall (D40), before it stops itself: only a
// session whose daemon is not running gets there.
const wallBackstop = time.Minute

// armWall arms the session's own wall timer (limits.wall). At a terminal
// (`run`, `start`) no daemon watches the session, so the timer is the
// limit: once the session has run that long it stops, between turns or in
// the middle of one, its stopped note saying cause budget. Under the daemon
// (`serve`) the daemon ends the session at its wall, counted from the
// process's start, and writes the end note naming the budget; the session's
// timer is then a backstop, wallBackstop later, for a daemon that is not
// there. Either way one stopping cause is taken, the first, so the session
// writes one stopped note. It returns the timer's stop, or nil when the
// definition sets no wall.
func (s *session) armWall() func() bool {
	if s.def == nil || s.def.Wall() == "" {
		return nil
	}
	d, err := messages.ParseWall("limits.wall", s.def.Wall())
	if err != nil {
		return nil // the definition was validated; a bad wall cannot get here
	}
	if s.o.Verb == verbServe {
		d += wallBackstop
	}
	s.log.Info("wall limit armed", keyEvent, "wall", "wall", s.def.Wall(), "after", d.String())
	t := time.AfterFunc(d, func() {
		select {
		case s.sigs <- budgetStop{limit: messages.LimitWall}:
		default: // a stopping signal is already waiting
		}
	})
	return t.Stop
}

// finish logs the end, and every wake line read but not answered.
func (s *session) finish(code int, why string) int {
	for {
		line, ok := s.wakes.pop()
		if !ok {
			break
		}
		s.log.Warn("wake line not answered: the session ends", keyEvent, "not-answered", keyLine, line)
	}
	s.log.Info("session ends", keyEvent, "end", keyWhy, why, "exit", code)
	return code
}

// close releases what the session holds: the wake pipe last but one, so
// that nobody writes to a pipe without a reader while the session still runs.
// holdWorkspace takes an exclusive flock on the workspace directory for as
// long as this process runs: a workspace runs one session at a time
// (seed 000). The process table, which the daemon and `workspace run`
// consult first, cannot see a session whose exec is under way, so two
// starts in the same moment would both pass it; the lock lets only one go
// on. The directory is the same inside the sandbox (bound at its own path),
// the descriptor is not inherited by what the session runs, and the kernel
// drops the lock when the process ends, however it ends.
func (s *session) holdWorkspace() error {
	d, err := s.root.OpenDir(s.ws.Dir)
	if err != nil {
		return fmt.Errorf("lock workspace %s: %w", s.o.Key, err)
	}
	if err := unixhost.TryLock(d.File(), unixhost.Exclusive); err != nil {
		d.Close()
		if held := (*unixhost.HeldError)(nil); errors.As(err, &held) {
			holder := ""
			if held.PID > 0 {
				holder = fmt.Sprintf(" (pid %d)", held.PID)
			}
			return fmt.Errorf("workspace %s is in use: another session holds its lock%s; a workspace runs one session at a time", s.o.Key, holder)
		}
		return fmt.Errorf("lock workspace %s: %w", s.o.Key, err)
	}
	s.held = d
	return nil
}

func (s *session) close() {
	if s.held != nil {
		s.held.Close()
	}
	if s.reader != nil {
		s.reader.Close()
		<-s.readDone
	}
	if s.clone != nil {
		s.clone.Close()
	}
	if s.node != nil {
		s.node.Close()
	}
	if s.tools != nil {
		s.tools.close()
	}
	s.sync.close()
	if s.root != nil {
		s.root.Close()
	}
}

// wakeQueue holds wake lines read but not yet handled: the reader never
// waits for a turn, and no line read is lost.
type wakeQueue struct {
	mu    sync.Mutex
	lines []string
	ready chan struct{}
}

func newWakeQueue() *wakeQueue { return &wakeQueue{ready: make(chan struct{}, 1)} }

func (q *wakeQueue) push(line string) {
	q.mu.Lock()
	q.lines = append(q.lines, line)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *wakeQueue) pop() (string, bool) {
	if q == nil {
		return "", false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.lines) == 0 {
		return "", false
	}
	l := q.lines[0]
	q.lines = q.lines[1:]
	return l, true
}
