package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// The daemon's notes (actors.NoteWriter): refusals, ends and CI launches,
// each written over sync as the node user, whose password is
// AGENTS/USER/password, so that an agent cannot forge them (D2, D7). Each
// write runs the repository's backoffice so the hook sees it at once (D11).

// writer is the sync writer of one repository as the node user. The caller
// holds no lock.
func (r *records) writer(ctx context.Context, x *noderepos.Index) (*fossilio.Notes, error) {
	code, err := x.ProjectCode(ctx)
	if err != nil {
		return nil, err
	}
	return &fossilio.Notes{
		URL:         x.URL,
		ProjectCode: code,
		Password: func(login string) (string, error) {
			p, err := r.layout.Password(login)
			if err != nil {
				return "", err
			}
			return fossilio.ReadPasswordFrom(unixhost.Below(r.layout.Root()), p)
		},
		Backoffice: r.Repos.Backoffice(x, r.fossil),
		Now:        r.now,
	}, nil
}

// replyTo is where a note answering a launch note goes: a reply to it in
// its thread, or a change appended to its ticket.
func (r *records) replyTo(ctx context.Context, x *noderepos.Index, launch, text string) (fossilio.NoteWrite, error) {
	info, err := x.Repo.Info(ctx, launch)
	if err != nil {
		return fossilio.NoteWrite{}, fmt.Errorf("find launch note %s: %w", launch, err)
	}
	switch info.Kind {
	case fossilio.KindPost:
		return fossilio.NoteWrite{Login: r.cfg.User, Thread: info.Root, ReplyTo: info.Hash, Text: text}, nil
	case fossilio.KindTicketChange:
		return fossilio.NoteWrite{Login: r.cfg.User, Ticket: info.Ticket, Text: text}, nil
	}
	return fossilio.NoteWrite{}, fmt.Errorf("launch note %s is a %s, not a post or a ticket change", launch, info.Kind)
}

func (r *records) indexOf(l protocol.LaunchSpec) (*noderepos.Index, error) {
	return r.IndexAt(l.Repository)
}

// WriteRefusal answers a launch the daemon did not carry out, naming the
// process that holds the workspace when one does.
func (r *records) WriteRefusal(ctx context.Context, n protocol.WriteRefusal) error {
	x, err := r.indexOf(n.Launch)
	if err != nil {
		return err
	}
	note := &messages.RefusalNote{Launch: n.Launch.Hash, Login: n.Launch.Workspace.Login, Project: n.Launch.Workspace.Project,
		Reason: messages.ClipText(messages.CleanText(n.Reason), messages.MaxTextLen)}
	holders := n.Holders
	if len(holders) > 0 && holders[0].Command == "" && r.scan != nil {
		// The workspace's own session is known by the daemon's child (bwrap);
		// the process table names the session command inside it.
		if ps, err := r.scan(ctx, n.Launch.Workspace); err == nil && len(ps) > 0 {
			holders = ps
		}
	}
	if h, ok := holder(holders); ok {
		pi := messages.NewHolder(h.Proc.PID, h.Proc.Start, r.argvOf(h), h.StartedBy)
		note.Holder = &pi
	}
	block, err := note.Encode()
	if err != nil {
		return fmt.Errorf("refusal of %s: %w", n.Launch.Hash, err)
	}
	text := fmt.Sprintf("The daemon did not launch %s: %s\n\n%s", fossilio.Short(n.Launch.Hash), note.Reason, block)
	return r.writeNote(ctx, x, n.Launch.Hash, text, "refusal", true)
}

// holder picks the process a refusal names: a session command (run, start,
// serve) rather than the bwrap around it.
func holder(ps []protocol.ProcInfo) (protocol.ProcInfo, bool) {
	for _, p := range ps {
		if p.Verb == string(host.VerbRun) || p.Verb == string(host.VerbStart) || p.Verb == string(host.VerbServe) {
			return p, true
		}
	}
	if len(ps) > 0 {
		return ps[0], true
	}
	return protocol.ProcInfo{}, false
}

// argvOf is a holder's command line as the process table read it, or its
// one-line rendering split at spaces when the table no longer has it.
func (r *records) argvOf(p protocol.ProcInfo) []string {
	if r.argv != nil {
		if a, ok := r.argv(p.Proc); ok {
			return a
		}
	}
	return strings.Fields(p.Command)
}

