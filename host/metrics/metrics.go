// Package metrics keeps the daemon's counters and histograms (issue 44
// item 4) and writes them in Prometheus' text format, with the gauges a
// view of the node gives at each scrape, for a monitoring system that
// scrapes the console's metrics page or asks the daemon's socket. Names
// and labels follow Prometheus' conventions (`ocx_…_total` for counters,
// `_seconds` for times); no label takes an unbounded value: a session is
// named by its workspace (LOGIN/PROJECT), a project by node.json's name,
// a reason or an outcome by a word from a closed list. docs/daemon.md
// lists every metric.
package metrics

import (
	"bytes"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// refusalReasons are the kinds of a launch's refusal, each counted from
// zero.
var refusalReasons = []string{protocol.RefusedBusy, protocol.RefusedRecord, protocol.RefusedHost}

// budgetLimits are the limits a session's budget ends it past, and
// runOutcomes table 12's outcomes, each counted from zero.
var (
	budgetLimits = []string{messages.LimitWall, messages.LimitMemory, messages.LimitProcesses, messages.LimitTokens}
	runOutcomes  = []runmsg.RunOutcome{runmsg.RunRefused, runmsg.RunStopped, runmsg.RunExited, runmsg.RunBudget, runmsg.RunLost}
)

// sessionOutcomes are the ways a session's process ends (an end note's
// status), each counted from zero.
var sessionOutcomes = []string{"exited", "signaled", "sandbox-failed", "unknown"}

// View is what the gauges read at a scrape: the node as the daemon knows
// it then. Each map is by its label's value.
type View struct {
	// Sessions counts the sessions by state (working, idle).
	Sessions map[string]int
	// Runs counts the runs of the node's projects by table 10's state
	// (none, waiting, started, ended).
	Runs map[string]int
	// ProcessIndex counts the processes the daemon's process table keeps
	// (those that name a workspace); -1 when it follows no events.
	ProcessIndex int
	// Usage is each session's use of the node, by its workspace.
	Usage []SessionUse
}

// SessionUse is one session's use of the node, as its status says it.
type SessionUse struct {
	Session string // LOGIN/PROJECT
	Model   string // its definition's model; "" when it names none
	// Input and Output are the node's count of the model's tokens.
	Input, Output uint64
	// Turns and Wall sum its turns as it measured them.
	Turns uint64
	Wall  time.Duration
	// CostUSD is what its runner reported it cost; 0 when it reported none.
	CostUSD float64
}

// Set is the daemon's metrics. A nil Set counts nothing, so a part that
// is given none need not ask.
type Set struct {
	reg        *prometheus.Registry
	launches   prometheus.Counter
	refusals   *prometheus.CounterVec
	ends       *prometheus.CounterVec
	budgetEnds *prometheus.CounterVec
	runEnds    *prometheus.CounterVec
	hook       prometheus.Histogram
	status     prometheus.Histogram
	pulls      *prometheus.CounterVec
	pullTime   *prometheus.HistogramVec
	// view gives the gauges at a scrape; nil until one is given.
	view atomic.Pointer[func() View]
}

// New is a Set whose gauges read view at each scrape; a nil view (or
// none given yet: ViewFrom) reads as an empty one.
func New(view func() View) *Set {
	s := &Set{reg: prometheus.NewRegistry()}
	s.ViewFrom(view)
	s.launches = prometheus.NewCounter(prometheus.CounterOpts{Name: "ocx_launches_total",
		Help: "Sessions the daemon started for launch notes (a CI launch among them)."})
	s.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ocx_launch_refusals_total",
		Help: "Launch notes the daemon refused with a note, by reason: busy (the workspace is held), record (the record refuses it), host (the host could not say or start it)."},
		[]string{"reason"})
	s.ends = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ocx_session_ends_total",
		Help: "Session processes that ended, by outcome as their end note says it."},
		[]string{"outcome"})
	s.budgetEnds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ocx_budget_ends_total",
		Help: "Sessions ended because a budget was spent, by the limit (wall, tokens, memory, processes, disk)."},
		[]string{"limit"})
	s.runEnds = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ocx_run_ends_total",
		Help: "Runs this node ended (its ended written), by table 12's outcome."},
		[]string{"outcome"})
	s.hook = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ocx_hook_duration_seconds",
		Help:    "The hook's work done in the daemon, from the ask to the answer.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, 1, 5}})
	s.status = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ocx_status_duration_seconds",
		Help:    "A status answered on the daemon's socket (kept or derived), from the ask to the answer.",
		Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}})
	s.pulls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ocx_pulls_total",
		Help: "Pulls of a project served from another host, by project and outcome (ok, failed)."},
		[]string{"project", "outcome"})
	s.pullTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ocx_pull_duration_seconds",
		Help:    "A pull of a project served from another host: the sync and the server's receipts.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}},
		[]string{"project"})
	for _, r := range refusalReasons {
		s.refusals.WithLabelValues(r)
	}
	for _, o := range sessionOutcomes {
		s.ends.WithLabelValues(o)
	}
	for _, l := range budgetLimits {
		s.budgetEnds.WithLabelValues(l)
	}
	for _, o := range runOutcomes {
		s.runEnds.WithLabelValues(string(o))
	}
	s.reg.MustRegister(s.launches, s.refusals, s.ends, s.budgetEnds, s.runEnds, s.hook, s.status, s.pulls, s.pullTime, viewCollector{s})
	return s
}

// ViewFrom has the gauges read view from the next scrape on: the daemon's
// socket gives it once it is served.
func (s *Set) ViewFrom(view func() View) {
	if s != nil && view != nil {
		s.view.Store(&view)
	}
}

