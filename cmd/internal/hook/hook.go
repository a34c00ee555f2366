// Package hook is OCX's wake hook, run by Fossil's after-receive: it wakes
// the sessions listening to what arrived, notes a person's post nobody heard,
// hands posts and check-ins to the daemon and keeps the git mirror current.
package hook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ocx-go/ocx/actors/wake"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/fossilio/remote"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/listening"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/runmsg"
	"github.com/ocx-go/ocx/messages/strictjson"
	"github.com/ocx-go/ocx/messages/wire"
)

// Options say which repository's arrivals to handle, and how.
type Options struct {
	// Agents is the agents root (--agents).
	Agents string
	// Repo is the repository as Fossil names it (%R).
	Repo string
	// Stdin is Fossil's list of what arrived: one artifact per line, its
	// hash first.
	Stdin io.Reader
	// Config, when set, is node.json as the caller read it (the daemon's);
	// nil reads it.
	Config *messages.NodeConfig
	// Open, when set, gives the repository at a path already open, kept
	// open by the caller (the daemon's own reader of it); the hook does not
	// close it. Nil opens it for the run.
	Open func(path string) (*fossilio.Repo, error)
	// Index, when set, gives the daemon's live index of the repository at
	// a path: what it has classified is not classified again (the records
	// actor then finds the hook's lines read too). Nil classifies all.
	Index func(path string) (*record.Index, error)
	// ByDaemon says the daemon runs this work for a hook that asked it on
	// its socket (Answer); the log says so.
	ByDaemon bool
	// Fallback, when set, says why the daemon did not do this run's work
	// (ocx-hook ran the hook itself): it is logged.
	Fallback string
	// Hashes, when set, is that list already read (the daemon's socket
	// carries it so): Stdin is not read then.
	Hashes []string
	// Log receives one line per action; nil opens AGENTS/hook.log.
	Log *slog.Logger
	// Release is the directory of the release's ocxd; empty means the
	// release node.json names, or the running executable's directory.
	Release string
	// Fossil is the fossil executable (git export); empty means "fossil".
	Fossil string
	// DaemonWait bounds the wait for a daemon the hook started to read its
	// pipe; zero means daemonclient.DefaultWait.
	DaemonWait time.Duration
	// LockWait bounds the wait for another run of the hook on the same
	// repository to finish; zero means DefaultLockWait.
	LockWait time.Duration
	// Hand, when set with ByDaemon, hands the posts to the daemon in its
	// own process, as its pipe's lines are (D88): no line is written back
	// into the daemon's own pipe. An error (its inputs are paused for a
	// re-exec) writes them into the pipe, for the image that reads it next.
	Hand func(lines []pipe.Line) error
	// Poke, when set, pokes these remote nodes beside the run (the
	// daemon's, which does not wait for them); nil pokes them from the
	// hook's own process, each bounded by pokeWait (D72).
	Poke func(targets []remote.Target)
}

// pokeWait bounds a poke the hook's own process makes: a remote node
// that does not answer at once pulls on its timer instead.
const pokeWait = 300 * time.Millisecond

// keyError is the log key of an error: the daemon's (actors.keyError),
// so that one search finds every failure in the hook's log and ocxd's.
const keyError = "error"

// wakeWait bounds how long a run waits for room in a session's wake pipe
// (a session reads its pipe at once, so a full one is a session far behind
// or stuck). A pipe found full is not waited for again in the same run: the
// hook never waits long on an agent.
const wakeWait = 100 * time.Millisecond

// errFullEarlier: a wake pipe found full earlier in the run, not waited for
// again.
var errFullEarlier = fmt.Errorf("%w, earlier in this run", host.ErrPipeFull)

// DefaultLockWait bounds how long a run waits for an overlapping run (two
// backoffice runs may overlap, D11) before it goes on without the lock.
const DefaultLockWait = 10 * time.Second

// Prepare readies the process Fossil started: its environment is whatever
// the backoffice's parent had (a CGI request's, even: fossil-2.21.md 4.4),
// so it is replaced by a clean one; its standard output, which Fossil has
// closed, is pointed at /dev/null so that nothing can fail writing there;
// and so is its standard error, inherited from whoever ran the backoffice:
// a caller that reads it to its end (a tool running `fossil backoffice`)
// would otherwise wait for the hook, and for anything the hook started.
// The hook's log is AGENTS/hook.log.
func Prepare(agents string) error {
	os.Clearenv()
	for k, v := range map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": agents, "LANG": "C.UTF-8"} {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	return unixhost.PointAtDevNull(1, 2)
}

// Run handles one after-receive. Each action happens whatever another's
// outcome; the error reports only what kept the hook from starting at all.
func Run(ctx context.Context, o Options) error {
	_, err := Done(ctx, o)
	return err
}

