package itest

import (
	"bytes"
	"io"
	"mime"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/ocx-go/ocx/host"
)

// parseMetrics reads metrics text with Prometheus' own parser.
func parseMetrics(t testing.TB, what string, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s does not parse as Prometheus' text: %v\n%s", what, err, b)
	}
	return mfs
}

// metricSum sums the samples (a counter's or gauge's value, a
// histogram's or summary's count) of family name whose labels hold the
// name=value pairs given.
func metricSum(mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	sum := 0.0
	mf := mfs[name]
	if mf == nil {
		return -1
	}
	for _, m := range mf.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && got[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		}
	}
	return sum
}

// Where docs/daemon.md's table says a metric is said: on every node, on
// a node on another host only, or for each running session.
const (
	everyNode = iota
	otherHostOnly
	perSession
)

// docMetrics are the metrics docs/daemon.md's table names, each with
// where it is said.
func docMetrics(t testing.TB) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "daemon.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	row := regexp.MustCompile("^\\| `(ocx_[a-z_]+)` \\|")
	for _, l := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(l); m != nil {
			switch {
			case strings.Contains(l, "a node on another host only"):
				out[m[1]] = otherHostOnly
			case strings.Contains(l, "each running session's"):
				out[m[1]] = perSession
			default:
				out[m[1]] = everyNode
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("docs/daemon.md names %d metrics; its table was not read", len(out))
	}
	return out
}

// TestMetricsCountWhatHappens (issue 44 item 4): the console's /metrics
// page, scraped with a reader's login, and `ocx metrics` give the real
// daemon's metrics in Prometheus' text format; every metric docs/daemon.md
// names is there, and the counters move as the test's launch, refusal,
// post and stop happen: one launch, one refusal (busy), one end, the
// hook's and the status's answers; the sessions' gauge says the session
// while it runs.
func TestMetricsCountWhatHappens(t *testing.T) {
	needs(t, "ocxd", "workspace", host.ConsoleProgram)
	n := consoleNode(t)
	n.must("", "hook", "install")
	admin := n.srv.AdminLogin
	v := n.viewer(person)
	if code, _ := v.get("sessions"); code != 200 {
		t.Fatal(code)
	}
	n.waitFor("the page to have started the daemon", func() bool { return n.daemonPID() != 0 })
	n.waitLogLine("the daemon's socket served", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		resp, err := v.c.Get(v.base + "ext/console/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Fossil cuts a type's parameters; a scraper reads the type in
		// any case, and text/plain as the text format, version 0.0.4.
		mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if resp.StatusCode != 200 || err != nil || mt != "text/plain" || resp.Header.Get("X-Ocx-Served-By") != "daemon" {
			t.Fatalf("/metrics: %d %q served by %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Ocx-Served-By"), b)
		}
		return parseMetrics(t, "/metrics", b)
	}
	before := scrape()
	docs := docMetrics(t)
	for name, where := range docs {
		if _, ok := before[name]; ok != (where == everyNode) {
			t.Errorf("%s: said %v on the server's node before any session ran; docs/daemon.md says it is said %v", name, ok, []string{"on every node", "on a node on another host only", "for each running session"}[where])
		}
	}
	for name := range before {
		if _, ok := docs[name]; !ok {
			t.Errorf("%s is not in docs/daemon.md's table", name)
		}
	}

	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	launch := n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	second := n.launchAgain(record)
	n.waitFor("the refusal note", func() bool { return len(n.refusalsOf(record, second)) > 0 })
	hello := n.result(person, "post", "--to", record, "--text", "hello")
	if r := n.awaitReply(record, hello); !strings.Contains(r.Text, "echo: hello") {
		t.Errorf("the session's answer: %q", r.Text)
	}
	// `ocx metrics` asks the socket: the same families as the page.
	cli := parseMetrics(t, "ocx metrics", []byte(n.must("", "metrics").stdout))
	if got := metricSum(cli, "ocx_sessions"); got != 1 {
		t.Errorf("ocx_sessions while one runs: %v, want 1", got)
	}
	if got := metricSum(cli, "ocx_process_index_entries"); got < 1 {
		t.Errorf("ocx_process_index_entries while a session runs: %v, want 1 or more", got)
	}
	for name, where := range docs {
		if _, ok := cli[name]; ok != (where != otherHostOnly) {
			t.Errorf("ocx metrics while a session runs: %s said %v", name, ok)
		}
	}
	if got := metricSum(cli, "ocx_tokens_total", "session", key(agent), "model", "", "direction", "input"); got != 0 {
		t.Errorf("a mechanical session's input tokens: %v, want 0", got)
	}

	n.must("", "session", "stop", key(agent))
	n.waitFor("the end note", func() bool { return len(n.endsOf(record, launch)) > 0 })
	var after map[string]*dto.MetricFamily
	n.waitFor("the end counted", func() bool {
		after = scrape()
		return metricSum(after, "ocx_session_ends_total")-metricSum(before, "ocx_session_ends_total") >= 1
	})
	for _, c := range []struct {
		name   string
		labels []string
		least  float64
		most   float64
	}{
		{"ocx_launches_total", nil, 1, 1},
		{"ocx_launch_refusals_total", []string{"reason", "busy"}, 1, 1},
		{"ocx_launch_refusals_total", []string{"reason", "record"}, 0, 0},
		{"ocx_session_ends_total", nil, 1, 1},
		{"ocx_budget_ends_total", nil, 0, 0},
		{"ocx_hook_duration_seconds", nil, 1, 1e9},
		{"ocx_status_duration_seconds", nil, 1, 1e9},
		{"ocx_sessions", nil, -1, 0}, // none runs now: it went down by one
	} {
		d := metricSum(after, c.name, c.labels...) - metricSum(before, c.name, c.labels...)
		if d < c.least || d > c.most {
			t.Errorf("%s%v moved by %v; want %v to %v", c.name, c.labels, d, c.least, c.most)
		}
	}
	if got := metricSum(after, "ocx_sessions"); got != 0 {
		t.Errorf("ocx_sessions once stopped: %v, want 0", got)
	}
}

// TestMetricsOfPulls: a node on another host counts each pull of its
// project, ok or failed, with how long it took; the server's node counts
// none.
func TestMetricsOfPulls(t *testing.T) {
	needs(t, "ocxd", host.ConsoleProgram)
	a := serverNode(t)
	startDaemon(t, a, program("ocxd"))
	b := newRemoteNode(t, a, "lab-m", remoteOpts{host: true, every: "1h"})
	startDaemon(t, b, program("ocxd"))
	b.waitLogLine("the first pull", func(l logLine) bool {
		return strings.HasPrefix(l.Msg, "the clone of a project served from another host is fresh")
	})
	got := parseMetrics(t, "ocx metrics", []byte(b.must("", "metrics").stdout))
	if ok := metricSum(got, "ocx_pulls_total", "project", "demo", "outcome", "ok"); ok < 1 {
		t.Errorf("the remote node's pulls of demo: %v ok, want 1 or more", ok)
	}
	if n := metricSum(got, "ocx_pull_duration_seconds", "project", "demo"); n < 1 {
		t.Errorf("the remote node's pulls timed: %v, want 1 or more", n)
	}
	server := parseMetrics(t, "ocx metrics", []byte(a.must("", "metrics").stdout))
	if server["ocx_pulls_total"] != nil {
		t.Error("the server's node says pulls")
	}
}
