package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"

	"github.com/ocx-go/ocx/actors"
	runeng "github.com/ocx-go/ocx/cmd/internal/runs"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// The record of seed 004's runs, as the daemon reads it: every post and
// ticket change holding a run engine message, read from its first version
// (an edit is ignored), with who sent it (the server's receipt) and where it
// stands in the server's order. Section 3's table decides which count
// (messages.ClassifyMessage); this file only reads the facts it needs.

// runMsg is one run engine message on the record.
type runMsg struct {
	Hash   string
	Sender string
	Rcvid  int64
	Rid    int64
	// Record is the thread's root post, or the ticket's id; Ticket says
	// which.
	Record string
	Ticket bool
	// Msg is the message, or nil when it does not decode (Malformed).
	Msg       messages.Message
	Malformed *messages.MalformedMessage
}

// kind is the message's kind, as decoded or as its malformed envelope says.
func (m runMsg) kind() messages.MessageKind {
	if m.Msg != nil {
		return m.Msg.Kind()
	}
	return m.Malformed.Kind
}

// node is the node the envelope names.
func (m runMsg) node() string {
	if m.Msg != nil {
		return m.Msg.NodeUser()
	}
	return m.Malformed.Node
}

// about is the run a stop, started or ended names, or the run's own hash.
func (m runMsg) about() string {
	switch x := m.Msg.(type) {
	case *messages.RunStop:
		return x.Run
	case *messages.RunStarted:
		return x.Run
	case *messages.RunEnded:
		return x.Run
	}
	return m.Hash
}

// runLog is one repository's run engine messages, in the server's order,
// read incrementally from the receipts: the repository's record.Index
// tells it of each artifact its refresh reads (add).
type runLog struct {
	mu   sync.Mutex
	msgs []runMsg
	at   map[string]int // by hash, an index into msgs
}

// add keeps the run engine message an artifact the index read holds.
func (l *runLog) add(info fossilio.Info, text string) {
	m, ok := readRunMsg(info, text)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at == nil {
		l.at = map[string]int{}
	}
	if _, dup := l.at[m.Hash]; !dup {
		l.at[m.Hash] = len(l.msgs)
		l.msgs = append(l.msgs, m)
	}
}

// runs returns the repository's run engine messages, brought up to date.
func (x *repoIndex) runs(ctx context.Context) ([]runMsg, error) {
	if err := x.idx.Refresh(ctx); err != nil {
		return nil, err
	}
	l := &x.runLog
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs), nil
}

// readRunMsg reads the run engine message an artifact holds, from its first
// version: an edit, or a post awaiting moderation, holds none.
func readRunMsg(info fossilio.Info, text string) (runMsg, bool) {
	m := runMsg{Hash: info.Hash, Sender: info.Sender, Rcvid: info.Rcvid, Rid: info.Rid}
	switch {
	case info.Kind == fossilio.KindPost && !info.Edit && !info.Pending:
		m.Record = info.Root
	case info.Kind == fossilio.KindTicketChange:
		m.Record, m.Ticket = info.Ticket, true
	default:
		return m, false
	}
	msg, err := messages.ReadMessage([]byte(text))
	var mm *messages.MalformedMessage
	switch {
	case errors.As(err, &mm) && mm.Kind != messages.MsgRecord:
		m.Malformed = mm
	case err != nil:
		return m, false
	case msg.Kind() == messages.MsgRecord:
		return m, false
	default:
		m.Msg = msg
	}
	return m, true
}

// runStanding is what the record says of one run: the message, whether its
// started, a stop and its ended count (section 3), and the runs before it.
type runStanding struct {
	Run           runMsg
	StartedCounts bool
	StopCounts    bool
	EndedCounts   bool
	// StartedAt is where the started that counts stands in the server's
	// order (table 9, filter 2), zero while none counts.
	StartedAt messages.RunPosition
}

// privilegedOnce answers "holds admin or setup" for users, each read once.
func privilegedOnce(ctx context.Context, x *repoIndex) func(string) bool {
	seen := map[string]bool{}
	return func(u string) bool {
		if u == "" {
			return false
		}
		if v, ok := seen[u]; ok {
			return v
		}
		ok, err := x.repo.Privileged(ctx, u)
		seen[u] = err == nil && ok
		return seen[u]
	}
}