// Done handles one after-receive as Run does, and says what it handled.
func Done(ctx context.Context, o Options) (wire.HookDone, error) {
	layout, err := host.NewLayout(o.Agents)
	if err != nil {
		return wire.HookDone{}, fmt.Errorf("hook: %w", err)
	}
	log := o.Log
	if log == nil {
		f, err := unixhost.OpenLog(layout.HookLog(), unixhost.LogText)
		if err != nil {
			return wire.HookDone{}, fmt.Errorf("hook: open its log: %w", err)
		}
		defer f.Close()
		log = slog.New(f.Handler(nil))
	}
	h := &run{o: o, layout: layout, log: log, refusals: unixhost.NewRefusalLog(log)}
	if o.Fallback != "" {
		log.Warn("the daemon did not do the hook's work; the hook does it itself", "repository", o.Repo, "why", o.Fallback)
	}
	if err := h.run(ctx); err != nil {
		log.Error("hook", "repository", o.Repo, keyError, err)
		return wire.HookDone{}, err
	}
	return h.done, nil
}

type run struct {
	o      Options
	layout host.Layout
	log    *slog.Logger
	cfg    *messages.NodeConfig
	repo   string // the repository file, absolute
	proj   string
	root   *unixhost.Root
	r      *fossilio.Repo
	logins map[string]bool // the node's logins (agents and the node user)
	// listeners are the sessions listening to each record, found once.
	listeners map[string][]wake.Target
	// standing says, for each sender met, whether it holds admin or setup.
	standing map[string]bool
	// defaultHears is whom a session without a hears file hears.
	defaultHears []string
	// checkins are the sessions given check-ins, read once a run.
	checkins *[]wake.CheckinTarget
	// refusals logs, once a run, each file below the agents root it would
	// not read (a link, a pipe, a file past its bound: docs/trust.md).
	refusals *unixhost.RefusalLog
	// done is what the run handled, when it is over.
	done wire.HookDone
}

func (h *run) run(ctx context.Context) error {
	start := time.Now()
	var err error
	if h.cfg = h.o.Config; h.cfg == nil {
		data, err := unixhost.Below(h.layout.Root()).ReadFile(h.layout.NodeJSON(), unixhost.NodeFile)
		if err != nil {
			return err
		}
		if h.cfg, err = messages.DecodeNodeConfig(data); err != nil {
			return err
		}
	}
	if h.repo, err = filepath.Abs(h.o.Repo); err != nil {
		return err
	}
	proj, ok := h.cfg.ProjectOfRepository(h.repo)
	if !ok {
		// Fossil may name the file through another path (a link); node.json
		// names it as the node was set up.
		proj, h.repo, ok = h.sameFile(h.repo)
	}
	if !ok {
		return fmt.Errorf("%s is not a repository of this node (node.json)", h.o.Repo)
	}
	h.proj = proj
	stdin := h.o.Hashes
	if stdin == nil {
		stdin = wire.HookHashes(h.o.Stdin)
	}
	if h.root, err = unixhost.OpenRoot(h.layout.Root()); err != nil {
		return err
	}
	defer h.root.Close()

	mark, unlock := h.lockMark(ctx)
	defer unlock()
	// An artifact whose bytes do not read is passed over, logged once (D47).
	if h.o.Open != nil {
		if h.r, err = h.o.Open(h.repo); err != nil {
			return err
		}
	} else {
		if h.r, err = fossilio.OpenNode(h.repo, record.NewPassedLog(h.log).Options()); err != nil {
			return err
		}
		defer h.r.Close()
	}
	infos, last, err := h.arrived(ctx, stdin, mark)
	if err != nil {
		return err
	}
	h.logins = h.nodeLogins()

	// What a run before this one may have done already: it died (a daemon
	// killed outright, say) after its work for these receipts began and
	// before it moved the mark past them. Their unheard notes are looked
	// for on the record before they are written (noteUnheard); a wake
	// written twice is skipped by the session, a line twice by the daemon.
	redone := h.redone(infos, mark)
	if len(infos) > 0 && mark.ok && last > mark.value {
		if err := mark.begin(last); err != nil {
			h.log.Error("store the hook's mark", keyError, err)
		}
	}
	unheard := h.wake(ctx, infos)
	h.pruneWoken(infos)
	h.handToDaemon(ctx, infos)
	h.poke(ctx, infos)
	notesErr := h.noteUnheard(ctx, unheard, redone)
	h.gitExport(ctx, infos)
	if notesErr != nil && mark.ok && last > mark.value {
		// A note not written (the server away) is not lost: the mark
		// stays where it was, saying this run worked up to last, so the
		// next run (the hook watch's, within its period) handles these
		// receipts again and writes each note the record lacks.
		h.log.Warn("unheard notes not written; the receipts are handled again by the next run", "mark", mark.value, "working", last, keyError, notesErr)
	} else if last > mark.value || !mark.ok || mark.working != 0 {
		if err := mark.store(max(last, mark.value)); err != nil {
			h.log.Error("store the hook's mark", keyError, err)
		}
	}
	h.done = wire.HookDone{Artifacts: len(infos), Mark: uint64(max(last, mark.value, 0))}
	h.log.Info("hook done", "repository", h.repo, "artifacts", len(infos), "stdin", len(stdin), "mark", max(last, mark.value), "elapsed", time.Since(start), "by", h.by())
	return nil
}

// by says who ran the hook's work, for its log: the daemon, or the hook's
// own process.
func (h *run) by() string {
	if h.o.ByDaemon {
		return "daemon"
	}
	return "hook"
}

