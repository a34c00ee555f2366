package runengine

import (
	"context"
	"errors"
	"sync"
)

// userSlots holds seed 004 §5's rule for the password step on the server's
// node: "it runs one run at a time for each user", since the step sets the
// user's password afresh and a run still going would lose its clone's.
// A run takes its user's slot when it is prepared and gives it back when it
// leaves the node's care; the next run of that user waiting, in the order
// they came, takes it then (seed 002, "watch a run": "a watcher that ends
// hands on the next waiting run of its user"). A stop of a waiting run
// ends its wait.
type userSlots struct {
	mu      sync.Mutex
	holder  map[string]string      // user → the run holding its slot
	waiting map[string][]*slotWait // user → the runs waiting, in order
}

type slotWait struct {
	run     string
	ready   chan struct{} // closed when the slot is the run's
	stopped chan struct{} // closed when a stop ends the wait
}

// errStoppedWaiting is a wait a stop ended.
var errStoppedWaiting = errors.New("stopped while it waited for its user's run before it")

func newUserSlots() *userSlots {
	return &userSlots{holder: map[string]string{}, waiting: map[string][]*slotWait{}}
}

// hold gives user's slot to run at once, with no wait: a run found in the
// node's care at start, whose started counts.
func (s *userSlots) hold(user, run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder[user] == "" {
		s.holder[user] = run
	}
}

// take waits for user's slot for run; it returns the run holding it while
// run waits (for the log) through waiting, once.
func (s *userSlots) take(ctx context.Context, user, run string, waiting func(before string)) error {
	s.mu.Lock()
	if h := s.holder[user]; h == "" || h == run {
		s.holder[user] = run
		s.mu.Unlock()
		return nil
	}
	w := &slotWait{run: run, ready: make(chan struct{}), stopped: make(chan struct{})}
	s.waiting[user] = append(s.waiting[user], w)
	before := s.holder[user]
	s.mu.Unlock()
	if waiting != nil {
		waiting(before)
	}
	select {
	case <-w.ready:
		return nil
	case <-w.stopped:
		return errStoppedWaiting
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-w.ready: // handed over meanwhile: hand it on
			s.handOnLocked(user)
		default:
			s.dropLocked(user, w)
		}
		return ctx.Err()
	}
}

// give gives back the slot run holds, if any, to the next run waiting.
func (s *userSlots) give(run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for user, h := range s.holder {
		if h == run {
			s.handOnLocked(user)
		}
	}
}

// stop ends run's wait, if it waits.
func (s *userSlots) stop(run string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for user, ws := range s.waiting {
		for _, w := range ws {
			if w.run == run {
				s.dropLocked(user, w)
				close(w.stopped)
				return
			}
		}
	}
}

func (s *userSlots) handOnLocked(user string) {
	ws := s.waiting[user]
	if len(ws) == 0 {
		delete(s.holder, user)
		return
	}
	next := ws[0]
	s.waiting[user] = ws[1:]
	s.holder[user] = next.run
	close(next.ready)
}

func (s *userSlots) dropLocked(user string, w *slotWait) {
	ws := s.waiting[user]
	for i, o := range ws {
		if o == w {
			s.waiting[user] = append(ws[:i:i], ws[i+1:]...)
			return
		}
	}
}