// standingOf applies section 3's table to the messages about run: which
// started, stop and ended count.
func standingOf(msgs []runMsg, run runMsg, privileged func(string) bool) runStanding {
	st := runStanding{Run: run}
	node := run.node()
	for _, m := range msgs {
		if m.Msg == nil || m.about() != run.Hash || m.Hash == run.Hash {
			continue
		}
		where := m.Record == run.Record && m.Ticket == run.Ticket
		s := messages.MessageStanding{Kind: m.kind(), SenderPrivileged: privileged(m.Sender), SenderIsNode: m.Sender == node, WhereItsRun: where}
		switch m.kind() {
		case messages.MsgStarted:
			s.SeenBefore = st.StartedCounts
			if v, _ := messages.ClassifyMessage(s); v == messages.MessageCounts {
				st.StartedCounts = true
				st.StartedAt = messages.RunPosition{Receipt: m.Rcvid, Row: m.Rid}
			}
		case messages.MsgEnded:
			s.SeenBefore = st.EndedCounts
			if v, _ := messages.ClassifyMessage(s); v == messages.MessageCounts {
				st.EndedCounts = true
			}
		case messages.MsgStop:
			if v, _ := messages.ClassifyMessage(s); v == messages.MessageCounts {
				st.StopCounts = true
			}
		}
	}
	return st
}

// runFacts are what the run core needs of a run's message.
func runFacts(hash string, r *messages.Run) messages.RunFacts {
	f := messages.RunFacts{Hash: hash}
	if r == nil {
		return f
	}
	f.Manual, f.Session, f.Deliveries = r.Process.Manual, r.Process.Session, r.Process.Deliveries
	if r.Limits != nil {
		if r.Limits.Wall != "" {
			f.Wall, _ = messages.ParseWall("limits.wall", r.Limits.Wall)
		}
		f.CPU = r.Limits.CPU != nil
	}
	return f
}

// runSupport is what the host can give a run (refusal row 8); a launcher
// that starts no runs (a test's) provides nothing but an unconfined run.
func (r *reaper) runSupport() host.RunSupport {
	if s, ok := r.current().(interface{ RunSupport() host.RunSupport }); ok {
		return s.RunSupport()
	}
	return host.RunSupport{Sandbox: "this host starts no sandboxed runs", CPU: "not enforced", Processes: "not enforced", Memory: "not enforced"}
}

// refusalOf checks a run that arrived against section 11's rows 1 to 8
// (messages.RunRefusal), with the facts read from the repository and the
// host, and returns ended's note, "" when none holds. Row 9 needs the
// values the workspace sets, so it is checked when the run is prepared.
func (r *records) refusalOf(ctx context.Context, x *repoIndex, msgs []runMsg, m runMsg, privileged func(string) bool, support host.RunSupport) (string, error) {
	run, _ := m.Msg.(*messages.Run)
	var decodeErr error
	if m.Malformed != nil {
		decodeErr = m.Malformed
	}
	f := messages.RefusalFacts{
		SenderPrivileged: privileged(m.Sender),
		NodeUser:         r.cfg.User,
		// The server's node sets a run user's password itself; a node on
		// another host reads it from its file of passwords (section 5,
		// password; row 6).
		ServerNode: !x.otherHost,
		// node.json's confined_only (row 7, D53).
		NothingUnconfined: r.cfg.ConfinedOnly,
		Provides: messages.RunProvision{Sandbox: support.Sandbox == "", Capabilities: host.Capabilities[:], NoNetwork: true,
			Limits: []string{messages.LimitWall}, Deliveries: true, Manual: true, Terminal: true},
	}
	f.Provides.LimitWhy = map[string]string{}
	for _, l := range []struct{ name, why string }{
		{messages.LimitCPU, support.CPU}, {messages.LimitProcesses, support.Processes}, {messages.LimitMemory, support.Memory},
	} {
		if l.why == "" {
			f.Provides.Limits = append(f.Provides.Limits, l.name)
		} else {
			f.Provides.LimitWhy[l.name] = l.why
		}
	}
	if f.SenderPrivileged && run != nil {
		p, err := x.repo.PrivilegedUsers(ctx)
		if err != nil {
			return "", fmt.Errorf("read the users holding admin or setup: %w", err)
		}
		f.Privileged = p
		// Which users are nodes' (row 4), and which node the run's user
		// works for (row 5): the node of the first run an admin or setup
		// sent with that user, whatever became of it.
		for _, o := range msgs {
			or, ok := o.Msg.(*messages.Run)
			if !ok || !privileged(o.Sender) {
				continue
			}
			if or.Node != "" && or.Node != r.cfg.User && !slices.Contains(f.NodeUsers, or.Node) {
				f.NodeUsers = append(f.NodeUsers, or.Node)
			}
			if f.BoundNode == "" && or.Process.User == run.Process.User {
				f.BoundNode = or.Node
			}
		}
	}
	if x.otherHost && run != nil && run.HasPasswordStep() {
		pws, err := runeng.ReadPasswords(filepath.Join(r.layout.Root(), runeng.PasswordsFileName))
		switch {
		case errors.Is(err, runeng.ErrNoPasswordsFile):
			// No file: the node holds no password (row 6).
		case err != nil:
			return "", fmt.Errorf("read the file of passwords: %w", err)
		default:
			f.HasPassword = pws.Has(run.Process.User)
		}
	}
	if ref := messages.RunRefusal(run, decodeErr, f); ref != nil {
		return ref.Note, nil
	}
	// Row 8 in the host's own terms: a limit the host enforces only
	// inside a sandbox.
	var sb *host.RunSandbox
	if run.Sandbox != nil {
		sb = &host.RunSandbox{}
	}
	var lim host.RunLimits
	if l := run.Limits; l != nil {
		if l.CPU != nil {
			lim.CPU = *l.CPU
		}
		if l.Processes != nil {
			lim.Processes = *l.Processes
		}
		if l.Memory != "" {
			lim.Memory, _ = l.Memory.Bytes()
		}
	}
	if err := support.Check(sb, lim); err != nil {
		var np *host.NotProvidedError
		if errors.As(err, &np) {
			return fmt.Sprintf("%s: %s", np.Field, np.Why), nil
		}
		return err.Error(), nil
	}
	return "", nil
}