// WriteEnd records a session's end on its record, once per process (D6): an
// end note of the same launch, PID and start time already there means it was
// written before (a retry, or a daemon that restarted); for a session found
// gone (D76), any end note of its launch. Once the note is on the record,
// the session's spawned record is removed.
func (r *records) WriteEnd(ctx context.Context, n protocol.WriteEnd) error {
	x, err := r.indexOf(n.Launch)
	if err != nil {
		return err
	}
	done, err := r.ended(ctx, x, n)
	if err != nil {
		return err
	}
	if done {
		r.log.Info("end note already on the record", slog.String(actors.KeyLaunch, n.Launch.Hash), slog.String(actors.KeyPID, n.Proc.String()))
		// A daemon that wrote the note and ended before withdrawing
		// withdraws now; taking nothing from a user with nothing is a no-op.
		if err := r.withdrawResponded(ctx, x, n); err != nil {
			return err
		}
		r.forget(n)
		return nil
	}
	note := &n.End
	block, err := note.Encode()
	if err != nil {
		return fmt.Errorf("end note of %s: %w", n.Proc, err)
	}
	// A protocol v1 record's response is written first, as the node user
	// (E5, D51); then the agent's login is withdrawn before the end note is written (E5): a daemon that
	// ends between any two leaves no end note, and the next writes what is
	// missing (the response it finds already said, once; a withdrawal
	// again, a no-op) rather than an end beside a user who keeps what it
	// may do.
	// The posts it was woken for and never answered are noted first, as
	// its agent login, while the login may still write (D77): a daemon
	// that ends before the end note does it again, and finds each noted.
	if err := r.noteUnanswered(ctx, x, n); err != nil {
		if fossilio.Unreachable(err) {
			// The server is away: the end waits for it, notes first.
			return fmt.Errorf("note the posts the session left unanswered: %w: %w", protocol.ErrUnreachable, err)
		}
		r.log.Warn("the posts a session was woken for are not checked; none is noted as left unanswered", slog.String(actors.KeyLaunch, n.Launch.Hash), actors.ErrAttr(err))
	}
	if err := r.respond(ctx, x, n); err != nil {
		return err
	}
	if err := r.withdrawResponded(ctx, x, n); err != nil {
		return err
	}
	text := fmt.Sprintf("The session of %s (pid %d) ended: %s.\n\n%s", n.Launch.Workspace, n.Proc.PID, note.Note, block)
	if err := r.writeNote(ctx, x, n.Launch.Hash, text, "end", true); err != nil {
		return err
	}
	r.forget(n)
	return nil
}

// ended says whether the end of n's session is on the record (D6): the
// node user's end note of its process; for a session found gone (D76),
// one of its launch by any process, which a daemon that adopted it wrote.
func (r *records) ended(ctx context.Context, x *noderepos.Index, n protocol.WriteEnd) (bool, error) {
	if !n.FoundGone {
		return x.Idx.Ended(ctx, n.Launch.Hash, n.Proc.PID, n.Proc.Start)
	}
	rs, err := x.Idx.Replies(ctx, n.Launch.Hash)
	if err != nil {
		return false, err
	}
	for _, e := range rs {
		if _, ok := e.Note.(*messages.EndNote); ok {
			return true, nil
		}
	}
	return false, nil
}

// forget removes the spawned record of n's session once its end note is
// on the record (D76); a record left is written again by nobody, and only
// makes the next start look at the launch, find its end, and forget it.
func (r *records) forget(n protocol.WriteEnd) {
	if r.forgetSpawned == nil {
		return
	}
	if err := r.forgetSpawned(n.Launch.Workspace, n.Launch.Hash); err != nil {
		r.log.Warn("a session's spawned record is not removed; the next start finds its end written", slog.String(actors.KeyLaunch, n.Launch.Hash), actors.ErrAttr(err))
	}
}

// respondAttempts is how many attempts of an end's write may fail on its
// response before the end note is written without one (D51): a response
// that cannot be written never keeps a session's end off the record.
const respondAttempts = 3

