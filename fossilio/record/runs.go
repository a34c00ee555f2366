package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The record of seed 004's runs: every post and ticket change holding a run
// engine message, read from its first version (an edit is ignored), with
// who sent it (the server's receipt) and where it stands in the server's
// order. Section 3's table decides which count (runmsg.ClassifyMessage);
// StandingOf is the one reading of it, for the daemon and the run tool
// alike.

// RunMsg is one run engine message on the record.
type RunMsg struct {
	Hash   string
	Sender string
	Rcvid  int64
	Rid    int64
	// Record is the thread's root post, or the ticket's id; Ticket says
	// which.
	Record string
	Ticket bool
	// Msg is the message, or nil when it does not decode (Malformed).
	Msg       runmsg.Message
	Malformed *runmsg.MalformedMessage
	// Received is when the server received it.
	Received time.Time
	// Firing is set for a fired that counts (D101): Msg is then the run
	// it is (the trigger's, without on), Sender the trigger's sender,
	// whose authority it carries, and Firing.By the node user who wrote
	// it. RunLog sets it; ReadRunMsg reads a fired as itself.
	Firing *Firing
}

// Firing is what a fired that counts says: its trigger and its cause.
type Firing struct {
	Trigger string
	Fired   *runmsg.RunFired
	By      string
}

// Kind is the message's kind, as decoded or as its malformed envelope says.
func (m RunMsg) Kind() runmsg.MessageKind {
	if m.Msg != nil {
		return m.Msg.Kind()
	}
	return m.Malformed.Kind
}

// Node is the node the envelope names.
func (m RunMsg) Node() string {
	if m.Msg != nil {
		return m.Msg.NodeUser()
	}
	return m.Malformed.Node
}

// About is the run a stop, started or ended names, or the run's own hash.
func (m RunMsg) About() string {
	switch x := m.Msg.(type) {
	case *runmsg.RunStop:
		return x.Run
	case *runmsg.RunStarted:
		return x.Run
	case *runmsg.RunEnded:
		return x.Run
	}
	return m.Hash
}

// Run is the run the message is, nil for any other kind and for a run that
// does not decode.
func (m RunMsg) Run() *runmsg.Run {
	r, _ := m.Msg.(*runmsg.Run)
	return r
}

// At is where the message stands in the server's order.
func (m RunMsg) At() protocol.RunPosition {
	return protocol.RunPosition{Receipt: m.Rcvid, Row: m.Rid}
}

// SameRecord says whether o is where m is: the same thread, or the same
// ticket.
func (m RunMsg) SameRecord(o RunMsg) bool { return m.Record == o.Record && m.Ticket == o.Ticket }

// ReadRunMsg reads the run engine message an artifact holds, from its first
// version: an edit, or a post awaiting moderation, holds none.
func ReadRunMsg(info fossilio.Info, text string) (RunMsg, bool) {
	m := RunMsg{Hash: info.Hash, Sender: info.Sender, Rcvid: info.Rcvid, Rid: info.Rid, Received: info.Received}
	switch {
	case info.Kind == fossilio.KindPost && !info.Edit && !info.Pending:
		m.Record = info.Root
	case info.Kind == fossilio.KindTicketChange:
		m.Record, m.Ticket = info.Ticket, true
	default:
		return m, false
	}
	msg, err := runmsg.ReadMessage([]byte(text))
	var mm *runmsg.MalformedMessage
	switch {
	case errors.As(err, &mm) && mm.Kind != runmsg.MsgRecord:
		m.Malformed = mm
	case err != nil:
		return m, false
	case msg.Kind() == runmsg.MsgRecord:
		return m, false
	default:
		m.Msg = msg
	}
	return m, true
}

// receivedBatch is how many artifacts are classified and read at once.
const receivedBatch = 512

// eachReceived calls f with every artifact the repository received after
// the receipt after, in the server's order, and the text NoteTexts reads of
// it; name names the repository in errors. It returns the last receipt.
func eachReceived(ctx context.Context, r *fossilio.Repo, name string, after int64, f func(fossilio.Info, string)) (int64, error) {
	hashes, last, err := r.Received(ctx, after)
	if err != nil {
		return 0, fmt.Errorf("read what %s received: %w", name, err)
	}
	for len(hashes) > 0 {
		batch := hashes[:min(receivedBatch, len(hashes))]
		hashes = hashes[len(batch):]
		infos, err := r.Classify(ctx, batch...)
		if err != nil {
			return 0, fmt.Errorf("classify what %s received: %w", name, err)
		}
		texts, err := r.NoteTexts(ctx, infos)
		if err != nil {
			return 0, fmt.Errorf("read what %s received: %w", name, err)
		}
		for i, info := range infos {
			f(info, texts[i])
		}
	}
	return last, nil
}

// RunLog is one repository's run engine messages, in the server's order,
// read incrementally from the receipts. Its zero value is an empty log.
type RunLog struct {
	mu   sync.Mutex
	mark int64
	msgs []RunMsg
	at   map[string]int // by hash, an index into msgs
	// causes are the firings that count, by trigger and cause (D101).
	causes map[string]bool
}

