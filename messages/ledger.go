package messages

import (
	"fmt"

	"github.com/ocx-go/ocx/messages/modelapi"
)

// MaxInFlight bounds the requests of one session its model proxy
// forwards at once (D79): enough for an agent CLI's requests beside each
// other (a sub-agent's, a small model's chore), few enough that a session
// holds a handful of the node's key's requests at a time.
const MaxInFlight = 4

// Ledger is the node's count of one session's model with what its
// requests under way may still spend (D79): the model meter's core, pure.
// A request takes a slot (Enter), then reserves before the first byte of
// its body is forwarded what its output may be (Reserve: MaxOutput, capped
// to what the limit has left: its body is forwarded with its bound capped
// to that), keeps of it what its body asks once the body is read whole
// (Bound), and gives both back when its reply has passed (Settle: the
// reservation replaced by what the reply said it used) or when it was not
// forwarded (Leave). Under limits.tokens a request is forwarded only
// while what is counted and what is reserved stay under the limit, so
// the output of the replies never passes it; what the model reads is
// known only from the reply, so the count passes the limit by at most
// what the requests under way read.
type Ledger struct {
	// Limit is the session's limits.tokens; 0: none.
	Limit uint64
	// Count is the count so far.
	Count ModelCount
	// Reached says why the budget is spent; "" while it is not.
	Reached string
	// InFlight counts the slots taken: the requests entered and not yet
	// settled or left.
	InFlight int
	// Reserved is the sum of the output bounds granted to the requests
	// forwarded and not yet settled.
	Reserved uint64
}

// LedgerVerdict is what the ledger says of a request.
type LedgerVerdict int

const (
	// LedgerGo: the request goes on.
	LedgerGo LedgerVerdict = iota
	// LedgerWait: not now: MaxInFlight requests are under way, or the
	// requests under way hold what the limit has left. Ask again once one
	// of them settles or leaves.
	LedgerWait
	// LedgerSpent: refused: the budget is spent (Reached says why), and
	// counted refused.
	LedgerSpent
)

func (v LedgerVerdict) String() string {
	switch v {
	case LedgerGo:
		return "go"
	case LedgerWait:
		return "wait"
	}
	return "spent"
}

// Enter takes a slot for a request whose body is about to be read.
func (l *Ledger) Enter() LedgerVerdict {
	switch {
	case l.Reached != "":
		l.Count.Refused++
		return LedgerSpent
	case l.InFlight >= MaxInFlight:
		return LedgerWait
	}
	l.InFlight++
	return LedgerGo
}

// Left is what the limit leaves to new requests: the limit less what is
// counted and what is reserved (0 without a limit).
func (l *Ledger) Left() uint64 {
	used := l.Count.Total() + l.Reserved
	if l.Limit == 0 || used >= l.Limit {
		return 0
	}
	return l.Limit - used
}

// Reserve grants a request that entered the bound of its output, b
// being what is known of it: the model meter reserves before a body is
// read, with b naming no bound (it asks MaxOutput) and the least its
// shape takes, and keeps of the grant what the body asks once read
// (Bound). Without a limit it is what the request asks, not capped. Under one: what it
// asks (a request naming none asks MaxOutput, the most a model writes in
// one reply) when that is no more than what is left (not capped: the
// request goes as it is), else what is left (capped: the request is to be
// forwarded with that bound, added where it names none); when what is
// left is less than the least the API takes, the request waits for the
// requests under way, or, with none under way, the budget is spent. A
// refusal leaves the slot taken: the caller leaves.
func (l *Ledger) Reserve(b modelapi.OutputBound) (grant uint64, capped bool, v LedgerVerdict) {
	if l.Reached != "" {
		l.Count.Refused++
		return 0, false, LedgerSpent
	}
	if l.Limit == 0 {
		return b.Asked, false, LedgerGo
	}
	left := l.Left()
	if ask := b.Ask(); ask <= left {
		l.Reserved += ask
		return ask, false, LedgerGo
	}
	if left >= max(b.Least, 1) {
		l.Reserved += left
		return left, true, LedgerGo
	}
	if l.Reserved > 0 {
		return 0, false, LedgerWait
	}
	l.spend(max(b.Least, 1))
	return 0, false, LedgerSpent
}

// Bound keeps of a request's grant what its body, read whole, asks (b):
// the grant lowered to b.Ask() where that is less, the rest given back
// for the requests waiting. A body whose bound was capped to the grant
// (it asks more) while the grant is below the least its API takes for it
// (b.Least: Anthropic's thinking, read only with the body) cannot go:
// the grant is given back whole (kept 0; the slot stays taken, the
// caller leaves), and the request is refused: LedgerWait when what is
// left or what the requests under way hold may serve it later (the
// client is to try again), else LedgerSpent, as Reserve says.
func (l *Ledger) Bound(grant uint64, b modelapi.OutputBound) (kept uint64, v LedgerVerdict) {
	if l.Limit == 0 {
		return grant, LedgerGo
	}
	if ask := b.Ask(); ask <= grant || grant >= b.Least {
		kept = min(ask, grant)
		l.unreserve(grant - kept)
		return kept, LedgerGo
	}
	l.unreserve(grant)
	if l.Reserved > 0 || l.Left() >= b.Least {
		return 0, LedgerWait
	}
	l.spend(b.Least)
	return 0, LedgerSpent
}

// spend is the budget spent by a request refused for want of the least
// its API takes, with nothing under way to give back; counted refused.
func (l *Ledger) spend(least uint64) {
	l.Count.Refused++
	if l.Reached = TokensReached(l.Count, l.Limit); l.Reached == "" {
		l.Reached = fmt.Sprintf("its model proxy counted %d tokens (%s) against its limits.tokens of %d, and the %d left are fewer than the least a request may ask (%d)",
			l.Count.Total(), l.Count.Tokens, l.Limit, l.Left(), least)
	}
}

// LedgerReply is what became of a request that reserved.
type LedgerReply struct {
	// Forwarded: the API replied (a reply the proxy wrote itself, an API
	// it could not reach, is no request).
	Forwarded bool
	// Tokens are what the reply said it used; Whole, whether that was
	// read; OK, whether the reply was a success.
	Tokens modelapi.Tokens
	Whole  bool
	OK     bool
}

// Settle gives back a reserved request's slot and grant, counting its
// reply; the budget is spent once the count reaches the limit, or a
// successful reply's usage did not read (TokensReached).
func (l *Ledger) Settle(grant uint64, r LedgerReply) {
	l.give(grant)
	if !r.Forwarded {
		return
	}
	l.Count.Requests++
	l.Count.Tokens = l.Count.Tokens.Plus(r.Tokens)
	if r.OK && !r.Whole {
		l.Count.Unread++
	}
	if l.Reached == "" {
		l.Reached = TokensReached(l.Count, l.Limit)
	}
}

// Leave gives back the slot of a request that entered and was not
// forwarded (refused by the proxy or the ledger).
func (l *Ledger) Leave() { l.give(0) }

func (l *Ledger) give(grant uint64) {
	if l.InFlight > 0 {
		l.InFlight--
	}
	l.unreserve(grant)
}

func (l *Ledger) unreserve(grant uint64) { l.Reserved -= min(grant, l.Reserved) }
