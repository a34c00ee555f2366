package itest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

// followLoop asks the session's log of login from byte from on, as the
// session page's script does, until stop is closed; each answer's end is
// the next ask's from. It counts the answers that held text.
func followLoop(c *http.Client, url string, stop <-chan struct{}, answers *int64, mu *sync.Mutex) {
	from := int64(0)
	for {
		select {
		case <-stop:
			return
		default:
		}
		resp, err := c.Get(fmt.Sprintf("%s?from=%d", url, from))
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var ch struct {
			To   int64  `json:"to"`
			Text string `json:"text"`
		}
		err = json.NewDecoder(resp.Body).Decode(&ch)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if ch.Text != "" {
			mu.Lock()
			*answers++
			mu.Unlock()
		}
		from = ch.To
	}
}

// BenchmarkLiveLog (issue 44 item 1): what following a session's log live
// costs the daemon, through the real fossil server, ocx-console and the
// daemon's socket, as the page's script follows it.
//
//   - daemon-cpu-%/1-viewer: the daemon's CPU (its own threads, /proc)
//     over the window, as a share of one core, while one viewer follows a
//     busy log (a line every 10 ms), beside daemon-cpu-%/no-viewer, the
//     same log with none; answers/s says how often the viewer was answered.
//   - launch/50-viewers: a session's start (`ocx session start` to its
//     process listening) and stop while 50 viewers follow a log that grows
//     a line a second, against launch/no-viewer, p50 of 5 each.
func BenchmarkLiveLog(b *testing.B) {
	needs(b, "ocxd", "workspace")
	n := consoleNode(b)
	admin := n.srv.AdminLogin
	n.must("", "login", "add", agent)
	n.must("", "login", "add", "agent-2")
	n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	n.result(admin, "workspace", "add", "--login", "agent-2", "--project", "demo", "--branch", "trunk")
	var flags []string
	// OCX_BENCH_PROFILE=DIR keeps the daemon's CPU profile there.
	if prof := os.Getenv("OCX_BENCH_PROFILE"); prof != "" {
		flags = append(flags, "--cpu-profile", filepath.Join(prof, "ocxd-livelog.prof"))
	}
	d := startDaemon(b, n, program("ocxd"), flags...)
	n.waitLogLine("the daemon's socket served", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
	logPath := filepath.Join(n.workspaceDir(agent), "session", "log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		b.Fatal(err)
	}
	// write appends a line to the log every every, until stop is closed.
	write := func(every time.Duration, stop <-chan struct{}, done *sync.WaitGroup) {
		done.Go(func() {
			f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			if err != nil {
				b.Error(err)
				return
			}
			defer f.Close()
			t := time.NewTicker(every)
			defer t.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-t.C:
					fmt.Fprintf(f, "time=%s level=INFO msg=\"a busy session's line\" n=%d\n", time.Now().Format(time.RFC3339Nano), i)
				}
			}
		})
	}
	url := n.viewer(person).base + "ext/console/session/" + agent + "/log"
	const window = 5 * time.Second

	// cpu measures the daemon's CPU over the window with viewers following
	// the busy log.
	cpu := func(viewers int) (float64, float64) {
		stop := make(chan struct{})
		var done sync.WaitGroup
		write(10*time.Millisecond, stop, &done)
		var mu sync.Mutex
		var answers int64
		for i := 0; i < viewers; i++ {
			c := n.viewer(person).c
			done.Go(func() { followLoop(c, url, stop, &answers, &mu) })
		}
		time.Sleep(time.Second) // the viewers have caught up with the log
		mu.Lock()
		answers = 0
		mu.Unlock()
		c0, t0 := procCPU(b, d.pid()), time.Now()
		time.Sleep(window)
		used, wall := procCPU(b, d.pid())-c0, time.Since(t0)
		mu.Lock()
		got := answers
		mu.Unlock()
		close(stop)
		done.Wait()
		return 100 * used.Seconds() / wall.Seconds(), float64(got) / wall.Seconds()
	}

	// launch times a session's start and stop with viewers following a
	// log that grows a line a second.
	launch := func(viewers int) time.Duration {
		stop := make(chan struct{})
		var done sync.WaitGroup
		write(time.Second, stop, &done)
		var mu sync.Mutex
		var answers int64
		for i := 0; i < viewers; i++ {
			c := n.viewer(person).c
			done.Go(func() { followLoop(c, url, stop, &answers, &mu) })
		}
		time.Sleep(2 * time.Second) // every viewer waits in its long poll
		var took []time.Duration
		for i := 0; i < 5; i++ {
			t0 := time.Now()
			if r := n.ocx(admin, "session", "start", key("agent-2"), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript); r.code != 0 {
				b.Fatalf("launch %d: %s", i, r)
			}
			n.waitFor("the session to listen", func() bool {
				for _, s := range n.status().Sessions {
					if s.Login == "agent-2" && s.Listening {
						return true
					}
				}
				return false
			})
			n.must("", "session", "stop", key("agent-2"))
			n.waitFor("the session to end", func() bool {
				for _, s := range n.status().Sessions {
					if s.Login == "agent-2" {
						return false
					}
				}
				return true
			})
			took = append(took, time.Since(t0))
		}
		close(stop)
		done.Wait()
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		return took[len(took)/2]
	}

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		idle, _ := cpu(0)
		one, rate := cpu(1)
		b.ReportMetric(idle, "daemon-cpu-%/no-viewer")
		b.ReportMetric(one, "daemon-cpu-%/1-viewer")
		b.ReportMetric(rate, "answers/s")
		base := launch(0)
		busy := launch(50)
		b.ReportMetric(base.Seconds()*1000, "launch-ms/no-viewer")
		b.ReportMetric(busy.Seconds()*1000, "launch-ms/50-viewers")
		b.ReportMetric(float64(busy)/float64(base), "launch/50-viewers-vs-none")
	}
	b.ReportMetric(0, "ns/op")
}
