package itest

import (
	"bufio"
	"encoding/json"
	"net"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages/wire"
)

// BenchmarkAskTaken measures what nodesock.AnswerWait bounds (D75): the
// time from a caller's connection to the daemon's socket to the first
// byte of its reply, which the daemon writes once it has read the ask,
// before its work, with the real daemon. One caller asks at a time, or
// eight at once, half for the status and half for a hook's work (an empty
// list, on the node's repository); "loaded" adds two busy loops, one per
// core of the machine the figures are taken on. It reports the p50, p99
// and the worst, beside the bound.
func BenchmarkAskTaken(b *testing.B) {
	needs(b, "ocx", "ocxd")
	for _, c := range []struct {
		name          string
		callers, hogs int
	}{{"one-caller", 1, 0}, {"eight-callers", 8, 0}, {"eight-callers-loaded", 8, 2}} {
		b.Run(c.name, func(b *testing.B) {
			hogs, callers := c.hogs, c.callers
			n := newNode(b)
			startDaemon(b, n, program("ocxd"), "--grace", "1s")
			n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
			layout, err := host.NewLayout(n.agents)
			if err != nil {
				b.Fatal(err)
			}
			for range hogs {
				hog := exec.Command("/bin/sh", "-c", "while :; do :; done")
				if err := hog.Start(); err != nil {
					b.Fatal(err)
				}
				defer func() { syscall.Kill(hog.Process.Pid, syscall.SIGKILL); hog.Wait() }()
			}
			status, _ := json.Marshal(wire.NewAsk(wire.AskStatus))
			hk := wire.NewAsk(wire.AskHook)
			hk.Repo = n.srv.Repo
			hook, _ := json.Marshal(hk)
			var mu sync.Mutex
			var taken []time.Duration
			b.ResetTimer()
			var wg sync.WaitGroup
			for c := range callers {
				ask := append(status, '\n')
				if c%2 == 1 {
					ask = append(hook, '\n')
				}
				wg.Go(func() {
					for i := c; i < b.N; i += callers {
						t0 := time.Now()
						conn, err := net.Dial("unix", layout.Socket())
						if err != nil {
							b.Error(err)
							return
						}
						conn.SetDeadline(time.Now().Add(time.Minute))
						br := bufio.NewReader(conn)
						_, err = conn.Write(ask)
						if err == nil {
							_, err = br.Peek(1)
						}
						d := time.Since(t0)
						if err == nil {
							_, err = wire.ReadLine(br, wire.MaxReplyLen)
						}
						conn.Close()
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						taken = append(taken, d)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(taken)
			b.ReportMetric(float64(percentile(taken, 50).Microseconds())/1000, "taken-p50-ms")
			b.ReportMetric(float64(percentile(taken, 99).Microseconds())/1000, "taken-p99-ms")
			b.ReportMetric(float64(taken[len(taken)-1].Microseconds())/1000, "taken-max-ms")
			b.ReportMetric(float64(nodesock.AnswerWait.Milliseconds()), "bound-ms")
		})
	}
}
