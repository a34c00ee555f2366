package actors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages/protocol"
)

// TestRunScheduleTranscripts runs every testdata/runsched/*.txt through a
// node's run schedule (D86), as TestTranscripts does for the tree: a line
// "> inorder R1 demo 10.1" keeps a run found to begin, "> hold ana R1"
// gives a slot at a start, "> ask slot R1 ana" and "> ask started R1 demo
// 10.1" (or "> ask started R1" for a run with no place) are a run's asks,
// "> done slot R1" and "> done started R1" its giving back, "> fire N" the
// order timer [N] firing. The lines after each are what the schedule did.
func TestRunScheduleTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "runsched", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata/runsched")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			runScheduleTranscript(t, f)
		})
	}
}

// schedTranscript is a schedule driven by a transcript, its timers
// numbered as they are asked for.
type schedTranscript struct {
	tr     *transcript
	s      *runSchedule
	now    time.Time
	timers map[int]protocol.RunStartTimer
	next   int
}

func runScheduleTranscript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st := &schedTranscript{tr: newTranscript(), s: newRunSchedule(Config{}), now: transcriptEpoch, timers: map[int]protocol.RunStartTimer{}}
	playTranscript(t, path, data, func(cmd string, _ int) ([]string, error) { return st.do(cmd) })
}

// position reads "10.1" as a receipt and a row.
func position(s string) (protocol.RunPosition, error) {
	r, w, ok := strings.Cut(s, ".")
	if !ok {
		return protocol.RunPosition{}, fmt.Errorf("position %q: RECEIPT.ROW", s)
	}
	rec, err1 := strconv.ParseInt(r, 10, 64)
	row, err2 := strconv.ParseInt(w, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return protocol.RunPosition{}, err
	}
	return protocol.RunPosition{Receipt: rec, Row: row}, nil
}

func (st *schedTranscript) do(cmd string) ([]string, error) {
	f := strings.Fields(cmd)
	var effs []protocol.DaemonEffect
	switch {
	case len(f) == 4 && f[0] == "inorder":
		at, err := position(f[3])
		if err != nil {
			return nil, err
		}
		st.s.InOrder(st.tr.hash(f[1]), f[2], at)
	case len(f) == 3 && f[0] == "hold":
		st.s.Hold(f[1], st.tr.hash(f[2]))
	case len(f) == 4 && f[0] == "ask" && f[1] == protocol.RunTurnSlot:
		effs = st.s.Step(st.now, protocol.RunTurnRequested{Run: st.tr.hash(f[2]), Turn: protocol.RunTurnSlot, User: f[3]})
	case (len(f) == 3 || len(f) == 5) && f[0] == "ask" && f[1] == protocol.RunTurnStarted:
		m := protocol.RunTurnRequested{Run: st.tr.hash(f[2]), Turn: protocol.RunTurnStarted}
		if len(f) == 5 {
			at, err := position(f[4])
			if err != nil {
				return nil, err
			}
			m.Project, m.At = f[3], at
		}
		effs = st.s.Step(st.now, m)
	case len(f) == 3 && f[0] == "done":
		effs = st.s.Step(st.now, protocol.RunTurnDone{Run: st.tr.hash(f[2]), Turn: f[1]})
	case len(f) == 2 && f[0] == "fire":
		id, err := strconv.Atoi(strings.Trim(f[1], "[]"))
		if err != nil {
			return nil, err
		}
		tm, ok := st.timers[id]
		if !ok {
			return nil, fmt.Errorf("[%d] is no timer", id)
		}
		delete(st.timers, id)
		st.now = st.now.Add(tm.After)
		effs = st.s.Step(st.now, protocol.RunTimerFired{Purpose: tm.Purpose, Seq: tm.Seq})
	default:
		return nil, fmt.Errorf("unknown command %q", cmd)
	}
	var out []string
	for _, e := range effs {
		line := e.String()
		if tm, ok := e.(protocol.RunStartTimer); ok {
			st.next++
			st.timers[st.next] = tm
			line = fmt.Sprintf("[%d] %s", st.next, line)
		}
		out = append(out, st.tr.render(line))
	}
	return out, nil
}