// sameFile finds the project whose repository is the file at path.
func (h *run) sameFile(path string) (string, string, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", false
	}
	for _, name := range h.cfg.ProjectNames() {
		repo := h.cfg.Projects[name].Repository
		if other, err := os.Stat(repo); err == nil && os.SameFile(st, other) {
			return name, repo, true
		}
	}
	return "", "", false
}

// arrived lists what to handle: what Fossil listed and what the repository
// received after the hook's own mark, each once, minus what an earlier run
// handled. Without a mark (a hook installed by hand), only Fossil's list.
func (h *run) arrived(ctx context.Context, stdin []string, m *mark) ([]fossilio.Info, int64, error) {
	after := int64(math.MaxInt64)
	if m.ok {
		after = m.value
	}
	received, last, err := h.r.Received(ctx, after)
	if err != nil {
		return nil, 0, err
	}
	seen := map[string]bool{}
	var all []string
	for _, list := range [][]string{received, stdin} {
		for _, x := range list {
			if !seen[x] {
				seen[x] = true
				all = append(all, x)
			}
		}
	}
	infos := h.classify(ctx, all)
	kept := infos[:0]
	for _, info := range infos {
		// Past last is a receipt Received stopped before (a web page is
		// still writing one before it): the next run has it, finished.
		if !m.ok || (info.Receipt > m.value && info.Receipt <= last) {
			kept = append(kept, info)
		}
	}
	return kept, last, nil
}

// classify classifies the hashes, in their order, leaving out (and
// logging) a hash the repository no longer has, such as a post rejected
// by a moderator. What the daemon's live index has just read (Options.Index)
// is taken from it; the rest is classified in one read.
func (h *run) classify(ctx context.Context, hashes []string) []fossilio.Info {
	known := map[string]fossilio.Info{}
	rest := hashes
	if x := h.index(ctx); x != nil {
		rest = nil
		for _, hash := range hashes {
			if info, ok := x.Known(hash); ok {
				known[hash] = info
			} else {
				rest = append(rest, hash)
			}
		}
	}
	if len(known) == 0 {
		return h.classifyRepo(ctx, rest)
	}
	for _, info := range h.classifyRepo(ctx, rest) {
		known[info.Hash] = info
	}
	out := make([]fossilio.Info, 0, len(hashes))
	for _, hash := range hashes {
		if info, ok := known[hash]; ok {
			out = append(out, info)
		}
	}
	return out
}

// index is the daemon's live index of the repository brought up to date,
// or nil (none given, or it does not read: the hook classifies itself).
func (h *run) index(ctx context.Context) *record.Index {
	if h.o.Index == nil {
		return nil
	}
	x, err := h.o.Index(h.repo)
	if err == nil {
		err = x.Refresh(ctx)
	}
	if err != nil {
		h.log.Warn("the daemon's index of the repository does not read; the hook classifies what arrived itself", keyError, err)
		return nil
	}
	return x
}

// classifyRepo classifies in one read of the repository.
func (h *run) classifyRepo(ctx context.Context, hashes []string) []fossilio.Info {
	for len(hashes) > 0 {
		infos, err := h.r.Classify(ctx, hashes...)
		if err == nil {
			return infos
		}
		var he *fossilio.HashError
		if !errors.As(err, &he) {
			h.log.Error("classify", keyError, err)
			return nil
		}
		h.log.Warn("not in the repository; passed over", "hash", he.Hash, keyError, err)
		hashes = remove(hashes, he.Hash)
	}
	return nil
}