// respond writes a protocol v1 record's response (seed 001 E5, D51) as the
// record's node user (seed 001 E5: only the node user's counts), replying to the record, when the ended session's
// launch is one of such a record: its outcome and note from the end note,
// whether a stop ended it, and the agent's last report since the launch
// (messages.ResponseFor). It is written once per record (E5, D76): a
// response that record.ResponseOf finds counting on the record (an earlier
// attempt's, an earlier daemon's, an earlier run's) is the one, and none
// is written beside it; one the agent or anyone else wrote never counts,
// and so stops nothing.
func (r *records) respond(ctx context.Context, x *noderepos.Index, n protocol.WriteEnd) error {
	login, rec := n.Launch.Workspace.Login, n.Launch.Record
	v1, err := r.isTaskRecord(ctx, x, rec, login)
	if err != nil || !v1 {
		return err
	}
	err = r.writeResponse(ctx, x, n)
	if err != nil && n.Attempt >= respondAttempts {
		r.log.Error("the record's response is not written; its end note is written without it", slog.String(actors.KeyLaunch, n.Launch.Hash),
			slog.String(actors.KeyWorkspace, n.Launch.Workspace.String()), slog.String("error", err.Error()))
		return nil
	}
	return err
}

func (r *records) writeResponse(ctx context.Context, x *noderepos.Index, n protocol.WriteEnd) error {
	login, rec := n.Launch.Workspace.Login, n.Launch.Record
	// Each record gets exactly one (E5, D76): a response of the node
	// user's that answers the record, of this launch's run (an earlier
	// attempt, an earlier daemon) or of any other, is the one.
	have, found, err := record.ResponseOf(ctx, x.Repo, rec, r.cfg.User, "", "")
	if err != nil {
		return err
	}
	if found {
		r.log.Info("the record has its response already; no second is written", slog.String(actors.KeyLaunch, n.Launch.Hash), slog.String(actors.KeyHash, have.Hash))
		return nil
	}
	var report *messages.ReportNote
	if _, launch, ok, err := x.Idx.Artifact(ctx, n.Launch.Hash); err != nil {
		return fmt.Errorf("the response to %s: read its launch: %w", rec, err)
	} else if ok {
		e, found, err := x.Idx.Report(ctx, rec, login, launch)
		if err != nil {
			return fmt.Errorf("the response to %s: read its agent's report: %w", rec, err)
		}
		if found {
			report = e.Note.(*messages.ReportNote)
		}
	}
	resp := messages.ResponseFor(rec, &n.End, n.StopRequested, n.FoundGone, report)
	block, err := resp.Encode()
	if err != nil {
		return fmt.Errorf("the response to %s: %w", rec, err)
	}
	w, err := r.writer(ctx, x)
	if err != nil {
		return err
	}
	// The end note that follows runs the backoffice for both.
	w.Backoffice = nil
	text := fmt.Sprintf("The run of record %s ended: %s.\n\n%s", fossilio.Short(rec), resp.Outcome, block)
	hash, err := w.WriteNote(ctx, fossilio.NoteWrite{Login: r.cfg.User, Thread: rec, ReplyTo: rec, Text: text})
	if err != nil {
		return fmt.Errorf("write the response to %s as %s: %w", rec, login, err)
	}
	r.log.Info("wrote the record's response", slog.String(actors.KeyLaunch, n.Launch.Hash),
		slog.String(actors.KeyHash, hash), slog.String("outcome", string(resp.Outcome)))
	return nil
}

// withdrawResponded takes every capability from the agent's user on every
// project once the end note of a protocol v1 record's session is written
// (seed 001 E5, D35): that note is the record's response. The record is
// the launch's own record when it is a thread's first post holding a
// TaskRecord for the workspace's login and this node, sent by a user
// holding admin or setup. Any other session's user keeps its
// capabilities. While another process still names the workspace nothing
// is withdrawn (as `login withdraw` refuses), and the warning says so. A
// failure is returned, so the session core writes again, finds the note
// written, and withdraws then.
func (r *records) withdrawResponded(ctx context.Context, x *noderepos.Index, n protocol.WriteEnd) error {
	login := n.Launch.Workspace.Login
	v1, err := r.isTaskRecord(ctx, x, n.Launch.Record, login)
	if err != nil || !v1 {
		return err
	}
	if r.scan != nil {
		ps, err := r.scan(ctx, n.Launch.Workspace)
		if err != nil {
			return fmt.Errorf("withdraw %q: %w", login, err)
		}
		for _, p := range ps {
			if p.Proc != n.Proc {
				r.log.Warn("the record's response is written, but a process still names its workspace; its user keeps its capabilities",
					slog.String(actors.KeyWorkspace, n.Launch.Workspace.String()), slog.String(actors.KeyPID, p.Proc.String()))
				return nil
			}
		}
	}
	names := make([]string, 0, len(r.cfg.Projects))
	for name := range r.cfg.Projects {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		px, err := r.Index(name)
		if err != nil {
			return fmt.Errorf("withdraw %q on %s: %w", login, name, err)
		}
		admin := &fossilio.Admin{Repository: px.Path, Fossil: r.fossil}
		err = admin.Withdraw(ctx, login)
		if errors.Is(err, fossilio.ErrNoSuchUser) {
			continue
		}
		if err != nil {
			return fmt.Errorf("withdraw %q on %s: %w", login, name, err)
		}
	}
	r.log.Info("took every capability from the record's agent user: its response is written",
		slog.String(actors.KeyWorkspace, n.Launch.Workspace.String()), slog.String(actors.KeyLaunch, n.Launch.Hash))
	return nil
}