// schedModel is what the schedule's answers must add up to: the runs of
// one project, in the server's order, each found to begin or not, with
// a password step of one of two users or none, each asking for its slot
// and its started in turn as a run core does.
type schedModel struct {
	s   *runSchedule
	now time.Time
	// runs are the runs arrived, in the server's order.
	runs []*schedRun
	// timers are the order timers not yet fired.
	timers []protocol.RunStartTimer
	// startedOrder are the runs whose started was written, in order;
	// late says a timer gave that run its turn.
	startedOrder []int
	late         map[int]bool
}

type schedRun struct {
	i       int
	hash    string
	at      protocol.RunPosition
	inOrder bool
	user    string
	// phase: 0 arrived, 1 waits for its slot, 2 holds it (layers made),
	// 3 waits for its turn to write started, 4 may write it, 5 started
	// written, 6 out of care.
	phase int
	// stopped: ended before its started (a stop or a failed layer).
	stopped bool
	held    bool // holds its user's slot
	// passed: it waited for its slot, so the runs after it went on.
	passed bool
}

func (m *schedModel) apply(t *rapid.T, effs []protocol.DaemonEffect) {
	for _, e := range effs {
		switch e := e.(type) {
		case protocol.Tell:
			g, ok := e.Msg.(protocol.RunTurnGiven)
			if !ok || e.To.Kind != protocol.ActorRun {
				t.Fatalf("the schedule tells %s", e)
			}
			r := m.byHash(t, e.To.Run)
			switch {
			case g.Turn == protocol.RunTurnSlot && r.phase == 1:
				r.phase, r.held = 2, true
			case g.Turn == protocol.RunTurnSlot && r.stopped:
				// Given before its giving up reached the node: the run
				// gives it back, as a run core does.
				r.held = true
				m.step(t, protocol.RunTurnDone{Run: r.hash, Turn: protocol.RunTurnSlot})
			case g.Turn == protocol.RunTurnStarted && r.phase == 3:
				r.phase = 4
			default:
				t.Fatalf("turn %s given to run %d in phase %d", g.Turn, r.i, r.phase)
			}
		case protocol.RunStartTimer:
			if e.Purpose != protocol.RunTimerOrder || e.After != defaultOrderWait {
				t.Fatalf("a timer not for the order: %s", e)
			}
			m.timers = append(m.timers, e)
		case protocol.LogEvent:
		default:
			t.Fatalf("the schedule asks for %s", e)
		}
	}
}

func (m *schedModel) step(t *rapid.T, msg protocol.DaemonMessage) {
	t.Logf("step %s", msg)
	m.apply(t, m.s.Step(m.now, msg))
	m.check(t)
}

func (m *schedModel) byHash(t *rapid.T, h string) *schedRun {
	for _, r := range m.runs {
		if r.hash == h {
			return r
		}
	}
	t.Fatalf("a turn for a run that never asked: %s", h)
	return nil
}

// check holds after every step: never two runs of one user hold the slot
// at once, and a run the schedule gave its turn to write started has no
// run before it, found to begin, neither started nor ended nor out of
// care nor waiting for its slot, unless its order timer fired.
func (m *schedModel) check(t *rapid.T) {
	holders := map[string]int{}
	for _, r := range m.runs {
		if r.held {
			holders[r.user]++
			if holders[r.user] > 1 {
				t.Fatalf("two runs of %s hold its slot at once", r.user)
			}
		}
	}
	for _, r := range m.runs {
		if r.phase != 4 || m.late[r.i] {
			continue
		}
		for _, b := range m.runs[:r.i] {
			if b.inOrder && !b.stopped && !b.passed && b.phase < 5 {
				t.Fatalf("run %d may write started while run %d before it (phase %d) neither started nor ended", r.i, b.i, b.phase)
			}
		}
	}
}