// classifyRun says what a post or ticket change holding a seed 004 message
// is to the daemon: a run for this node (RunArrived, refused or not), a
// stop that counts (RunStopRequested), or nothing (and why). handled is
// false when the artifact holds no run engine message.
func (r *records) classifyRun(ctx context.Context, x *repoIndex, hash string) (actors.Classification, bool, error) {
	msgs, err := x.runs(ctx)
	if err != nil {
		return actors.Classification{}, true, err
	}
	i := slices.IndexFunc(msgs, func(m runMsg) bool { return m.Hash == hash })
	if i < 0 {
		return actors.Classification{}, false, nil
	}
	m := msgs[i]
	privileged := privilegedOnce(ctx, x)
	nothing := func(why string) (actors.Classification, bool, error) {
		r.log.Info("a run engine message the daemon does not act on: "+why, slog.String(actors.KeyHash, hash), slog.String("kind", string(m.kind())), slog.String("sender", m.Sender))
		return actors.Classification{Nothing: why}, true, nil
	}
	if m.node() != r.cfg.User {
		return nothing(fmt.Sprintf("a %s for the node %q, not this node's (%q)", m.kind(), m.node(), r.cfg.User))
	}
	switch m.kind() {
	case messages.MsgRun:
		st := standingOf(msgs, m, privileged)
		if st.StartedCounts || st.EndedCounts {
			return nothing("a run answered already (its started or ended counts)")
		}
		note, err := r.refusalOfIn(ctx, x, msgs[:i+1], m, privileged)
		if err != nil {
			return actors.Classification{}, true, err
		}
		run, _ := m.Msg.(*messages.Run)
		ev := messages.RunArrived{Facts: runFacts(hash, run), Refusal: note}
		return actors.Classification{Run: &messages.RunRouted{Run: hash, Event: ev}}, true, nil
	case messages.MsgStop:
		if m.Msg == nil {
			return nothing("a stop that does not read: " + m.Malformed.Error())
		}
		target := m.about()
		j := slices.IndexFunc(msgs, func(o runMsg) bool { return o.Hash == target && o.kind() == messages.MsgRun })
		where := j >= 0 && msgs[j].Record == m.Record && msgs[j].Ticket == m.Ticket
		v, row := messages.ClassifyMessage(messages.MessageStanding{Kind: messages.MsgStop, SenderPrivileged: privileged(m.Sender), WhereItsRun: where})
		if v != messages.MessageCounts {
			return nothing(fmt.Sprintf("a stop %s (section 3, row %d): sent by %q, where its run is: %v", v, row, m.Sender, where))
		}
		if st := standingOf(msgs, msgs[j], privileged); st.EndedCounts {
			return nothing("a stop of a run that has ended")
		}
		if r.stopped != nil {
			r.stopped(target)
		}
		return actors.Classification{Run: &messages.RunRouted{Run: target, Event: messages.RunStopRequested{By: m.Sender, Privileged: true}}}, true, nil
	default:
		// started and ended are the node's own answers: which count is
		// read from the record when it matters; none asks anything.
		if m.Msg == nil {
			return nothing("a " + string(m.kind()) + " that does not read")
		}
		target := m.about()
		j := slices.IndexFunc(msgs, func(o runMsg) bool { return o.Hash == target && o.kind() == messages.MsgRun })
		where := j >= 0 && msgs[j].Record == m.Record && msgs[j].Ticket == m.Ticket
		s := messages.MessageStanding{Kind: m.kind(), SenderIsNode: m.Sender == r.cfg.User, WhereItsRun: where}
		if j >= 0 {
			before := standingOf(msgs[:i], msgs[j], privileged)
			s.SeenBefore = (m.kind() == messages.MsgStarted && before.StartedCounts) || (m.kind() == messages.MsgEnded && before.EndedCounts)
		}
		v, row := messages.ClassifyMessage(s)
		if v == messages.MessageCounts {
			return nothing("the node's own " + string(m.kind()))
		}
		return nothing(fmt.Sprintf("a %s %s (section 3, row %d)", m.kind(), v, row))
	}
}