// Observe counts what a host effect of the actor tree came to (its
// Deps.Observe): a session started, a refusal, a session's end (and a
// budget's), a run's ended, each once it is done (written, spawned), so
// that a retry is not counted twice.
func (s *Set) Observe(e protocol.DaemonEffect, result protocol.DaemonMessage) {
	if s == nil {
		return
	}
	switch e := e.(type) {
	case protocol.SpawnSession:
		if r, ok := result.(protocol.SessionSpawned); ok && r.Err == nil {
			s.launches.Inc()
		}
	case protocol.WriteRefusal:
		if r, ok := result.(protocol.RefusalWritten); ok && r.Err == nil {
			s.refusals.WithLabelValues(e.Why).Inc()
		}
	case protocol.WriteEnd:
		if r, ok := result.(protocol.EndWritten); ok && r.Err == nil {
			s.ends.WithLabelValues(string(e.End.Status)).Inc()
			if e.End.Budget != "" {
				s.budgetEnds.WithLabelValues(e.End.Budget).Inc()
			}
		}
	case protocol.RunWriteEnded:
		if r, ok := result.(protocol.RunEndedWritten); ok && r.Err == nil {
			s.runEnds.WithLabelValues(string(e.Outcome)).Inc()
		}
	}
}

// PullsOf has the pulls of projects, served from another host, counted
// from zero: a node that pulls them says so before its first pull.
func (s *Set) PullsOf(projects []string) {
	if s == nil {
		return
	}
	for _, p := range projects {
		s.pulls.WithLabelValues(p, "ok")
		s.pulls.WithLabelValues(p, "failed")
	}
}

// HookTook observes one hook's work done in the daemon.
func (s *Set) HookTook(d time.Duration) {
	if s != nil {
		s.hook.Observe(d.Seconds())
	}
}

// StatusTook observes one status answered on the socket.
func (s *Set) StatusTook(d time.Duration) {
	if s != nil {
		s.status.Observe(d.Seconds())
	}
}

// Pulled observes one pull of project: how long it took and whether it
// failed.
func (s *Set) Pulled(project string, d time.Duration, failed bool) {
	if s == nil {
		return
	}
	outcome := "ok"
	if failed {
		outcome = "failed"
	}
	s.pulls.WithLabelValues(project, outcome).Inc()
	s.pullTime.WithLabelValues(project).Observe(d.Seconds())
}

// Text is every metric in Prometheus' text format (version 0.0.4), in
// the order of their names.
func (s *Set) Text() ([]byte, error) {
	mfs, err := s.reg.Gather()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// ContentType is the text format's media type, as a scrape expects it.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// viewCollector reads the gauges from the Set's view at each scrape.
type viewCollector struct{ s *Set }

var (
	sessionsDesc = prometheus.NewDesc("ocx_sessions", "Sessions running, by state (working, idle).", []string{"state"}, nil)
	runsDesc     = prometheus.NewDesc("ocx_runs", "Runs on the record of the node's projects, by table 10's state (none, waiting, started, ended).", []string{"state"}, nil)
	indexDesc    = prometheus.NewDesc("ocx_process_index_entries", "Processes the daemon's process table keeps: those that name a workspace.", nil, nil)
	tokensDesc   = prometheus.NewDesc("ocx_tokens_total", "Tokens of a session's model, as the node's proxy counted them, by session, model and direction (input, output).", []string{"session", "model", "direction"}, nil)
	turnsDesc    = prometheus.NewDesc("ocx_turn_duration_seconds", "A session's turns as it measured them: their count and summed wall time.", []string{"session"}, nil)
	costDesc     = prometheus.NewDesc("ocx_cost_usd_total", "What a session's runner reported its turns cost, in US dollars.", []string{"session", "model"}, nil)
)

// sessionStates are the states counted from zero.
var sessionStates = []string{"working", "idle"}

// runStates are table 10's states, counted from zero.
var runStates = []string{"none", "waiting", "started", "ended"}

func (c viewCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sessionsDesc, runsDesc, indexDesc, tokensDesc, turnsDesc, costDesc} {
		ch <- d
	}
}

func (c viewCollector) Collect(ch chan<- prometheus.Metric) {
	v := View{ProcessIndex: -1}
	if f := c.s.view.Load(); f != nil {
		v = (*f)()
	}
	for _, st := range sessionStates {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(v.Sessions[st]), st)
	}
	for _, st := range runStates {
		ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(v.Runs[st]), st)
	}
	if v.ProcessIndex >= 0 {
		ch <- prometheus.MustNewConstMetric(indexDesc, prometheus.GaugeValue, float64(v.ProcessIndex))
	}
	use := append([]SessionUse(nil), v.Usage...)
	sort.Slice(use, func(i, j int) bool { return use[i].Session < use[j].Session })
	for i, u := range use {
		if i > 0 && use[i-1].Session == u.Session {
			continue // one session a workspace: a second is a look-alike's
		}
		ch <- prometheus.MustNewConstMetric(tokensDesc, prometheus.CounterValue, float64(u.Input), u.Session, u.Model, "input")
		ch <- prometheus.MustNewConstMetric(tokensDesc, prometheus.CounterValue, float64(u.Output), u.Session, u.Model, "output")
		ch <- prometheus.MustNewConstSummary(turnsDesc, u.Turns, u.Wall.Seconds(), nil, u.Session)
		ch <- prometheus.MustNewConstMetric(costDesc, prometheus.CounterValue, u.CostUSD, u.Session, u.Model)
	}
}
