package actors

import (
	"log/slog"
	"sort"
	"time"

	"github.com/ocx-go/ocx/messages/protocol"
)

// runSchedule decides, for the node, when each run has its turns (D86):
// its user's slot (seed 004 §5: on the server's node the password step
// sets the user's password afresh, so it "runs one run at a time for each
// user"; seed 002: "a watcher that ends hands on the next waiting run of
// its user") and its started (section 10 in the server's order, D72: a
// run's started is written only once every run of its project that
// stands before it and was found to begin has its started written, or
// ended, or left the node's care, or waits for its user's slot). A run
// asks (RunTurnRequested) and is told (RunTurnGiven) when it may; it says
// when it is done (RunTurnDone). A started held back longer than
// Config.OrderWait is given all the same, and the log names the run it
// waited for. It is part of the node's core, and pure as every core is.
type runSchedule struct {
	base
	cfg Config
	// pending are the runs found to begin whose started is not settled,
	// by hash.
	pending map[string]inOrder
	// asks are the runs waiting for their turn to write started, by the
	// seq of their order timer.
	asks map[int]startAsk
	// holder is the run holding each user's slot; waiting the runs
	// waiting for it, in the order they asked.
	holder  map[string]string
	waiting map[string][]string
	seq     int
}

// inOrder is a run found to begin whose started is not written yet.
type inOrder struct {
	project string
	at      protocol.RunPosition
	// passed: it waits for its user's slot, and the runs after it go on.
	passed bool
}

// startAsk is a run waiting for its turn to write started.
type startAsk struct {
	run     string
	project string
	at      protocol.RunPosition
}

// newRunSchedule makes an empty schedule.
func newRunSchedule(cfg Config) *runSchedule {
	return &runSchedule{cfg: cfg.withDefaults(), pending: map[string]inOrder{}, asks: map[int]startAsk{},
		holder: map[string]string{}, waiting: map[string][]string{}}
}

// InOrder keeps a run found to begin: the runs of its project after it
// write their started after its own.
func (s *runSchedule) InOrder(run, project string, at protocol.RunPosition) {
	if _, ok := s.pending[run]; !ok {
		s.pending[run] = inOrder{project: project, at: at}
	}
}

// Hold gives user's slot to run at once, with no wait: a run found in the
// node's care at a start whose started counts.
func (s *runSchedule) Hold(user, run string) {
	if s.holder[user] == "" {
		s.holder[user] = run
	}
}

// Step takes a run's ask, a run done with a turn, or an order timer.
func (s *runSchedule) Step(now time.Time, msg protocol.DaemonMessage) []protocol.DaemonEffect {
	switch m := msg.(type) {
	case protocol.RunTurnRequested:
		switch m.Turn {
		case protocol.RunTurnSlot:
			s.askSlot(m.Run, m.User)
		case protocol.RunTurnStarted:
			s.askStarted(m)
		}
	case protocol.RunTurnDone:
		switch m.Turn {
		case protocol.RunTurnSlot:
			s.giveSlot(m.Run)
		case protocol.RunTurnStarted:
			s.settled(m.Run)
		}
	case protocol.RunTimerFired:
		s.orderTimer(m)
	}
	return s.take()
}

func (s *runSchedule) give(run, turn string) {
	s.tell(protocol.RunAddr(run), protocol.RunTurnGiven{Turn: turn})
}

// askSlot gives user's slot to run, or has it wait behind the runs that
// asked before it; while it waits, the runs after it go on.
func (s *runSchedule) askSlot(run, user string) {
	if h := s.holder[user]; h == "" || h == run {
		s.holder[user] = run
		s.give(run, protocol.RunTurnSlot)
		return
	}
	for _, w := range s.waiting[user] {
		if w == run {
			return
		}
	}
	s.waiting[user] = append(s.waiting[user], run)
	s.log(slog.LevelInfo, "run waits for its user's run before it (one run at a time for each user)",
		runAttr(run), slog.String("user", user), slog.String("before", s.holder[user]))
	if e, ok := s.pending[run]; ok && !e.passed {
		e.passed = true
		s.pending[run] = e
		s.grant()
	}
}

