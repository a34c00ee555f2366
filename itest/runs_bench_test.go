package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The run engine's benchmarks (issue 16, item 13), on a real fossil server,
// the hook and the real ocxd: a run's arrival to its started on the record
// and to its process's main(), beside a session's launch note to its
// process's main() on the same path (sync, backoffice, hook, daemon); and
// the deliveries per second a feeding session is given, none lost or
// doubled.

// runBenchNode is a node with the hook whose release's `workspace` is the
// stamp program, so that a session's launch and a run both end in a main()
// that writes the monotonic clock to $HOME/stamp-LAUNCH.
func runBenchNode(b *testing.B) (n *testNode, root, stamp string) {
	b.Helper()
	stamp = buildStamp(b)
	root = b.TempDir()
	dir := filepath.Join(root, "releases", "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"ocx", "ocxd"} {
		copyFile(b, filepath.Join(release(), name), filepath.Join(dir, name))
	}
	copyFile(b, stamp, filepath.Join(dir, "workspace"))
	setCurrent(b, root, "bench")
	return newNodeRelease(b, root), root, stamp
}

// awaitRunPost polls the open repository until the node user has written
// a message of the run's thread that is kind's, and returns the time seen.
func awaitRunPost[M runmsg.Message](b *testing.B, r *fossilio.Repo, node, root string) int64 {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		posts, err := r.Thread(context.Background(), root)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range posts {
			if p.Sender != node {
				continue
			}
			if m, _ := runmsg.ReadMessage([]byte(p.Text)); m != nil {
				if _, ok := m.(M); ok {
					return monotonic()
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("nothing of %T by %s in run %s in a minute", *new(M), node, root)
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// BenchmarkRunArrival measures, interleaved, an unconfined run posted by
// the admin over sync (the backoffice and the hook run at once) to (a) the
// node's started on the record, as a poll of the repository sees it, and
// (b) its process's main(); and the same post-to-main() for a session's
// launch note (what `ocx session start` writes) on the same path. Each
// sample waits for the run's ended, and for the session's end note, before
// the next.
func BenchmarkRunArrival(b *testing.B) {
	needs(b, "ocxd")
	n, rroot, stamp := runBenchNode(b)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(b, n, filepath.Join(rroot, "current", "ocxd"), "--grace", "1s")
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	ws := n.workspaceDir(agent)
	bdata, err := os.ReadFile(filepath.Join(ws, "binding.json"))
	if err != nil {
		b.Fatal(err)
	}
	binding, err := messages.DecodeBinding(bdata)
	if err != nil {
		b.Fatal(err)
	}
	fadmin := &fossilio.Admin{Repository: n.srv.Repo, Fossil: &fossilio.Fossil{Home: n.agents, User: "ocx", Dir: n.agents}}
	client := &fossilio.Client{URL: n.srv.URL, Login: admin, Password: n.srv.AdminPassword, ProjectCode: n.srv.ProjectCode, Backoffice: fadmin.Backoffice}
	ctx := context.Background()
	def := &messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"true"}, Lifetime: messages.Stays}
	dblock, _ := def.Encode()
	defHash, err := client.Reply(ctx, record, record, "bench session\n\n"+string(dblock))
	if err != nil {
		b.Fatal(err)
	}
	home := b.TempDir()
	r := n.repo()
	defer r.Close()

	b.Run("run-vs-session", func(b *testing.B) {
		var toStarted, toMain, session []time.Duration
		ends := strings.Count(n.daemonLog(), `"msg":"wrote a end note"`)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			// A run.
			launch := fmt.Sprintf("run-%d-%d", b.N, i)
			run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "bench",
"process": {"user": "builder", "command": [%q, "--launch", %q], "env": {"PATH": "/usr/bin:/bin", "HOME": %q}}}`,
				node, stamp, launch, home)
			t0 := monotonic()
			root, err := client.NewThread(ctx, "bench "+launch, block(run))
			if err != nil {
				b.Fatal(err)
			}
			started := awaitRunPost[*runmsg.RunStarted](b, r, node, root)
			main := awaitStamp(b, home, launch)
			toStarted = append(toStarted, time.Duration(started-t0))
			toMain = append(toMain, time.Duration(main-t0))
			awaitRunPost[*runmsg.RunEnded](b, r, node, root)

			// A session's launch note, on the same path.
			ln := &messages.LaunchNote{Login: agent, Project: "demo", Workspace: binding.Workspace, Session: defHash, Release: messages.ReleaseCurrent}
			lb, _ := ln.Encode()
			t0 = monotonic()
			lh, err := client.Reply(ctx, record, record, fmt.Sprintf("launch %d %d\n\n%s", b.N, i, lb))
			if err != nil {
				b.Fatal(err)
			}
			session = append(session, time.Duration(awaitStamp(b, ws, lh)-t0))
			ends++
			waitLog(b, n, "the end note", ends, func(l string) bool { return strings.Contains(l, `"msg":"wrote a end note"`) })
		}
		b.StopTimer()
		p50 := func(name string, s []time.Duration) time.Duration {
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			b.ReportMetric(float64(percentile(s, 50).Microseconds())/1000, name+"-p50-ms")
			b.ReportMetric(float64(percentile(s, 99).Microseconds())/1000, name+"-p99-ms")
			return percentile(s, 50)
		}
		p50("run-started", toStarted)
		m := p50("run-main", toMain)
		s := p50("session-main", session)
		b.ReportMetric(float64(m)/float64(s), "run/session-main-p50")
		b.ReportMetric(0, "ns/op")
	})
}

// BenchmarkRunDeliveries measures the deliveries per second a feeding
// session run is given: each op, alice pushes 200 posts in its thread, in
// batches of 20 (one sync each, the backoffice after each batch), and the
// op ends when the session's program has appended every one's line to its
// file. Each post's line must be there exactly once, in the server's order,
// or the benchmark fails.
func BenchmarkRunDeliveries(b *testing.B) {
	needs(b, "ocxd")
	n := newNode(b)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(b, n, program("ocxd"), "--grace", "2s")
	out := filepath.Join(b.TempDir(), "got")
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Take what you hear.",
"process": {"user": "builder", "command": ["sh", "-c", "while read l; do printf '%%s\\n' \"$l\" >> \"$OUT\"; done"],
"env": {"PATH": "/usr/bin:/bin", "OUT": %q}, "session": true, "hears": ["alice"], "deliveries": "feed"}}`, node, out)
	root := n.result(admin, "thread", "--title", "Deliveries", "--text", block(run))
	id := n.heldRun(root)
	b.Cleanup(func() {
		stop := fmt.Sprintf(`{"ocx": 1, "kind": "stop", "node": %q, "run": %q}`, node, root)
		n.result(admin, "post", "--to", root, "--text", block(stop))
		n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
		n.waitFor("the run's process gone", func() bool { return !procAlive(id) })
	})
	fadmin := &fossilio.Admin{Repository: n.srv.Repo, Fossil: &fossilio.Fossil{Home: n.agents, User: "ocx", Dir: n.agents}}
	client := &fossilio.Client{URL: n.srv.URL, Login: person, Password: personPW, ProjectCode: n.srv.ProjectCode}
	ctx := context.Background()
	const perOp, batch = 200, 20
	var sent []string

	b.Run("feed", func(b *testing.B) {
		var elapsed time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			for j := 0; j < perOp; j += batch {
				var drafts [][]byte
				for k := j; k < j+batch; k++ {
					d, err := fossilio.PostDraft{Date: time.Now(), User: person, Root: root, InReplyTo: root,
						Text: fmt.Sprintf("delivery %d.%d.%d", b.N, i, k)}.Bytes()
					if err != nil {
						b.Fatal(err)
					}
					drafts = append(drafts, d)
				}
				hs, err := client.PushAll(ctx, drafts...)
				if err != nil {
					b.Fatal(err)
				}
				sent = append(sent, hs...)
				if err := fadmin.Backoffice(ctx); err != nil {
					b.Fatal(err)
				}
			}
			deadline := time.Now().Add(2 * time.Minute)
			for countLines(out) < len(sent)+1 {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d lines in a minute", countLines(out)-1, len(sent))
				}
				time.Sleep(time.Millisecond)
			}
			elapsed += time.Since(start)
		}
		b.StopTimer()
		b.ReportMetric(float64(perOp*b.N)/elapsed.Seconds(), "deliveries/s")
		b.ReportMetric(0, "ns/op")
		checkDeliveries(b, n, out, sent)
	})
}

