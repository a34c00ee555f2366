package itest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The figures of nodes on other hosts (issue 25, D72): a run posted on the
// server to its process's main() on a node on a host of its own, with the
// server's poke and with the node's timer alone, beside the same on the
// server's node; the runs per second one server sustains across 1, 2 and
// 4 such nodes; and what the receipt page costs the server per artifact.

// stampRun is a run for node whose process is the stamp program, which
// writes the monotonic clock at its main() to home/stamp-launch.
func stampRun(node, user, stamp, launch, home string) string {
	return block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "bench",
"process": {"user": %q, "command": [%q, "--launch", %q], "env": {"PATH": "/usr/bin:/bin", "HOME": %q}}}`,
		node, user, stamp, launch, home))
}

// BenchmarkRemoteRunToMain: a run posted on the server over sync (its
// backoffice and hook at once, as `ocx run post` does) to its process's
// main(): on the server's node, on a node on a host of its own that the
// hook pokes, and on one that pulls on its timer (2 s) alone. Each sample
// waits for the run's ended before the next.
func BenchmarkRemoteRunToMain(b *testing.B) {
	needs(b, "ocxd")
	stamp := buildStamp(b)
	a := serverNode(b)
	startDaemon(b, a, program("ocxd"))
	poked := newRemoteNode(b, a, "node-poked", remoteOpts{host: true, poke: "on"})
	timed := newRemoteNode(b, a, "node-timed", remoteOpts{host: true})
	startDaemon(b, poked, program("ocxd"))
	startDaemon(b, timed, program("ocxd"))
	fadmin := &fossilio.Admin{Repository: a.srv.Repo, Fossil: &fossilio.Fossil{Home: a.agents, User: "ocx", Dir: a.agents}}
	client := &fossilio.Client{URL: a.srv.URL, Login: a.srv.AdminLogin, Password: a.srv.AdminPassword, ProjectCode: a.srv.ProjectCode, Backoffice: fadmin.Backoffice}
	r := a.repo()
	defer r.Close()
	home := b.TempDir()
	// A run on the timer alone arrives at any moment of the node's 2 s
	// between pulls; but the node pulls at once after each write of its
	// own (its ended), so a sample posted right after the one before would
	// always meet that pull. Each sample of it is posted after a pause
	// drawn from [0, 2 s).
	pause := rand.New(rand.NewPCG(25, 72))
	for _, c := range []struct {
		name, node, user string
		timer            bool
	}{
		{"server-node", a.nodeUser(), "builder", false},
		{"remote-poked", "node-poked", "poked-user", false},
		{"remote-timer", "node-timed", "timed-user", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.Cleanup(func() {
				if !b.Failed() && os.Getenv("OCX_BENCH_LOG") == "" {
					return
				}
				for _, n := range []*testNode{poked, timed} {
					for _, l := range strings.Split(n.daemonLog(), "\n") {
						if strings.Contains(l, `"msg":"pulled"`) || strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
							b.Log(l)
						}
					}
				}
			})
			var toMain []time.Duration
			for i := 0; i < b.N; i++ {
				launch := fmt.Sprintf("%s-%d-%d", c.name, b.N, i)
				if c.timer {
					time.Sleep(time.Duration(pause.Int64N(int64(2 * time.Second))))
				}
				t0 := monotonic()
				root, err := client.NewThread(context.Background(), "bench "+launch, stampRun(c.node, c.user, stamp, launch, home))
				if err != nil {
					b.Fatal(err)
				}
				toMain = append(toMain, time.Duration(awaitStamp(b, home, launch)-t0))
				awaitRunPost[*runmsg.RunEnded](b, r, c.node, root)
			}
			sort.Slice(toMain, func(i, j int) bool { return toMain[i] < toMain[j] })
			b.ReportMetric(float64(percentile(toMain, 50).Microseconds())/1000, "main-p50-ms")
			b.ReportMetric(float64(percentile(toMain, 99).Microseconds())/1000, "main-p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkRemoteRunsPerSecond: the runs per second one server sustains
// across 1, 2 and 4 nodes on hosts of their own (all on this machine):
// each op posts 20 echo runs per node, from four posters at once, and
// ends when every one has its ended on the server.
func BenchmarkRemoteRunsPerSecond(b *testing.B) {
	needs(b, "ocxd")
	for _, nodes := range []int{0, 1, 2, 4} {
		name := fmt.Sprintf("nodes-%d", nodes)
		if nodes == 0 {
			name = "server-node"
		}
		b.Run(name, func(b *testing.B) {
			a := serverNode(b)
			startDaemon(b, a, program("ocxd"))
			var names []string
			nodesOf := []*testNode{a}
			if nodes == 0 {
				// The server's node alone, its runs for itself: the bound
				// of the server's own path (sync, hook, daemon).
				names = append(names, a.nodeUser())
			}
			for i := range nodes {
				name := fmt.Sprintf("node-%d", i)
				n := newRemoteNode(b, a, name, remoteOpts{host: true, poke: "on"})
				startDaemon(b, n, program("ocxd"))
				names = append(names, name)
				nodesOf = append(nodesOf, n)
			}
			client := &fossilio.Client{URL: a.srv.URL, Login: a.srv.AdminLogin, Password: a.srv.AdminPassword, ProjectCode: a.srv.ProjectCode}
			// Fossil records the URL it is first reached at (its config's
			// baseurl:), and two first pushes at once race on it, one
			// answered 400: a first push alone.
			if _, err := client.NewThread(context.Background(), "first", "before the runs"); err != nil {
				b.Fatal(err)
			}
			// The completion check (endedRuns) reads the lines the
			// nodes' daemons log anyway, and the record only once they
			// say every run is done: it costs the node nothing it would
			// not do, and the machine it measures little (14 ms of CPU
			// per run when it read every run every 20 ms, 2.0-2.4 ms
			// when it read what arrived every 20 ms). check-cpu-ms/run
			// says what it cost.
			repo := a.repo()
			defer repo.Close()
			ended := newEndedRuns(nodesOf...)
			perNode := 20
			var total, posting, check time.Duration
			busy0, all0 := cpuTimes(b)
			posted := 0
			b.ResetTimer()
			for op := 0; op < b.N; op++ {
				var runs []string
				var mu sync.Mutex
				work := make(chan int)
				var wg sync.WaitGroup
				t0 := time.Now()
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range work {
							node := names[i%len(names)]
							h, err := client.NewThread(context.Background(), fmt.Sprintf("run %d %d", op, i), echoRun(node, "u-"+node, fmt.Sprintf("r%d", i)))
							if err != nil {
								log, _ := os.ReadFile(filepath.Join(a.srv.Dir, "server.log"))
								b.Errorf("%.300s\nserver.log:\n%s", err, log)
								continue
							}
							mu.Lock()
							runs = append(runs, h)
							mu.Unlock()
						}
					}()
				}
				for i := range perNode * len(names) {
					work <- i
				}
				close(work)
				wg.Wait()
				posting += time.Since(t0)
				check += ended.await(b, repo, runs)
				total += time.Since(t0)
				posted += len(runs)
			}
			b.StopTimer()
			busy1, all1 := cpuTimes(b)
			b.ReportMetric(100*float64(busy1-busy0)/float64(all1-all0), "cpu-busy-%")
			b.ReportMetric(float64(posted)/total.Seconds(), "runs/s")
			b.ReportMetric(float64(posted)/posting.Seconds(), "posted/s")
			// What the completion check cost the machine, per run: the
			// benchmark's own CPU while it waited (nothing of the node's).
			b.ReportMetric(float64(check.Microseconds())/1000/float64(posted), "check-cpu-ms/run")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// cpuTimes reads the machine's busy and total CPU time (/proc/stat's first
// line, in clock ticks).
func cpuTimes(b *testing.B) (busy, all uint64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		all += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, all
}

// BenchmarkReceiptPage: what the receipt page costs the server, per
// artifact, asked by GET one at a time (rendered by the daemon) and by a
// POST of 500, each through the fossil server; beside it, the same
// artifacts read by `fossil whatis`, which a person with the server's
// repository file would run, one at a time.
func BenchmarkReceiptPage(b *testing.B) {
	needs(b, "ocxd", "ocx-console")
	a := serverNode(b)
	startDaemon(b, a, program("ocxd"))
	pwFile := filepath.Join(b.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("lab-x-pw-1\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	a.must("", "node", "add", "lab-x", "--password-file", pwFile)
	client := &fossilio.Client{URL: a.srv.URL, Login: a.srv.AdminLogin, Password: a.srv.AdminPassword, ProjectCode: a.srv.ProjectCode}
	root, err := client.NewThread(context.Background(), "many", "first")
	if err != nil {
		b.Fatal(err)
	}
	hashes := []string{root}
	for i := 0; len(hashes) < 500; i++ {
		h, err := client.Reply(context.Background(), root, root, fmt.Sprintf("reply %d", i))
		if err != nil {
			b.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	cookie, err := a.srv.LoginCookie("lab-x", "lab-x-pw-1")
	if err != nil {
		b.Fatal(err)
	}
	ask := func(method, path, body string) {
		req, _ := http.NewRequest(method, a.srv.URL+"ext/console/"+path, strings.NewReader(body))
		req.Header.Set("Cookie", cookie)
		if body != "" {
			req.Header.Set("Content-Type", "text/plain")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s %s: %s %s", method, path, resp.Status, data)
		}
	}
	b.Run("get-one", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			ask("GET", "receipt/"+hashes[i%len(hashes)], "")
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/artifact")
	})
	b.Run("post-500", func(b *testing.B) {
		body := strings.Join(hashes, "\n") + "\n"
		for i := 0; i < b.N; i++ {
			ask("POST", "receipt", body)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(hashes))/1000, "ms/artifact")
	})
	b.Run("fossil-whatis", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := a.srv.Fossil("whatis", hashes[i%len(hashes)], "-R", a.srv.Repo); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/artifact")
	})
}
