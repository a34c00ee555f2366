package session_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// pullRe finds the time a session spent pulling for each post it read.
var pullRe = regexp.MustCompile(`event=read post=[0-9a-f]+ pull=(\S+) read=(\S+)`)

// BenchmarkRoundTrip measures a post's round trip through a session: from
// the wake line written, as the hook writes it, to the agent's reply on the
// node's record, with the stand-in runner answering at once. The post itself
// is written before the clock runs. It reports the share of the round trip
// the session spent pulling its clone.
func BenchmarkRoundTrip(b *testing.B) {
	for _, sandboxed := range []bool{false, true} {
		name := "unsandboxed"
		if sandboxed {
			name = "bwrap"
		}
		b.Run(name, func(b *testing.B) { benchRoundTrip(b, sandboxed) })
	}
}

func benchRoundTrip(b *testing.B, sandboxed bool) {
	n := newNode(b)
	w := n.workspace("bench-1")
	r := w.record(messages.ListenThread, "Answer quickly.", llm(messages.Stays), "")
	p := w.serve(r.launch, sandboxed)
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
	var pulling time.Duration
	reads := 0
	for _, m := range pullRe.FindAllStringSubmatch(w.logText(), -1) {
		d, err := time.ParseDuration(m[1])
		if err != nil {
			b.Fatal(err)
		}
		pulling += d
		reads++
	}
	if reads != b.N {
		b.Fatalf("the log has %d reads for %d posts", reads, b.N)
	}
	b.ReportMetric(float64(pulling.Nanoseconds())/float64(b.N), "pull-ns/op")
	b.ReportMetric(float64(pulling)/float64(total), "pull-share")
	// TERM to bwrap would end bwrap alone (docs/host.md); a stop request
	// reaches the session in or out of the sandbox.
	w.wake(w.post(n.admin, r, "OCX stop"))
	if code := p.wait(); code != 0 {
		b.Fatalf("exit %d", code)
	}
}
