package metrics

import (
	"bytes"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// parse reads a Set's text as a scraper does, with Prometheus' own parser.
func parse(t *testing.T, s *Set) map[string]*dto.MetricFamily {
	t.Helper()
	b, err := s.Text()
	if err != nil {
		t.Fatal(err)
	}
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the text does not parse: %v\n%s", err, b)
	}
	return mfs
}

// value is the metric of family name whose labels are labels (name=value
// pairs), and whether there is one.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		match := len(got) == len(labels)/2
		for i := 0; match && i+1 < len(labels); i += 2 {
			match = got[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestObserveCountsWhatIsDone(t *testing.T) {
	s := New(nil)
	l := protocol.LaunchSpec{Hash: "aa"}
	s.Observe(protocol.SpawnSession{Launch: l}, protocol.SessionSpawned{Launch: "aa"})
	s.Observe(protocol.SpawnSession{Launch: l}, protocol.SessionSpawned{Launch: "aa", Err: errors.New("no bwrap")})
	s.Observe(protocol.WriteRefusal{Launch: l, Why: protocol.RefusedBusy}, protocol.RefusalWritten{})
	s.Observe(protocol.WriteRefusal{Launch: l, Why: protocol.RefusedRecord}, protocol.RefusalWritten{Err: errors.New("disk full")})
	s.Observe(protocol.WriteEnd{End: messages.EndNote{Status: messages.EndSignaled, Budget: "wall"}}, protocol.EndWritten{})
	s.Observe(protocol.WriteEnd{End: messages.EndNote{Status: messages.EndExited}}, protocol.EndWritten{})
	s.Observe(protocol.RunWriteEnded{Outcome: runmsg.RunOutcome("exited")}, protocol.RunEndedWritten{})
	s.Observe(protocol.RunWriteEnded{Outcome: runmsg.RunOutcome("lost")}, protocol.RunEndedWritten{Err: errors.New("no")})
	s.HookTook(3 * time.Millisecond)
	s.StatusTook(time.Millisecond)
	s.Pulled("demo", 40*time.Millisecond, false)
	s.Pulled("demo", time.Second, true)

	mfs := parse(t, s)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ocx_launches_total", nil, 1},
		{"ocx_launch_refusals_total", []string{"reason", "busy"}, 1},
		{"ocx_launch_refusals_total", []string{"reason", "record"}, 0}, // its write failed
		{"ocx_launch_refusals_total", []string{"reason", "host"}, 0},
		{"ocx_session_ends_total", []string{"outcome", "signaled"}, 1},
		{"ocx_session_ends_total", []string{"outcome", "exited"}, 1},
		{"ocx_session_ends_total", []string{"outcome", "unknown"}, 0},
		{"ocx_budget_ends_total", []string{"limit", "wall"}, 1},
		{"ocx_run_ends_total", []string{"outcome", "exited"}, 1},
		{"ocx_hook_duration_seconds", nil, 1},
		{"ocx_status_duration_seconds", nil, 1},
		{"ocx_pulls_total", []string{"project", "demo", "outcome", "ok"}, 1},
		{"ocx_pulls_total", []string{"project", "demo", "outcome", "failed"}, 1},
		{"ocx_pull_duration_seconds", []string{"project", "demo"}, 2},
	} {
		got, ok := value(mfs, c.name, c.labels...)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if n, ok := value(mfs, "ocx_run_ends_total", "outcome", "lost"); !ok || n != 0 {
		t.Errorf("a run's ended that was not written: %v (found %v), want 0", n, ok)
	}
	if n, ok := value(mfs, "ocx_budget_ends_total", "limit", "tokens"); !ok || n != 0 {
		t.Errorf("the tokens' budget ends: %v (found %v), want 0 from the start", n, ok)
	}
}

func TestViewGauges(t *testing.T) {
	calls := 0
	s := New(func() View {
		calls++
		return View{
			Sessions:     map[string]int{"working": 2},
			Runs:         map[string]int{"started": 1, "ended": 4},
			ProcessIndex: 7,
			Usage: []SessionUse{
				{Session: "bob/demo", Model: "opus", Input: 100, Output: 30, Turns: 3, Wall: 1500 * time.Millisecond, CostUSD: 0.25},
				{Session: "alice/demo", Input: 5, Output: 1, Turns: 1, Wall: time.Second},
			},
		}
	})
	mfs := parse(t, s)
	if calls != 1 {
		t.Errorf("the view was read %d times for one scrape", calls)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ocx_sessions", []string{"state", "working"}, 2},
		{"ocx_sessions", []string{"state", "idle"}, 0},
		{"ocx_runs", []string{"state", "started"}, 1},
		{"ocx_runs", []string{"state", "ended"}, 4},
		{"ocx_runs", []string{"state", "waiting"}, 0},
		{"ocx_process_index_entries", nil, 7},
		{"ocx_tokens_total", []string{"session", "bob/demo", "model", "opus", "direction", "input"}, 100},
		{"ocx_tokens_total", []string{"session", "bob/demo", "model", "opus", "direction", "output"}, 30},
		{"ocx_tokens_total", []string{"session", "alice/demo", "model", "", "direction", "input"}, 5},
		{"ocx_turn_duration_seconds", []string{"session", "bob/demo"}, 3},
		{"ocx_cost_usd_total", []string{"session", "bob/demo", "model", "opus"}, 0.25},
	} {
		got, ok := value(mfs, c.name, c.labels...)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if n, ok := value(mfs, "ocx_cost_usd_total", "session", "alice/demo", "model", ""); !ok || n != 0 {
		t.Errorf("a session whose runner reported no cost: %v (found %v), want 0", n, ok)
	}
	sum := mfs["ocx_turn_duration_seconds"].Metric[1].Summary.GetSampleSum() // bob/demo, after alice
	if sum != 1.5 {
		t.Errorf("bob/demo's turns sum %v s, want 1.5", sum)
	}
}

func TestPullsOfCountFromZero(t *testing.T) {
	s := New(nil)
	mfs := parse(t, s)
	if mfs["ocx_pulls_total"] != nil {
		t.Error("a node that pulls nothing says pulls")
	}
	if _, ok := mfs["ocx_process_index_entries"]; ok {
		t.Error("no view given, yet a process index is said")
	}
	s.PullsOf([]string{"demo"})
	mfs = parse(t, s)
	if n, ok := value(mfs, "ocx_pulls_total", "project", "demo", "outcome", "failed"); !ok || n != 0 {
		t.Errorf("demo's failed pulls: %v (found %v), want 0", n, ok)
	}
}

func TestNilSetCountsNothing(t *testing.T) {
	var s *Set
	s.Observe(protocol.SpawnSession{}, protocol.SessionSpawned{})
	s.HookTook(time.Second)
	s.Pulled("demo", time.Second, false)
}