func remove(list []string, x string) []string {
	out := list[:0]
	for _, y := range list {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}

// nodeLogins lists the node's own logins: each with a password in the agents
// root (the agent logins and the node user). Anyone else is a person (D8).
func (h *run) nodeLogins() map[string]bool {
	out := map[string]bool{h.cfg.User: true}
	entries, err := h.root.ReadDir(h.layout.Root())
	if err != nil {
		h.log.Error("list the agent logins", keyError, err)
		return out
	}
	for _, e := range entries {
		if e.IsDir() && messages.ValidateLogin(e.Name()) == nil {
			if _, err := os.Lstat(filepath.Join(h.layout.Root(), e.Name(), "password")); err == nil {
				out[e.Name()] = true
			}
		}
	}
	return out
}

// wake writes each post's wake line (its hash and its sender, D27) into the
// wake pipe of each session it is for (wake.Decide), and returns the posts
// nobody heard that earn an unheard note.
func (h *run) wake(ctx context.Context, infos []fossilio.Info) []wake.Missed {
	var missed []wake.Missed
	woken := map[messages.WorkspaceKey][]host.WokenPost{}
	defer func() { h.keepWoken(woken) }()
	pipes := wakePipes{root: h.root, open: map[string]*wakePipe{}}
	defer pipes.close()
	read := h.readListened(ctx, infos)
	for _, info := range infos {
		var kind messages.ListenKind
		a := wake.Arrival{Hash: info.Hash, Sender: info.Sender, Rcvid: info.Rcvid}
		var verdicts []wake.Verdict
		switch info.Kind {
		case fossilio.KindCheckin:
			verdicts = wake.DecideCheckin(info.Hash, info.Branch, info.Sender, h.checkinTargets())
		case fossilio.KindPost, fossilio.KindTicketChange:
			verdicts = h.decidePost(ctx, info, &a, &kind, read)
		}
		for _, v := range verdicts {
			ws := v.Target.Workspace
			if !v.Wake {
				h.log.Log(ctx, v.Level, v.Why, "post", info.Hash, "workspace", ws, "sender", info.Sender)
				continue
			}
			w, err := h.layout.Workspace(ws)
			if err != nil {
				h.log.Error("wake", "post", info.Hash, "workspace", ws, keyError, err)
				continue
			}
			err = pipes.send(w.Wake, v.Line)
			var why messages.UnheardWhy
			switch {
			case err == nil:
				h.log.Info("woke", "post", info.Hash, "workspace", ws, "sender", info.Sender)
				if v.NoteIfUnheard {
					woken[ws] = append(woken[ws], host.WokenPost{Post: info.Hash, Kind: kind, Record: a.Record, At: time.Now()})
				}
				continue
			case errors.Is(err, host.ErrNoReader):
				why = messages.UnheardNoReader
			case errors.Is(err, fs.ErrNotExist):
				why = messages.UnheardNoPipe
			case errors.Is(err, errFullEarlier):
				h.log.Error("not woken: the session's wake pipe was full earlier in this run; not waited for again", "post", info.Hash, "workspace", ws)
				continue
			case errors.Is(err, host.ErrPipeFull):
				h.log.Error("not woken: the session's wake pipe stayed full (the session is far behind, or stuck)", "post", info.Hash, "workspace", ws, "waited", wakeWait)
				continue
			default:
				h.log.Error("wake", "post", info.Hash, "workspace", ws, keyError, err)
				continue
			}
			h.log.Info("nobody hears the session", "post", info.Hash, "workspace", ws, "why", why, "sender", info.Sender)
			if v.NoteIfUnheard {
				missed = append(missed, wake.Missed{Workspace: ws, Kind: kind, Record: a.Record, Post: info.Hash, Why: why})
			}
		}
	}
	return missed
}

// keepWoken appends to each session's ledger (Held/woken) the persons'
// posts it was just woken for, one write a session, so that the daemon
// can note, when it records the session's end, those it never answered
// (D77). A session with no held directory (one at a terminal) keeps none;
// a ledger past its bound starts again, the oldest left unchecked.
func (h *run) keepWoken(woken map[messages.WorkspaceKey][]host.WokenPost) {
	for ws, posts := range woken {
		w, err := h.layout.Workspace(ws)
		if err != nil {
			continue
		}
		var b []byte
		for _, p := range posts {
			b = append(b, p.Line()...)
		}
		emptied, err := unixhost.AppendBounded(h.root, w.Woken, b, host.MaxWokenLen)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			h.log.Error("keep the posts a session was woken for", "workspace", ws, keyError, err)
		}
		if emptied {
			h.log.Warn("the posts a session was woken for passed their bound; the oldest are dropped, and none of them is noted should the session end unanswering", "workspace", ws)
		}
	}
}

// pruneWoken takes out of each session's ledger the posts its agent login
// has just replied to (its answer, or its stopped note), so that the
// ledger holds what the session was woken for and has not answered; what
// is left when it ends the daemon checks on the record (D77).
func (h *run) pruneWoken(infos []fossilio.Info) {
	replied := map[string]map[string]bool{} // login -> posts
	for _, info := range infos {
		if info.Kind != fossilio.KindPost || info.InReplyTo == "" || info.Sender == h.cfg.User || !h.logins[info.Sender] {
			continue
		}
		if replied[info.Sender] == nil {
			replied[info.Sender] = map[string]bool{}
		}
		replied[info.Sender][info.InReplyTo] = true
	}
	for login, posts := range replied {
		w, err := h.layout.Workspace(messages.WorkspaceKey{Login: login, Project: h.proj})
		if err != nil {
			continue
		}
		data, err := h.root.ReadFile(w.Woken, host.MaxWokenLen+64<<10)
		if err != nil {
			continue // none kept: a session at a terminal, or none woken
		}
		kept, _ := host.ParseWoken(data)
		var rest []byte
		pruned := 0
		for _, p := range kept {
			if posts[p.Post] {
				pruned++
				continue
			}
			rest = append(rest, p.Line()...)
		}
		if pruned == 0 {
			continue
		}
		if err := h.root.WriteFile(w.Woken, rest, 0o600); err != nil {
			h.log.Error("take the posts answered out of the session's ledger", "workspace", w.Key, keyError, err)
		}
	}
}

// wakePipes are the wake pipes a run writes into: each is opened once per
// run, and what its opening said is kept, so that a run over many posts
// writes one line per post into it.
type wakePipes struct {
	root *unixhost.Root
	open map[string]*wakePipe
}

type wakePipe struct {
	w   *unixhost.LineWriter
	err error
}

// send writes line into the wake pipe at path. A pipe nobody reads, or
// found full, is not written again in the run (errFullEarlier).
func (ps *wakePipes) send(path string, line pipe.WakeLine) error {
	b, err := line.Encode()
	if err != nil {
		return err
	}
	p := ps.open[path]
	if p == nil {
		p = &wakePipe{}
		p.w, p.err = unixhost.OpenLineWriter(ps.root, path)
		if p.w != nil {
			p.w.Wait = wakeWait
		}
		ps.open[path] = p
	}
	if p.err != nil {
		return p.err
	}
	if err := p.w.WriteLine(b[:len(b)-1]); err != nil {
		switch {
		case errors.Is(err, host.ErrNoReader):
			p.err = err
		case errors.Is(err, host.ErrPipeFull):
			p.err = errFullEarlier
		}
		return err
	}
	return nil
}

