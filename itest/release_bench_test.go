package itest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// BenchmarkDaemonReexec measures the re-exec hand-off (seed 002, "re-exec
// the daemon") of a daemon holding 100 sessions, its children in bwrap,
// and 1,000 workspace actors, while a stream of pipe lines arrives: from
// the moment the `reexec` line is written to the moment the new image
// reads the pipe again (its first line read after "running the new
// image"), and, apart, to the moment the new image says it runs. Each
// re-exec moves current to the other of two releases first, as an accept
// does. Every line of the stream must be read exactly once (lines-lost is
// reported, and any loss or doubling fails the benchmark), the PID must
// stay, and every session must still be the daemon's child afterwards.
func BenchmarkDaemonReexec(b *testing.B) {
	needs(b, "ocxd", "workspace")
	const (
		sessions = 100
		actors   = 1000
		perOp    = 5    // re-execs per op
		stream   = 2000 // lines written at once, the reexec line after them
	)
	root := b.TempDir()
	makeRelease(b, root, "a")
	makeRelease(b, root, "b")
	setCurrent(b, root, "a")
	n := newBenchNode(b, root)
	admin := n.srv.AdminLogin
	d := startDaemon(b, n, filepath.Join(root, "current", "ocxd"), "--grace", "1s")

	// 100 sessions, each the daemon's child: one login and workspace each,
	// a `stays` mechanical session started through the node's tools.
	setup := time.Now()
	tops := make([]int, 0, sessions)
	var record string
	for i := 0; i < sessions; i++ {
		login := fmt.Sprintf("agent-%03d", i+1)
		n.must("", "login", "add", login)
		record = n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
		launch := n.result(admin, "session", "start", login+"/demo", "--hears", "", "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
		serve, ok := n.serving(launch)
		if !ok {
			b.Fatalf("no workspace serve for %s's launch %s", login, launch)
		}
		tops = append(tops, topOf(b, serve, d.pid()))
	}
	// 1,000 workspace actors (each made by a stop of a workspace no
	// process names).
	ghosts := make([]string, actors)
	for i := range ghosts {
		ghosts[i] = fmt.Sprintf("stop ghost-%d demo", i)
	}
	n.send(ghosts...)
	waitLog(b, n, "1,000 workspace actors", actors, func(l string) bool { return strings.Contains(l, "stop: no process names the workspace") })
	b.Logf("set-up: %d sessions and %d workspace actors in %s", sessions, actors, time.Since(setup).Round(time.Millisecond))

	var toRead, toRun []time.Duration
	lost, doubled := 0, 0
	releases := []string{"b", "a"}
	// OCX_BENCH_VERBOSE logs each re-exec's stages, timed from its line.
	verbose := os.Getenv("OCX_BENCH_VERBOSE") != ""
	// The stream is of `post` lines of a post the node knows, which it reads
	// and drops at once, as BenchmarkDaemonIngest's: a line the daemon
	// spends little on, so that what is timed is the hand-off, not a
	// backlog. The lines are alike, so each is counted, not named: that
	// every line is read exactly once by one image or the other, each line
	// told apart, is TestDaemonReexecKeepsEverything's.
	post := pipe.PostLine{Repository: n.srv.Repo, Hash: record}.String()
	b.ResetTimer()
	for i := 0; i < b.N*perOp; i++ {
		setCurrent(b, root, releases[i%2])
		_, off := timedLogFrom(b, n, 0)
		// The stream: half of it at once, the reexec line, then a line
		// every 200µs until the new image has read one, as lines arrive
		// on a busy node.
		var sent time.Time
		written := 0
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var werr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := n.pipeWriter()
			defer w.Close()
			for j := 0; ; j++ {
				if j == stream/2 {
					sent = time.Now()
					if err := w.WriteLine([]byte("reexec")); err != nil {
						werr = err
						return
					}
				}
				if j > stream/2 {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Microsecond):
					}
				}
				if err := w.WriteLine([]byte(post)); err != nil {
					werr = fmt.Errorf("line %d: %w", j, err)
					return
				}
				written++
			}
		}()
		var ran, read time.Time
		var stages []string
		got := 0
		var lines []timedLine
		deadline := time.Now().Add(time.Minute)
		for read.IsZero() {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				b.Fatalf("re-exec %d: the new image read no line within a minute (ran at %v): %v", i, ran, werr)
			}
			time.Sleep(time.Millisecond)
			lines, off = timedLogFrom(b, n, off)
			for _, l := range lines {
				switch {
				case l.Msg == "re-exec: running the new image" && ran.IsZero():
					ran = l.Time
				case l.Msg == "read" && l.Line == post:
					got++
					if !ran.IsZero() && read.IsZero() {
						read = l.Time
					}
				}
				if verbose && strings.HasPrefix(l.Msg, "re-exec") {
					stages = append(stages, fmt.Sprintf("%s +%s %s%s", l.Msg, l.Time.Sub(sent).Round(10*time.Microsecond), l.Took, l.SinceMain))
				}
			}
		}
		if verbose {
			b.Logf("re-exec %d: %s", i, strings.Join(stages, "; "))
		}
		close(stop)
		wg.Wait()
		if werr != nil {
			b.Fatal(werr)
		}
		n.waitFor("every line of the stream read, by the old image or the new", func() bool {
			lines, off = timedLogFrom(b, n, off)
			for _, l := range lines {
				if l.Msg == "read" && l.Line == post {
					got++
				}
			}
			return got >= written
		})
		// A line read twice would show once all are read and the daemon is
		// idle: its log is read once more after a pipe line of its own.
		n.send("stop ghost-end demo")
		n.waitFor("the daemon idle after the stream", func() bool {
			lines, off = timedLogFrom(b, n, off)
			end := false
			for _, l := range lines {
				switch {
				case l.Msg == "read" && l.Line == post:
					got++
				case l.Msg == "read" && l.Line == "stop ghost-end demo":
					end = true
				}
			}
			return end
		})
		lost += max(written-got, 0)
		doubled += max(got-written, 0)
		toRead = append(toRead, read.Sub(sent))
		toRun = append(toRun, ran.Sub(sent))
		if d.exited() {
			b.Fatalf("the daemon exited: %s", d.stderr)
		}
	}
	b.StopTimer()
	if pid := n.daemonPID(); pid != d.pid() {
		b.Fatalf("after the re-execs the lock is held by %d, not %d", pid, d.pid())
	}
	for _, top := range tops {
		if pp := ppidOf(b, top); pp != d.pid() {
			b.Fatalf("after the re-execs session %d has parent %d, not the daemon %d", top, pp, d.pid())
		}
	}
	if lost > 0 || doubled > 0 {
		b.Fatalf("%d lines lost, %d read twice", lost, doubled)
	}
	report := func(name string, s []time.Duration) {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		b.ReportMetric(float64(percentile(s, 50).Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(s[len(s)-1].Microseconds())/1000, name+"-max-ms")
	}
	report("reexec-to-read", toRead)
	report("reexec-to-run", toRun)
	b.ReportMetric(float64(lost), "lines-lost")
	b.ReportMetric(0, "ns/op")
}