// TestRunScheduleProperties drives the schedule with runs arriving in the
// server's order and going through their turns in any order a node's
// mailbox may give: slots held one at a time a user, handed on in the
// order asked; started given in the server's order unless a timer fired;
// and, once every run is done, no run left waiting.
func TestRunScheduleProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &schedModel{s: newRunSchedule(Config{}), now: runT0, late: map[int]bool{}}
		pick := func(t *rapid.T, phase int) *schedRun {
			var rs []*schedRun
			for _, r := range m.runs {
				if r.phase == phase && !r.stopped {
					rs = append(rs, r)
				}
			}
			if len(rs) == 0 {
				t.Skip("no run there")
			}
			return rapid.SampledFrom(rs).Draw(t, "run")
		}
		t.Repeat(map[string]func(*rapid.T){
			"arrive": func(t *rapid.T) {
				i := len(m.runs)
				r := &schedRun{i: i, hash: fmt.Sprintf("%040d", i+1), at: protocol.RunPosition{Receipt: int64(10 + i), Row: 1},
					inOrder: rapid.IntRange(0, 4).Draw(t, "found to begin") > 0, user: rapid.SampledFrom([]string{"", "ana", "bo"}).Draw(t, "user")}
				m.runs = append(m.runs, r)
				if r.inOrder {
					m.s.InOrder(r.hash, "demo", r.at)
				}
				// It is taken into care and asks for its slot, or has
				// its layers made at once.
				if r.user == "" {
					r.phase = 2
					return
				}
				r.phase = 1
				m.step(t, protocol.RunTurnRequested{Run: r.hash, Turn: protocol.RunTurnSlot, User: r.user})
				r.passed = r.phase == 1
			},
			"prepared": func(t *rapid.T) {
				r := pick(t, 2)
				if rapid.IntRange(0, 5).Draw(t, "layers fail") == 0 {
					m.end(t, r)
					return
				}
				r.phase = 3
				m.step(t, protocol.RunTurnRequested{Run: r.hash, Turn: protocol.RunTurnStarted, Project: "demo", At: r.at})
			},
			"started written": func(t *rapid.T) {
				r := pick(t, 4)
				r.phase = 5
				m.startedOrder = append(m.startedOrder, r.i)
				m.step(t, protocol.RunTurnDone{Run: r.hash, Turn: protocol.RunTurnStarted})
			},
			"stop waiting": func(t *rapid.T) {
				r := pick(t, 1)
				m.end(t, r)
			},
			"end": func(t *rapid.T) {
				r := pick(t, 5)
				m.end(t, r)
			},
			"timer": func(t *rapid.T) {
				if len(m.timers) == 0 {
					t.Skip("no timer")
				}
				i := rapid.IntRange(0, len(m.timers)-1).Draw(t, "timer")
				tm := m.timers[i]
				m.timers = slices.Delete(m.timers, i, i+1)
				r := m.byHash(t, tm.Run)
				if r.phase == 3 {
					m.late[r.i] = true
				}
				m.step(t, protocol.RunTimerFired{Purpose: tm.Purpose, Seq: tm.Seq})
			},
			"": m.check,
		})
		// Every run done, in turn: none is left waiting for a turn.
		for progress := true; progress; {
			progress = false
			for _, r := range m.runs {
				switch {
				case r.stopped || r.phase == 6:
				case r.phase == 2:
					r.phase = 3
					m.step(t, protocol.RunTurnRequested{Run: r.hash, Turn: protocol.RunTurnStarted, Project: "demo", At: r.at})
					progress = true
				case r.phase == 4:
					r.phase = 5
					m.startedOrder = append(m.startedOrder, r.i)
					m.step(t, protocol.RunTurnDone{Run: r.hash, Turn: protocol.RunTurnStarted})
					progress = true
				case r.phase == 5:
					m.end(t, r)
					progress = true
				}
			}
		}
		for _, r := range m.runs {
			if !r.stopped && r.phase != 6 {
				t.Fatalf("run %d left in phase %d", r.i, r.phase)
			}
		}
		// Started in the server's order, but for a run a timer let go.
		for k := 1; k < len(m.startedOrder); k++ {
			a, b := m.startedOrder[k-1], m.startedOrder[k]
			if a > b && m.runs[b].inOrder && !m.late[a] && m.runs[a].user == "" && m.runs[b].user == "" {
				t.Fatalf("run %d started before run %d, which is before it: %v", a, b, m.startedOrder)
			}
		}
	})
}

// end ends a run: ended written (its started settled) and out of care,
// its slot given back, as a run core does.
func (m *schedModel) end(t *rapid.T, r *schedRun) {
	if r.phase < 5 {
		r.stopped = true
	}
	if r.phase == 1 {
		// It stops waiting for its slot at once.
		m.step(t, protocol.RunTurnDone{Run: r.hash, Turn: protocol.RunTurnSlot})
	}
	r.phase = 6
	m.step(t, protocol.RunTurnDone{Run: r.hash, Turn: protocol.RunTurnStarted})
	if r.user != "" {
		r.held = false
		m.step(t, protocol.RunTurnDone{Run: r.hash, Turn: protocol.RunTurnSlot})
	}
}