func (ps *wakePipes) close() {
	for _, p := range ps.open {
		if p.w != nil {
			p.w.Close()
		}
	}
}

// decidePost says whom a post or ticket change wakes (wake.Decide), filling in
// its record and kind; none when it is an edit, awaits moderation, or no
// session listens to its record.
func (h *run) decidePost(ctx context.Context, info fossilio.Info, a *wake.Arrival, kind *messages.ListenKind, read artifactsRead) []wake.Verdict {
	var ok bool
	if a.Record, *kind, ok = recordOf(info); !ok {
		return nil
	}
	targets := h.listening(ctx, a.Record, *kind)
	if len(targets) == 0 {
		return nil
	}
	var err error
	if a.Note, a.NoteErr, err = h.noteOf(ctx, info, read); err != nil {
		h.log.Error("read the post", "post", info.Hash, keyError, err)
		return nil
	}
	return wake.Decide(*a, targets, h.logins, h.privileged(ctx, a.Sender))
}

// recordOf is the record a post or ticket change arrives on and its kind;
// ok is false for anything else, an edit (not a new post) and a post
// awaiting moderation (hidden from the session).
func recordOf(info fossilio.Info) (record string, kind messages.ListenKind, ok bool) {
	switch {
	case info.Kind == fossilio.KindPost && !info.Pending && !info.Edit:
		return info.Root, messages.ListenThread, true
	case info.Kind == fossilio.KindTicketChange:
		return info.Ticket, messages.ListenTicket, true
	}
	return "", "", false
}

// artifactsRead are the artifacts a run read ahead, by hash: those a
// listener's record holds, read in one transaction (readListened).
type artifactsRead map[string]artifactRead

type artifactRead struct {
	a   *fossilio.Artifact
	err error
}

// readListened reads, in one read transaction, each post and ticket
// change of infos that arrives on a record someone listens to: the
// wake reads each of them, and a transaction per artifact was most of a
// large run's time. A transaction that fails leaves them to be read one
// by one.
func (h *run) readListened(ctx context.Context, infos []fossilio.Info) artifactsRead {
	var want []fossilio.Info
	for _, info := range infos {
		if record, kind, ok := recordOf(info); ok && len(h.listening(ctx, record, kind)) > 0 {
			want = append(want, info)
		}
	}
	if len(want) == 0 {
		return nil
	}
	arts, errs, err := h.r.ArtifactsOf(ctx, want)
	if err != nil {
		h.log.Warn("read the listened posts at once; read one by one", keyError, err)
		return nil
	}
	read := make(artifactsRead, len(want))
	for i, info := range want {
		read[info.Hash] = artifactRead{arts[i], errs[i]}
	}
	return read
}

// checkinTargets reads, once a run, the sessions given check-ins: each
// login's AGENTS/LOGIN/held/PROJECT/checkins for this project (seed 001 E7).
func (h *run) checkinTargets() []wake.CheckinTarget {
	if h.checkins != nil {
		return *h.checkins
	}
	out := []wake.CheckinTarget{}
	for _, login := range h.loginList() {
		key := messages.WorkspaceKey{Login: login, Project: h.proj}
		ws, err := h.layout.Workspace(key)
		if err != nil {
			continue
		}
		bs, err := listening.ReadCheckins(h.root, ws)
		if err != nil {
			h.log.Warn("the session's checkins file cannot be read; it is given no check-in", "workspace", key, keyError, err)
			continue
		}
		if len(bs) > 0 {
			out = append(out, wake.CheckinTarget{Workspace: key, Branches: bs})
		}
	}
	h.checkins = &out
	return out
}

// privileged says whether a sender holds admin or setup, read once a run.
func (h *run) privileged(ctx context.Context, sender string) bool {
	if ok, seen := h.standing[sender]; seen {
		return ok
	}
	ok, err := h.r.Privileged(ctx, sender)
	if err != nil {
		h.log.Error("read the sender's capabilities; taken as neither admin nor setup", "sender", sender, keyError, err)
	}
	if h.standing == nil {
		h.standing = map[string]bool{}
	}
	h.standing[sender] = ok
	return ok
}

// listening returns the sessions of this project whose listening index
// names record with the given kind; what it found is kept for the run.
func (h *run) listening(ctx context.Context, record string, kind messages.ListenKind) []wake.Target {
	k := string(kind) + " " + record
	if ts, ok := h.listeners[k]; ok {
		return ts
	}
	ts := h.findListening(ctx, record, kind)
	if h.listeners == nil {
		h.listeners = map[string][]wake.Target{}
	}
	h.listeners[k] = ts
	return ts
}