// Read returns the repository's run engine messages, brought up to date
// from the receipts after the last it read; name names the repository in
// errors.
func (l *RunLog) Read(ctx context.Context, r *fossilio.Repo, name string) ([]RunMsg, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, err := eachReceived(ctx, r, name, l.mark, l.add)
	if err != nil {
		return nil, err
	}
	if last > l.mark {
		l.mark = last
	}
	return slices.Clone(l.msgs), nil
}

// Add keeps the run engine message an artifact holds, once: the daemon's
// record.Index tells it of each artifact its refresh reads (NewIndex's
// also), so the daemon reads each artifact once for both.
func (l *RunLog) Add(info fossilio.Info, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.add(info, text)
}

func (l *RunLog) add(info fossilio.Info, text string) {
	m, ok := ReadRunMsg(info, text)
	if !ok {
		return
	}
	if l.at == nil {
		l.at = map[string]int{}
	}
	if _, dup := l.at[m.Hash]; !dup {
		if f, ok := m.Msg.(*runmsg.RunFired); ok {
			m = l.firing(m, f)
		}
		l.at[m.Hash] = len(l.msgs)
		l.msgs = append(l.msgs, m)
	}
}

// firing reads a fired (D101), in the server's order: one that counts is
// the run it is; any other stays a fired, which no reader acts on. It
// counts when the node user of the node its trigger names wrote it, where
// the trigger is, naming a cause of the trigger's kind that no fired
// before it named, before the trigger's ended counts.
func (l *RunLog) firing(m RunMsg, f *runmsg.RunFired) RunMsg {
	j, ok := l.at[f.Run]
	if !ok {
		return m
	}
	t := l.msgs[j]
	tr := t.Run()
	if tr == nil || tr.Process.On == nil || t.Firing != nil {
		return m
	}
	if m.Sender != f.Node || f.Node != tr.Node || !m.SameRecord(t) || (tr.Process.On.Kind() == "checkin") != (f.Checkin != "") {
		return m
	}
	key := f.Run + " " + f.Cause()
	if l.causes[key] {
		return m
	}
	// An ended counts when the trigger's node user wrote it where the
	// trigger is (section 3); the first one ends it.
	for _, o := range l.msgs[j+1:] {
		if e, ok := o.Msg.(*runmsg.RunEnded); ok && e.Run == t.Hash && o.Sender == tr.Node && o.SameRecord(t) {
			return m
		}
	}
	if l.causes == nil {
		l.causes = map[string]bool{}
	}
	l.causes[key] = true
	m.Firing = &Firing{Trigger: t.Hash, Fired: f, By: m.Sender}
	m.Msg, m.Sender = tr.Firing(), t.Sender
	return m
}

// Msgs returns the messages kept so far, in the server's order.
func (l *RunLog) Msgs() []RunMsg {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs)
}

// ReadRuns reads every run engine message of the repository once, in the
// server's order.
func ReadRuns(ctx context.Context, r *fossilio.Repo, name string) ([]RunMsg, error) {
	var l RunLog
	return l.Read(ctx, r, name)
}

// RunStanding is what the record says of one run: the message, which of
// its started, stops and ended count (section 3), and where.
type RunStanding struct {
	Run           RunMsg
	StartedCounts bool
	StopCounts    bool
	EndedCounts   bool
	// StartedAt is where the started that counts stands in the server's
	// order (table 9, filter 2), zero while none counts.
	StartedAt protocol.RunPosition
	// Started, Stopped and Ended are the hashes of the started, the first
	// stop and the ended that count, "" for none; EndedBy is that ended.
	Started, Stopped, Ended string
	EndedBy                 *runmsg.RunEnded
}

// PrivilegedFunc answers "holds admin or setup" for a user.
type PrivilegedFunc func(user string) bool

// PrivilegedOnce answers "holds admin or setup" from the repository, each
// user read once; "" holds nothing.
func PrivilegedOnce(ctx context.Context, r *fossilio.Repo) PrivilegedFunc {
	seen := map[string]bool{}
	return func(u string) bool {
		if u == "" {
			return false
		}
		if v, ok := seen[u]; ok {
			return v
		}
		seen[u] = Privileged(ctx, r, u)
		return seen[u]
	}
}

// StandingOf applies section 3's table to the messages about run: which
// started, stop and ended count.
func StandingOf(msgs []RunMsg, run RunMsg, privileged PrivilegedFunc) RunStanding {
	st := RunStanding{Run: run}
	node := run.Node()
	for _, m := range msgs {
		if m.Msg == nil || m.About() != run.Hash || m.Hash == run.Hash {
			continue
		}
		s := runmsg.MessageStanding{Kind: m.Kind(), SenderPrivileged: privileged(m.Sender), SenderIsNode: m.Sender == node, WhereItsRun: m.SameRecord(run)}
		switch m.Kind() {
		case runmsg.MsgStarted:
			s.SeenBefore = st.StartedCounts
		case runmsg.MsgEnded:
			s.SeenBefore = st.EndedCounts
		}
		if v, _ := runmsg.ClassifyMessage(s); v != runmsg.MessageCounts {
			continue
		}
		switch x := m.Msg.(type) {
		case *runmsg.RunStarted:
			st.StartedCounts, st.Started, st.StartedAt = true, m.Hash, m.At()
		case *runmsg.RunEnded:
			st.EndedCounts, st.Ended, st.EndedBy = true, m.Hash, x
		case *runmsg.RunStop:
			if !st.StopCounts {
				st.StopCounts, st.Stopped = true, m.Hash
			}
		}
	}
	return st
}