// topOf is the daemon's child above a session's `workspace serve` (its
// bwrap).
func topOf(b testing.TB, serve, daemon int) int {
	b.Helper()
	p := serve
	for i := 0; i < 8; i++ {
		pp := ppidOf(b, p)
		if pp == daemon {
			return p
		}
		if pp <= 1 {
			break
		}
		p = pp
	}
	b.Fatalf("session %d is not a descendant of the daemon %d", serve, daemon)
	return 0
}

// timedLine is a line of ocxd.log with its time.
type timedLine struct {
	Time time.Time `json:"time"`
	Msg  string    `json:"msg"`
	Line string    `json:"line"`
	// The steps of a re-exec, as each image logs them.
	Took      json.RawMessage `json:"took"`
	SinceMain json.RawMessage `json:"since_main"`
}

// timedLogFrom reads ocxd.log from byte off on, each line with its time,
// but a last line the daemon is still writing; it returns the offset to
// read from next.
func timedLogFrom(b testing.TB, n *testNode, off int64) ([]timedLine, int64) {
	b.Helper()
	f, err := os.Open(filepath.Join(n.agents, "ocxd.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, max(st.Size()-off, 0))
	if _, err := f.ReadAt(data, off); err != nil && err != io.EOF {
		b.Fatal(err)
	}
	i := bytes.LastIndexByte(data, '\n')
	if i < 0 {
		return nil, off
	}
	data = data[:i+1]
	var out []timedLine
	for _, raw := range bytes.SplitAfter(data, []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		var l timedLine
		if err := json.Unmarshal(raw, &l); err != nil {
			b.Fatalf("ocxd.log holds a line that is not one JSON object: %q: %v", raw, err)
		}
		out = append(out, l)
	}
	return out, off + int64(len(data))
}

// BenchmarkReleaseAccept times `ocx release accept` end to end on a node
// whose daemon runs: the host checks of the staged release (each program's
// version line, the staged ocxd's hand-off version, workspace in a
// sandbox), the links, the `reexec` line and the wait for the daemon's
// outcome. Side by side, what an operator would do by hand without the
// checks: move current with a link renamed over it, send the daemon HUP
// (D26: the re-exec of current) and wait for the same outcome. Releases A
// and B take turns: each sample stages the one not current (not timed).
func BenchmarkReleaseAccept(b *testing.B) {
	needs(b, "ocxd", "workspace")
	const samples = 5
	ciA, ciB := strings.Repeat("3c", 20), strings.Repeat("4d", 20)
	dirs := map[string]string{ciA: stampedPrograms(b, ciA), ciB: stampedPrograms(b, ciB)}
	root := filepath.Join(b.TempDir(), "release")
	cmd := exec.Command(program("ocx"), "release", "init", root, "--from", dirs[ciA])
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + b.TempDir(), "LANG=C.UTF-8"}
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("ocx release init: %v\n%s", err, out)
	}
	n := newBenchNode(b, root)
	d := startDaemon(b, n, filepath.Join(root, "current", "ocxd"), "--grace", "1s")
	layout, err := host.NewLayout(n.agents)
	if err != nil {
		b.Fatal(err)
	}
	current := ciA
	other := func() string {
		if current == ciA {
			return ciB
		}
		return ciA
	}
	// reexecd waits for the daemon's outcome of a re-exec asked after t0,
	// running release id.
	reexecd := func(t0 time.Time, id string) {
		n.waitFor("the daemon's re-exec outcome", func() bool {
			data, err := os.ReadFile(layout.Reexec())
			if err != nil {
				return false
			}
			o, err := messages.DecodeReexecOutcome(data)
			if err != nil || o.At.Before(t0) {
				return false
			}
			if !o.OK || o.Release != id {
				b.Fatalf("the re-exec to %s: %+v", id, o)
			}
			return true
		})
	}
	var accept, byHand []time.Duration
	b.ResetTimer()
	for i := 0; i < samples*b.N; i++ {
		b.StopTimer()
		next := other()
		n.must("", "release", "stage", "--from", dirs[next])
		b.StartTimer()
		t0 := time.Now()
		n.must("", "release", "accept")
		accept = append(accept, time.Since(t0))
		current = next
		if exeOf(d.pid()) != filepath.Join(root, "releases", current, "ocxd") {
			b.Fatalf("after accept the daemon runs %s", exeOf(d.pid()))
		}

		// By hand: previous and current swapped, HUP, the outcome awaited.
		next = other()
		t0 = time.Now()
		for _, l := range []struct{ name, target string }{{"previous", "releases/" + current}, {"current", "releases/" + next}} {
			tmp := filepath.Join(root, l.name+".new")
			os.Remove(tmp)
			if err := os.Symlink(l.target, tmp); err != nil {
				b.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(root, l.name)); err != nil {
				b.Fatal(err)
			}
		}
		if err := syscall.Kill(d.pid(), syscall.SIGHUP); err != nil {
			b.Fatal(err)
		}
		reexecd(t0, next)
		byHand = append(byHand, time.Since(t0))
		current = next
	}
	b.StopTimer()
	if d.exited() || n.daemonPID() != d.pid() {
		b.Fatalf("the daemon %d changed or exited (lock held by %d)", d.pid(), n.daemonPID())
	}
	report := func(name string, s []time.Duration) time.Duration {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		p50 := percentile(s, 50)
		b.ReportMetric(float64(p50.Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(s[len(s)-1].Microseconds())/1000, name+"-max-ms")
		return p50
	}
	a50, h50 := report("accept", accept), report("by-hand", byHand)
	b.ReportMetric(float64(a50)/float64(h50), "accept/by-hand-p50")
	b.ReportMetric(0, "ns/op")
}