func (h *run) findListening(ctx context.Context, record string, kind messages.ListenKind) []wake.Target {
	var out []wake.Target
	for _, login := range h.loginList() {
		ws, err := h.layout.Workspace(messages.WorkspaceKey{Login: login, Project: h.proj})
		if err != nil {
			continue
		}
		e, ok, err := listening.Lookup(h.root, ws, record)
		if err != nil {
			if !h.refusals.Absent(err) {
				h.log.Warn("listening file unreadable; passed over", "workspace", ws.Key, "record", record, keyError, err)
			}
			continue
		}
		if !ok {
			continue
		}
		if e.Kind != kind {
			h.log.Warn("listening file of another kind; passed over", "workspace", ws.Key, "record", record, "kind", e.Kind)
			continue
		}
		out = append(out, wake.Target{Workspace: ws.Key, After: e.After, Hears: h.hears(ctx, ws)})
	}
	return out
}

// loginList is the node's logins, sorted, so that sessions are woken in one
// order.
func (h *run) loginList() []string {
	out := make([]string, 0, len(h.logins))
	for l := range h.logins {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// hears reads whom a session hears (AGENTS/LOGIN/held/PROJECT/hears, written when it was
// started). A session started without one (by a release before it) hears
// the default: every user holding admin or setup now.
func (h *run) hears(ctx context.Context, ws host.Workspace) []string {
	list, ok, err := listening.ReadHears(h.root, ws)
	if err == nil && ok {
		return list
	}
	if err != nil {
		h.log.Warn("the session's hears file cannot be read; it hears the users holding admin or setup", "workspace", ws.Key, keyError, err)
	}
	if h.defaultHears == nil {
		users, err := h.r.PrivilegedUsers(ctx)
		if err != nil {
			h.log.Error("list the users holding admin or setup", keyError, err)
			users = []string{}
		}
		h.defaultHears = users
	}
	return h.defaultHears
}

// noteOf says what a post or ticket comment holds, as far as waking goes
// (D8): no note, a stop request, another note, or a block that does not
// read as one note.
func (h *run) noteOf(ctx context.Context, info fossilio.Info, read artifactsRead) (wake.NoteSeen, error, error) {
	// The artifact alone says it: a post's text, or what a ticket change
	// adds to the comment (the hook passes over edits, so a post is its own
	// first version).
	r, ok := read[info.Hash]
	if !ok {
		_, r.a, r.err = h.r.Artifact(ctx, info.Hash)
	}
	a, err := r.a, r.err
	if err != nil {
		return wake.NoNote, nil, err
	}
	text := a.Text
	if info.Kind == fossilio.KindTicketChange {
		text = nil
		for _, f := range a.Fields {
			if f.Name == "icomment" || f.Name == "+icomment" {
				text = append(text, f.Value...)
			}
		}
	}
	note, err := messages.ReadPost(text)
	switch {
	case errors.Is(err, strictjson.ErrNotANote):
		return wake.NoNote, nil, nil
	case err != nil:
		return wake.BrokenNote, err, nil
	case note.NoteKind() == messages.KindStop:
		return wake.StopRequest, nil, nil
	}
	return wake.OtherNote, nil, nil
}

// handToDaemon hands each post, ticket change and check-in to the daemon as
// `post REPO HASH`, in one packed write, starting the daemon when none runs.
// poke tells the remote nodes of the project that something arrived
// (D72): a POST to each poke URL node.json lists, carrying its secret
// (D81), which says only "pull now". A poke lost costs only the node's
// timer.
func (h *run) poke(ctx context.Context, infos []fossilio.Info) {
	remotes := h.cfg.Projects[h.proj].RemoteNodes
	if len(infos) == 0 || len(remotes) == 0 {
		return
	}
	targets := h.pokeTargets(ctx, infos, remotes)
	if len(targets) == 0 {
		return
	}
	if h.o.Poke != nil {
		h.o.Poke(targets)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, pokeWait)
	defer cancel()
	for _, err := range remote.PokeAll(ctx, targets) {
		h.log.Warn("poke a remote node", keyError, err)
	}
}

// pokeTargets are the poke URLs of the remote nodes something that
// arrived is for: a run or a stop names its node, which alone is poked;
// what a node user wrote (its started, ended, kept logs, notes) pokes
// nobody, its writer pulling it itself; anything else (a post, a ticket
// change, a check-in: what a session on any node may be given) pokes
// every node. A remote node that names no poke URL pulls on its timer.
func (h *run) pokeTargets(ctx context.Context, infos []fossilio.Info, remotes []messages.RemoteNode) []remote.Target {
	nodeUser := map[string]bool{h.cfg.User: true}
	pokeOf := map[string]remote.Target{}
	for _, r := range remotes {
		nodeUser[r.User] = true
		if r.Poke != "" {
			pokeOf[r.User] = remote.Target{URL: r.Poke, Secret: r.PokeSecret}
		}
	}
	var others []fossilio.Info
	for _, info := range infos {
		if !nodeUser[info.Sender] {
			others = append(others, info)
		}
	}
	if len(others) == 0 || len(pokeOf) == 0 {
		return nil
	}
	texts, err := h.r.NoteTexts(ctx, others)
	if err != nil {
		texts = make([]string, len(others)) // poke every node: a poke lost costs more than one more
	}
	want := map[string]bool{}
	for i, info := range others {
		if m, ok := record.ReadRunMsg(info, texts[i]); ok && (m.Kind() == runmsg.MsgRun || m.Kind() == runmsg.MsgStop) {
			want[m.Node()] = true
			continue
		}
		for u := range pokeOf {
			want[u] = true
		}
		break
	}
	var targets []remote.Target
	for u := range want {
		if p, ok := pokeOf[u]; ok {
			targets = append(targets, p)
		}
	}
	slices.SortFunc(targets, func(a, b remote.Target) int { return strings.Compare(a.URL, b.URL) })
	return targets
}

func (h *run) handToDaemon(ctx context.Context, infos []fossilio.Info) {
	var lines []pipe.Line
	for _, info := range infos {
		switch info.Kind {
		case fossilio.KindPost, fossilio.KindTicketChange, fossilio.KindCheckin:
			lines = append(lines, pipe.PostLine{Repository: h.repo, Hash: info.Hash})
		}
	}
	if len(lines) == 0 {
		return
	}
	if h.o.ByDaemon {
		// The daemon runs this work: it takes the lines in its own
		// process, else from its pipe.
		if h.o.Hand != nil {
			err := h.o.Hand(lines)
			if err == nil {
				h.log.Info("handed to the daemon", "lines", len(lines))
				return
			}
			h.log.Info("hand posts to the daemon through its pipe", "lines", len(lines), "why", err.Error())
		}
		if err := daemonclient.Send(h.layout, lines); err != nil {
			h.log.Error("hand posts to the daemon", "lines", len(lines), keyError, err)
			return
		}
		h.log.Info("handed to the daemon", "lines", len(lines))
		return
	}
	release := h.o.Release
	if release == "" {
		var err error
		if release, err = daemonclient.Release(h.cfg); err != nil {
			h.log.Error("find the daemon", keyError, err)
			return
		}
	}
	wait := h.o.DaemonWait
	if wait <= 0 {
		wait = daemonclient.DefaultWait
	}
	started, err := daemonclient.Ensure(ctx, h.layout, filepath.Join(release, "ocxd"), wait)
	if started {
		h.log.Info("started the daemon", "program", filepath.Join(release, "ocxd"))
	}
	if err != nil {
		h.log.Error("ensure the daemon runs", keyError, err)
		return
	}
	if err := daemonclient.Send(h.layout, lines); err != nil {
		h.log.Error("hand posts to the daemon", "lines", len(lines), keyError, err)
		return
	}
	h.log.Info("handed to the daemon", "lines", len(lines))
}

// noteUnheard writes, as each session's agent login, a note on the record
// that a person's posts reached a session nobody hears: one note per
// session, record and reason of this run, naming every such post (D28),
// and one sync request per login for all its notes. It runs no backoffice
// after: the note wakes nobody (it holds an OCX note, and its sender is an
// agent), so the next backoffice run may see it at leisure, and the hook is
// never run again from within itself.
func (h *run) noteUnheard(ctx context.Context, missed []wake.Missed, redone map[string]bool) error {
	return WriteUnheard(ctx, Unheard{Config: h.cfg, Layout: h.layout, Project: h.proj, Repo: h.r, Log: h.log}, h.notNotedYet(ctx, missed, redone))
}

// Unheard is where WriteUnheard writes: the node, the project and its
// repository, and the log it says what it wrote in.
type Unheard struct {
	Config  *messages.NodeConfig
	Layout  host.Layout
	Project string
	Repo    *fossilio.Repo
	Log     *slog.Logger
}

// WriteUnheard writes the unheard notes of missed, as each session's agent
// login, on the project's record: one note per session, record and reason
// (wake.Unheard), one sync request per login for all its notes, and no
// backoffice after (the notes wake nobody). The hook writes them for the
// posts that reached no reader, the daemon for those a session ended
// before it answered (D77). It returns the first failure, once it has
// tried every login's notes.
func WriteUnheard(ctx context.Context, u Unheard, missed []wake.Missed) error {
	notes := wake.Unheard(missed)
	if len(notes) == 0 {
		return nil
	}
	code, err := u.Repo.ProjectCode(ctx)
	if err != nil {
		u.Log.Error("note unheard posts", keyError, err)
		return err
	}
	w := &fossilio.Notes{
		URL:         u.Config.Projects[u.Project].URL,
		ProjectCode: code,
		Password: func(login string) (string, error) {
			path, err := u.Layout.Password(login)
			if err != nil {
				return "", err
			}
			return fossilio.ReadPasswordFrom(unixhost.Below(u.Layout.Root()), path)
		},
	}
	byLogin := map[string][]fossilio.NoteWrite{}
	var logins []string
	for _, n := range notes {
		block, err := n.Note.Encode()
		if err != nil {
			u.Log.Error("note unheard posts", "post", n.Note.Post, keyError, err)
			continue
		}
		login := n.Note.Login
		nw := fossilio.NoteWrite{Login: login, Thread: n.Record, ReplyTo: n.Note.Post, Text: n.Text(block)}
		if n.Kind == messages.ListenTicket {
			nw = fossilio.NoteWrite{Login: login, Ticket: n.Record, Text: n.Text(block)}
		}
		if _, ok := byLogin[login]; !ok {
			logins = append(logins, login)
		}
		byLogin[login] = append(byLogin[login], nw)
	}
	var first error
	for _, login := range logins {
		hashes, err := w.WriteNotes(ctx, byLogin[login]...)
		if err != nil {
			u.Log.Error("note unheard posts", "login", login, "notes", len(byLogin[login]), keyError, err)
			if first == nil {
				first = fmt.Errorf("note unheard posts as %s: %w", login, err)
			}
			continue
		}
		u.Log.Info("noted unheard posts", "login", login, "notes", strings.Join(hashes, ","))
	}
	return first
}

// redone are the hashes of infos a run before this one began its work for
// and died before it moved the mark past them (the mark says so).
func (h *run) redone(infos []fossilio.Info, m *mark) map[string]bool {
	if m.working == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, info := range infos {
		if info.Receipt > m.value && info.Receipt <= m.working {
			out[info.Hash] = true
		}
	}
	if len(out) > 0 {
		h.log.Warn("a run of the hook before this one died in its work: its receipts are handled again, their unheard notes looked for first",
			"mark", m.value, "working", m.working, "artifacts", len(out))
	}
	return out
}

// notNotedYet leaves out of missed each post of redone whose session's
// agent login already noted it unheard, as the node's repository says
// (the notes that login sent holding the post's hash), so that a run
// handling again what a dead run began writes each note once.
func (h *run) notNotedYet(ctx context.Context, missed []wake.Missed, redone map[string]bool) []wake.Missed {
	if len(redone) == 0 {
		return missed
	}
	out := missed[:0:0]
	for _, m := range missed {
		if redone[m.Post] && h.notedAlready(ctx, m) {
			h.log.Info("noted unheard already, by a run before this one", "post", m.Post, "workspace", m.Workspace)
			continue
		}
		out = append(out, m)
	}
	return out
}

// notedAlready says the session's agent login sent an unheard note naming
// m's post; a record that cannot be read says no (a note twice is better
// than none).
func (h *run) notedAlready(ctx context.Context, m wake.Missed) bool {
	sent, err := h.r.SentBy(ctx, m.Workspace.Login, m.Post)
	if err != nil {
		h.log.Error("look for an unheard note written before", "post", m.Post, "login", m.Workspace.Login, keyError, err)
		return false
	}
	for _, s := range sent {
		note, err := messages.ReadPost([]byte(s.Text))
		if u, ok := note.(*messages.UnheardNote); err == nil && ok && slices.Contains(u.All(), m.Post) {
			return true
		}
	}
	return false
}

// gitExport brings the git mirror up to date when a check-in arrived and
// the repository has a mirror.
func (h *run) gitExport(ctx context.Context, infos []fossilio.Info) {
	checkin := false
	for _, info := range infos {
		checkin = checkin || info.Kind == fossilio.KindCheckin
	}
	if !checkin {
		return
	}
	mirror, ok, err := h.r.Config(ctx, "last-git-export-repo")
	if err != nil {
		h.log.Error("git export", keyError, err)
		return
	}
	if !ok || mirror == "" {
		return
	}
	a := &fossilio.Admin{Repository: h.repo, Fossil: &fossilio.Fossil{Exe: h.o.Fossil, Home: h.layout.Root(), User: h.cfg.User, Dir: h.layout.Root()}}
	if err := a.GitExport(ctx); err != nil {
		h.log.Error("git export", "mirror", mirror, keyError, err)
		return
	}
	h.log.Info("git export", "mirror", mirror)
}

// mark is the hook's own mark of the newest receipt it handled, in
// AGENTS/hook.mark.PROJECT, held under a flock for the run so that two
// overlapping runs (D11) handle each receipt once.
type mark struct {
	f     *os.File
	ok    bool
	value int64
	// working is the newest receipt a run was doing its work for when
	// the mark was read (0: none): one that died there.
	working int64
}

// lockMark opens and locks the mark, waiting a bounded time for another
// run (or until ctx ends); without the lock (or the file) it goes on, since
// a wake handled twice is better than one lost.
func (h *run) lockMark(ctx context.Context) (*mark, func()) {
	m := &mark{}
	f, err := h.root.OpenFile(h.layout.HookMark(h.proj), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		h.log.Error("open the hook's mark", keyError, err)
		return m, func() {}
	}
	wait := h.o.LockWait
	if wait <= 0 {
		wait = DefaultLockWait
	}
	if err := unixhost.LockFile(ctx, f, unixhost.Exclusive, wait); err != nil {
		h.log.Warn("the hook's mark stays locked by another run; going on without it", keyError, err)
	}
	m.f = f
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	m.value, m.working, m.ok = host.ParseHookMarkWorking(buf[:n])
	return m, func() { f.Close() }
}

// store writes the mark in place (the lock is on this file, so it is not
// replaced by a rename), over the old mark and never emptying it: a
// reader sees the old mark or the new, and a full disk leaves the old.
func (m *mark) store(v int64) error {
	if m.f == nil {
		return errors.New("no mark file")
	}
	return unixhost.RewriteInPlace(m.f, host.HookMarkContent(v))
}

// begin says, in the mark, that a run does its work for the receipts
// after the mark up to working; store ends it.
func (m *mark) begin(working int64) error {
	if m.f == nil {
		return errors.New("no mark file")
	}
	return unixhost.RewriteInPlace(m.f, host.HookMarkWorkingContent(m.value, working))
}
