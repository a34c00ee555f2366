package answers

import (
	"context"
	"strconv"
	"time"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/metrics"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

// viewBound bounds the reads of one scrape's gauges.
const viewBound = 30 * time.Second

// MetricsView is the node as the metrics' gauges read it at a scrape:
// the sessions and their use from the status the socket keeps (derived
// again only when something it is derived from changed, D70), the runs
// from each project's run log, and the process table's index. A nil
// socket (not served) gives an empty view.
func (s *Socket) MetricsView() metrics.View {
	v := metrics.View{Sessions: map[string]int{}, Runs: map[string]int{}, ProcessIndex: -1}
	if s == nil {
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), viewBound)
	defer cancel()
	if _, st := s.status.current(ctx); st != nil {
		for _, ss := range st.Sessions {
			v.Sessions[string(ss.State)]++
			v.Usage = append(v.Usage, s.sessionUse(ctx, ss))
		}
	}
	for _, p := range s.status.cfg.ProjectNames() {
		x, err := s.status.repos.Index(p)
		if err != nil {
			continue
		}
		msgs, err := x.Runs(ctx)
		if err != nil {
			continue
		}
		for _, r := range record.RunStates(ctx, x.Repo, record.DecodedRuns(msgs)) {
			v.Runs[r.State]++
		}
	}
	if n, ok := s.status.procs.Indexed(); ok {
		v.ProcessIndex = n
	}
	return v
}

// sessionUse is a session's use as its status says it (none yet: zero),
// with the model its definition names.
func (s *Socket) sessionUse(ctx context.Context, ss messages.SessionStatus) metrics.SessionUse {
	k := messages.WorkspaceKey{Login: ss.Login, Project: ss.Project}
	use := metrics.SessionUse{Session: k.String(), Model: s.modelOf(ctx, k, ss.Launch)}
	u := ss.Usage
	if u == nil {
		return use
	}
	use.Turns, use.Wall = u.Turns, time.Duration(u.WallMS)*time.Millisecond
	if u.Model != nil {
		use.Input, use.Output = u.Model.Input, u.Model.Output
	}
	if u.Runner != nil && u.Runner.Cost != "" {
		use.CostUSD, _ = strconv.ParseFloat(string(u.Runner.Cost), 64)
	}
	return use
}

// modelOf is the model the session definition of launch names, "" when
// it names none or cannot be read.
func (s *Socket) modelOf(ctx context.Context, k messages.WorkspaceKey, launch string) string {
	if launch == "" {
		return ""
	}
	x, err := s.status.repos.Index(k.Project)
	if err != nil {
		return ""
	}
	e, ok, err := x.Idx.Launch(ctx, k, launch)
	if err != nil || !ok {
		return ""
	}
	n, ok := e.Note.(*messages.LaunchNote)
	if !ok {
		return ""
	}
	d, ok := x.Idx.Definition(n.Session)
	if !ok {
		return ""
	}
	if def, ok := d.Note.(*messages.SessionDefinition); ok {
		return def.Model
	}
	return ""
}

// metricsText answers a metrics ask: every metric in Prometheus' text
// format, after the reply's line.
func (s *Socket) metricsText() *wire.Reply {
	if s.metrics == nil {
		return nodesock.Refusal("this daemon keeps no metrics")
	}
	b, err := s.metrics.Text()
	if err != nil {
		return nodesock.Refusal("the metrics: %v", err)
	}
	r := wire.NewReply()
	r.Metrics = len(b)
	if err := withBody(r, b); err != nil {
		return nodesock.Refusal("%v", err)
	}
	return r
}