func countLines(path string) int {
	data, _ := os.ReadFile(path)
	return strings.Count(string(data), "\n")
}

// checkDeliveries fails unless the file holds the first line and then each
// sent post's line exactly once, in the server's order.
func checkDeliveries(b *testing.B, n *testNode, path string, sent []string) {
	b.Helper()
	order := append([]string{}, sent...)
	pos := map[string]protocol.RunPosition{}
	for _, h := range order {
		pos[h] = n.posAt(h)
	}
	sort.SliceStable(order, func(i, j int) bool { return pos[order[i]].Before(pos[order[j]]) })
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], `{"run"`) {
		b.Fatalf("the file does not begin with the first line: %.200q", data)
	}
	var got []string
	seen := map[string]int{}
	for _, l := range lines[1:] {
		var v struct {
			Post string `json:"post"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Post == "" {
			b.Fatalf("not a post's line: %q", l)
		}
		got = append(got, v.Post)
		seen[v.Post]++
	}
	lost, doubled := 0, 0
	for _, h := range sent {
		switch c := seen[h]; {
		case c == 0:
			lost++
		case c > 1:
			doubled += c - 1
		}
	}
	if lost != 0 || doubled != 0 || len(got) != len(order) {
		b.Fatalf("%d lost, %d doubled, %d lines for %d posts", lost, doubled, len(got), len(order))
	}
	for i := range order {
		if got[i] != order[i] {
			b.Fatalf("line %d is %s, want %s (the server's order)", i+1, got[i], order[i])
		}
	}
	b.Logf("%d posts, each given once, in the server's order", len(sent))
}