// refusalOfIn is refusalOf for a run of x, whose messages up to the run are
// msgs.
func (r *records) refusalOfIn(ctx context.Context, x *repoIndex, msgs []runMsg, m runMsg, privileged func(string) bool) (string, error) {
	support := host.RunSupport{Sandbox: "this node starts no runs", CPU: "-", Processes: "-", Memory: "-"}
	if r.support != nil {
		support = r.support()
	}
	return r.refusalOf(ctx, x, msgs, m, privileged, support)
}

// startRun is a start of a manual run with OCX's run tool (`run start
// REPOSITORY HASH USER`): the run read from the record again, then, for its
// actor, its arrival (so a run the daemon holds no actor for, after a
// restart, waits first; an actor already waiting ignores it) and the start,
// with By's standing now and section 11 checked again (section 11: "when it
// arrives and again when a person starts it"). nothing says why there is no
// start to give.
func (r *records) startRun(ctx context.Context, e messages.StartRun) ([]messages.RunRouted, string, error) {
	project, ok := r.byPath(e.Repository)
	if !ok {
		return nil, fmt.Sprintf("%s is not a repository of this node (node.json)", e.Repository), nil
	}
	x, err := r.index(project)
	if err != nil {
		return nil, "", err
	}
	msgs, err := x.runs(ctx)
	if err != nil {
		return nil, "", err
	}
	i := slices.IndexFunc(msgs, func(m runMsg) bool { return m.Hash == e.Run && m.kind() == messages.MsgRun })
	if i < 0 {
		return nil, fmt.Sprintf("%s is no run on %s", e.Run, project), nil
	}
	m := msgs[i]
	if m.node() != r.cfg.User {
		return nil, fmt.Sprintf("a run for the node %q, not this node's (%q)", m.node(), r.cfg.User), nil
	}
	run, _ := m.Msg.(*messages.Run)
	if run == nil {
		return nil, "a run that does not read: it was ended refused when it arrived", nil
	}
	if !run.Process.Manual {
		return nil, "not a manual run (process.manual is false): the node started it when it arrived", nil
	}
	privileged := privilegedOnce(ctx, x)
	st := standingOf(msgs, m, privileged)
	switch {
	case st.EndedCounts:
		return nil, "the run has ended", nil
	case st.StartedCounts:
		return nil, "the run has started already", nil
	case st.StopCounts:
		return nil, "the run was stopped", nil
	}
	note, err := r.refusalOfIn(ctx, x, msgs[:i+1], m, privileged)
	if err != nil {
		return nil, "", err
	}
	// The arrival as it was (a refusal then ended it: it would not wait).
	return []messages.RunRouted{
		{Run: e.Run, Event: messages.RunArrived{Facts: runFacts(e.Run, run)}},
		{Run: e.Run, Event: messages.RunStartRequested{By: e.By, Privileged: privileged(e.By), Refusal: note}},
	}, "", nil
}