// isTaskRecord says whether hash, a launch's record, is a protocol v1
// record that counts for login on this node (D35).
func (r *records) isTaskRecord(ctx context.Context, x *noderepos.Index, hash, login string) (bool, error) {
	return record.IsTaskRecord(ctx, x.Repo, hash, login, r.cfg.User)
}

// WriteLaunch writes a CI launch note as the node user on the listener's
// record, naming the check-in to test, the workspace's newest definition and
// the newest session definition on that record, and returns it resolved.
func (r *records) WriteLaunch(ctx context.Context, n protocol.WriteLaunch) (protocol.LaunchSpec, error) {
	var none protocol.LaunchSpec
	project, ok := r.ByPath(n.Listener.Repository)
	if !ok {
		return none, fmt.Errorf("%s is not a repository of this node", n.Listener.Repository)
	}
	x, err := r.Index(project)
	if err != nil {
		return none, err
	}
	key := n.Listener.Workspace
	wd, sd, err := x.Idx.NewestDefinitions(ctx, key, n.Listener.Record)
	if err != nil {
		return none, err
	}
	if sd == nil {
		return none, fmt.Errorf("the record %s of %s's branch listener holds no session definition that counts", n.Listener.Record, key)
	}
	if wd == nil {
		return none, fmt.Errorf("workspace %s has no definition that counts on the record", key)
	}
	note := &messages.LaunchNote{Login: key.Login, Project: key.Project, Workspace: wd.Hash, Session: sd.Hash,
		Release: messages.ReleaseCurrent, Checkin: n.Checkin}
	block, err := note.Encode()
	if err != nil {
		return none, fmt.Errorf("CI launch note for %s: %w", n.Checkin, err)
	}
	text := fmt.Sprintf("CI run for check-in %s on branch %s.\n\n%s", fossilio.Short(n.Checkin), n.Branch, block)
	var where fossilio.NoteWrite
	if sd.Ticket {
		where = fossilio.NoteWrite{Login: r.cfg.User, Ticket: n.Listener.Record, Text: text}
	} else {
		where = fossilio.NoteWrite{Login: r.cfg.User, Thread: n.Listener.Record, ReplyTo: n.Listener.Record, Text: text}
	}
	w, err := r.writer(ctx, x)
	if err != nil {
		return none, err
	}
	hash, err := w.WriteNote(ctx, where)
	if err != nil {
		return none, fmt.Errorf("write the CI launch note for %s: %w", n.Checkin, err)
	}
	r.log.Info("wrote a CI launch note", slog.String(actors.KeyLaunch, hash), slog.String(actors.KeyWorkspace, key.String()),
		slog.String(actors.KeyBranch, n.Branch), slog.String(actors.KeyCheckin, n.Checkin))
	l, err := r.launchAt(ctx, x, hash)
	if err != nil {
		return none, fmt.Errorf("the CI launch note %s read back: %w", hash, err)
	}
	return l, nil
}

// writeNote posts a note answering a launch note as the node user, then
// runs the backoffice (D11, D96) or, when backoffice is false, leaves that
// to the caller.
func (r *records) writeNote(ctx context.Context, x *noderepos.Index, launch, text, kind string, backoffice bool) error {
	where, err := r.replyTo(ctx, x, launch, text)
	if err != nil {
		return err
	}
	w, err := r.writer(ctx, x)
	if err != nil {
		return err
	}
	if !backoffice {
		w.Backoffice = nil
	}
	hash, err := w.WriteNote(ctx, where)
	if err != nil {
		return fmt.Errorf("write the %s note on launch %s: %w", kind, launch, err)
	}
	r.log.Info("wrote a "+kind+" note", slog.String(actors.KeyLaunch, launch), slog.String(actors.KeyHash, hash))
	return nil
}
