package node

import (
	"context"
	"errors"
	"time"

	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

// liveWait bounds how long a status waits for the daemon's answer before
// the node reads the record itself: the daemon's status is a few
// milliseconds, even for a large record, so one that does not answer in
// this time is stuck.
const liveWait = 5 * time.Second

// LiveStatus is the node's status as the daemon's live record gives it on
// its socket (D66), current to the receipts it names. With no daemon
// answering within 100 ms, one that takes no ask within
// nodesock.AnswerWait (it is stopped, D75), a refusal, or an answer that
// does not read, the node derives it itself (Status) and why says why; why
// is empty when the daemon answered.
func (n *Node) LiveStatus(ctx context.Context) (st *messages.NodeState, why string, err error) {
	doc, st, why, err := n.liveStatus(ctx)
	if doc == nil {
		return st, why, err
	}
	st, derr := messages.DecodeState(doc)
	if derr == nil {
		return st, "", nil
	}
	st, err = n.Status(ctx)
	return st, "the daemon's state document: " + derr.Error(), err
}

// LiveStatusDoc is the state document `ocx status --json` prints: the
// daemon's own (D70), copied as it came when its framing holds
// (messages.CheckStateDoc, nodesock.Ask); else as LiveStatus derives it.
func (n *Node) LiveStatusDoc(ctx context.Context) (doc []byte, why string, err error) {
	doc, st, why, err := n.liveStatus(ctx)
	if doc == nil && err == nil {
		doc, err = st.Encode()
	}
	return doc, why, err
}

// liveStatus is the daemon's state document, or the state in its reply's
// line (a daemon before D70), or the node's own derived with why.
func (n *Node) liveStatus(ctx context.Context) (doc []byte, st *messages.NodeState, why string, err error) {
	r, aerr := n.AskDaemon(ctx, wire.NewAsk(wire.AskStatus))
	switch {
	case aerr == nil && r.StateDoc != nil:
		return r.StateDoc, nil, "", nil
	case aerr == nil && r.State != nil:
		return nil, r.State, "", nil
	case aerr == nil:
		aerr = errNoState
	}
	st, err = n.Status(ctx)
	return nil, st, aerr.Error(), err
}

// errNoState: the daemon's reply to a status ask held no status.
var errNoState = errors.New("the daemon's reply holds no status")

// AskDaemon asks the daemon on its socket (D66), waiting liveWait at most,
// and notes what its answer passed over as this node's own read would.
func (n *Node) AskDaemon(ctx context.Context, a *wire.Ask) (*wire.Reply, error) {
	var r *wire.Reply
	var err error
	if n.ask != nil {
		r, err = n.ask(ctx, a)
	} else {
		r, err = nodesock.Ask(ctx, n.Layout, a, liveWait)
	}
	if err != nil {
		return nil, err
	}
	for _, p := range r.Passed {
		n.passed.Note(p.What, p.Why)
	}
	return r, nil
}