// Waits says whether the run waits for a person's start: a manual run an
// admin or setup sent that neither started nor ended (a refusal at its
// arrival would have ended it).
func (s RunStanding) Waits(privileged PrivilegedFunc) bool {
	r := s.Run.Run()
	return !s.StartedCounts && !s.EndedCounts && r != nil && r.Process.Manual && privileged(s.Run.Sender)
}

// IndexRun is where the run hash is among msgs, -1 when none is.
func IndexRun(msgs []RunMsg, hash string) int {
	return slices.IndexFunc(msgs, func(m RunMsg) bool { return m.Hash == hash && m.Kind() == runmsg.MsgRun })
}

// RunRecordFacts are the facts of section 11 the record gives for the run
// m (rows 1, 4 and 5): whether its sender holds admin or setup, who does,
// which users are other nodes' and which node m's user works for, as the
// runs msgs (the record before m, or with it: m counts for nothing
// itself) say. nodeUser is this node's. The rest of the facts are the
// node's and its host's, which the caller adds. The daemon reads them for
// a run that arrived, and the run tool for one it is to post.
func RunRecordFacts(ctx context.Context, r *fossilio.Repo, msgs []RunMsg, m RunMsg, nodeUser string, privileged PrivilegedFunc) (runmsg.RefusalFacts, error) {
	f := runmsg.RefusalFacts{SenderPrivileged: privileged(m.Sender), NodeUser: nodeUser}
	run := m.Run()
	if !f.SenderPrivileged || run == nil {
		return f, nil
	}
	p, err := r.PrivilegedUsers(ctx)
	if err != nil {
		return f, fmt.Errorf("read the users holding admin or setup: %w", err)
	}
	f.Privileged = p
	f.NodeUsers, f.BoundNode = RunBinding(msgs, nodeUser, run.Process.User, privileged)
	return f, nil
}

// RunBinding is what the runs admins and setups sent say of the users (rows
// 4 and 5 of section 11): which users are other nodes' than self, and which
// node the first such run with user works for, whatever became of it.
func RunBinding(msgs []RunMsg, self, user string, privileged PrivilegedFunc) (nodeUsers []string, bound string) {
	for _, o := range msgs {
		or := o.Run()
		if or == nil || !privileged(o.Sender) {
			continue
		}
		if or.Node != "" && or.Node != self && !slices.Contains(nodeUsers, or.Node) {
			nodeUsers = append(nodeUsers, or.Node)
		}
		if bound == "" && or.Process.User == user {
			bound = or.Node
		}
	}
	return nodeUsers, bound
}

// ArrivalOf is an artifact as table 9's filters and lines read it; ok is
// false for what no session is given: an edit of a post, a post awaiting
// moderation, anything but a post, a ticket change or a check-in. text is
// what NoteTexts read of it.
func ArrivalOf(info fossilio.Info, text string) (protocol.RunArrival, bool) {
	a := protocol.RunArrival{Hash: info.Hash, At: protocol.RunPosition{Receipt: info.Rcvid, Row: info.Rid}, From: info.Sender}
	switch {
	case info.Kind == fossilio.KindPost && !info.Edit && !info.Pending:
		a.Kind, a.Thread, a.Text, a.HoldsMessage = protocol.RunPost, info.Root, text, protocol.HoldsMessage(text)
	case info.Kind == fossilio.KindTicketChange:
		a.Kind, a.Ticket, a.Text, a.HoldsMessage = protocol.RunChange, info.Ticket, text, protocol.HoldsMessage(text)
	case info.Kind == fossilio.KindCheckin:
		// An OCX message is written in a post or a ticket change alone.
		a.Kind, a.Branch, a.Text = protocol.RunCheckin, info.Branch, info.Comment
	default:
		return a, false
	}
	return a, true
}

// ArrivalsAfter reads what the repository received after the place at, in
// the server's order; name names it in errors.
func ArrivalsAfter(ctx context.Context, r *fossilio.Repo, name string, at protocol.RunPosition) ([]protocol.RunArrival, error) {
	var out []protocol.RunArrival
	from, err := r.ReceiptBefore(ctx, at.Receipt, at.Row)
	if err != nil {
		return nil, fmt.Errorf("read what %s received: %w", name, err)
	}
	_, err = eachReceived(ctx, r, name, from, func(info fossilio.Info, text string) {
		if a, ok := ArrivalOf(info, text); ok && at.Before(a.At) {
			out = append(out, a)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
