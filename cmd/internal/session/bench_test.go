package session_test

import (
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// readRe finds how a session read each post it was woken for, and how long
// reading took (a fetch, or a pull and a read of the clone).
var readRe = regexp.MustCompile(`event=read post=[0-9a-f]+ how=(\w+) took=(\S+)`)

// BenchmarkRoundTrip measures a post's round trip through a session: from
// the wake line written, as the hook writes it, to the agent's reply on the
// node's record, with the stand-in runner answering at once. The post itself
// is written before the clock runs. Both ways a session reads the post run in
// the same benchmark: fetched alone over sync (the session's way), and the
// whole clone pulled first (OCX_SESSION_READ=pull, the way before it). It
// reports the time spent reading and its share of the round trip. The
// node/ variants run in bwrap without the network, reaching the server
// through the node's sync socket as a session under the daemon does (D49).
func BenchmarkRoundTrip(b *testing.B) {
	for _, how := range []string{"fetch", "pull"} {
		for _, sandboxed := range []bool{false, true} {
			name := how + "/unsandboxed"
			if sandboxed {
				name = how + "/bwrap"
			}
			b.Run(name, func(b *testing.B) { benchRoundTrip(b, how, sandboxed, false) })
		}
		b.Run(how+"/node", func(b *testing.B) { benchRoundTrip(b, how, true, true) })
	}
}

func benchRoundTrip(b *testing.B, how string, sandboxed, throughNode bool) {
	n := newNode(b)
	w := n.workspace("bench-1")
	if throughNode {
		w.throughNode()
	}
	r := w.record(messages.ListenThread, "Answer quickly.", llm(messages.Stays), "")
	argv := []string{filepath.Join(release, "workspace"), "serve", w.key.String(), "--root", n.agents, "--launch", r.launch}
	p := w.spawn(argv, sandboxed, []string{"OCX_SESSION_READ=" + how})
	w.waitLog("event=ready", 1)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := w.post(n.admin, r, "ping")
		b.StartTimer()
		start := time.Now()
		w.wake(h)
		for len(w.replies(r, h)) == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		total += time.Since(start)
	}
	b.StopTimer()
	var reading time.Duration
	reads := 0
	for _, m := range readRe.FindAllStringSubmatch(w.logText(), -1) {
		if m[1] != how {
			b.Fatalf("a post read by %s in the %s benchmark", m[1], how)
		}
		d, err := time.ParseDuration(m[2])
		if err != nil {
			b.Fatal(err)
		}
		reading += d
		reads++
	}
	if reads != b.N {
		b.Fatalf("the log has %d reads for %d posts", reads, b.N)
	}
	b.ReportMetric(float64(reading.Nanoseconds())/float64(b.N), "read-ns/op")
	b.ReportMetric(float64(reading)/float64(total), "read-share")
	// TERM to bwrap would end bwrap alone (docs/host.md); a stop request
	// reaches the session in or out of the sandbox.
	w.wake(w.post(n.admin, r, "OCX stop"))
	if code := p.wait(); code != 0 {
		b.Fatalf("exit %d", code)
	}
}