// giveSlot gives back the slot run holds, to the next run waiting, or
// ends run's wait for it.
func (s *runSchedule) giveSlot(run string) {
	for _, user := range sortedKeys(s.holder) {
		if s.holder[user] != run {
			continue
		}
		ws := s.waiting[user]
		if len(ws) == 0 {
			delete(s.holder, user)
			continue
		}
		s.holder[user] = ws[0]
		if len(ws) == 1 {
			delete(s.waiting, user)
		} else {
			s.waiting[user] = ws[1:]
		}
		s.give(ws[0], protocol.RunTurnSlot)
	}
	for _, user := range sortedKeys(s.waiting) {
		ws := s.waiting[user]
		for i, w := range ws {
			if w == run {
				ws = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(s.waiting, user)
		} else {
			s.waiting[user] = ws
		}
	}
}

// askStarted gives the run its turn to write started at once when no run
// before it holds it back; otherwise it waits, for at most OrderWait.
func (s *runSchedule) askStarted(m protocol.RunTurnRequested) {
	a := startAsk{run: m.Run, project: m.Project, at: m.At}
	if _, held := s.before(a); !held {
		s.give(m.Run, protocol.RunTurnStarted)
		return
	}
	for seq, o := range s.asks {
		if o.run == m.Run {
			delete(s.asks, seq) // asked again: the newer ask counts
		}
	}
	s.seq++
	s.asks[s.seq] = a
	s.emit(protocol.RunStartTimer{Run: m.Run, Purpose: protocol.RunTimerOrder, Seq: s.seq, After: s.cfg.OrderWait})
}

// settled forgets a run whose started is written, or that ended or left
// the node's care; the runs it held back go on.
func (s *runSchedule) settled(run string) {
	if _, ok := s.pending[run]; ok {
		delete(s.pending, run)
		s.grant()
	}
}

// grant gives their turn to the runs waiting that nothing holds back now,
// in the server's order.
func (s *runSchedule) grant() {
	for _, seq := range s.askOrder() {
		a := s.asks[seq]
		if _, held := s.before(a); !held {
			delete(s.asks, seq)
			s.give(a.run, protocol.RunTurnStarted)
		}
	}
}

// orderTimer gives a run its turn past OrderWait, out of the server's
// order, naming the run it did not wait for any longer.
func (s *runSchedule) orderTimer(m protocol.RunTimerFired) {
	a, ok := s.asks[m.Seq]
	if m.Purpose != protocol.RunTimerOrder || !ok {
		return
	}
	delete(s.asks, m.Seq)
	first, _ := s.before(a)
	s.log(slog.LevelWarn, "a run is started out of the server's order: a run before it is neither started nor ended",
		runAttr(a.run), slog.String("before", first), slog.Duration("waited", s.cfg.OrderWait))
	s.give(a.run, protocol.RunTurnStarted)
}

// before is the earliest run, in the server's order, that stands before a
// in its project and holds it back: the one a log line names.
func (s *runSchedule) before(a startAsk) (string, bool) {
	if a.at.IsZero() {
		return "", false
	}
	first, found := "", false
	var firstAt protocol.RunPosition
	for h, e := range s.pending {
		if h == a.run || e.project != a.project || e.passed || !e.at.Before(a.at) {
			continue
		}
		if !found || e.at.Before(firstAt) || (!firstAt.Before(e.at) && h < first) {
			first, firstAt, found = h, e.at, true
		}
	}
	return first, found
}

// askOrder is the seqs of the runs waiting for started, in the server's
// order (then by hash), so that turns given at once go out in it.
func (s *runSchedule) askOrder() []int {
	seqs := make([]int, 0, len(s.asks))
	for seq := range s.asks {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool {
		a, b := s.asks[seqs[i]], s.asks[seqs[j]]
		if a.at != b.at {
			return a.at.Before(b.at)
		}
		return a.run < b.run
	})
	return seqs
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (s *runSchedule) addr() protocol.ActorAddr { return protocol.NodeAddr() }

// Start does nothing: the schedule starts empty, and the node holds the
// slots of the runs it finds (Hold).
func (s *runSchedule) Start(time.Time) []protocol.DaemonEffect { return nil }
