package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/wire"
)

// The daemon's benchmarks (issue 5, point 6), on the real ocxd binary:
// a line to the launched program's main(), with 1,000 workspace actors
// alive, side by side with a bare fork and exec of the same sandboxed
// command and with s6's control-pipe launch of it; the lines per second the
// daemon ingests with none lost; its memory with 10,000 workspace actors.

// stampSource is the program a benchmark's release runs as `workspace`: its
// first act is to write the monotonic clock's reading (ns) to
// $HOME/stamp-LAUNCH, so that "line to main()" is measured where main starts.
const stampSource = `package main

import (
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

func main() {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	ns := ts.Nano()
	launch := "none"
	for i, a := range os.Args {
		if a == "--launch" && i+1 < len(os.Args) {
			launch = os.Args[i+1]
		}
	}
	os.WriteFile(os.Getenv("HOME")+"/stamp-"+launch, []byte(strconv.FormatInt(ns, 10)), 0o600)
}
`

// buildStamp builds the stamp program.
func buildStamp(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(stampSource), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module stamp\n\ngo 1.21\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, "stamp")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the stamp program: %v\n%s", err, o)
	}
	return out
}

func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// newBenchNode is a node without the hook: the benchmark hands the daemon
// its lines itself, and no hook may hand it a launch note first.
func newBenchNode(b *testing.B, root string) *testNode {
	b.Helper()
	srv := harness.StartServer(b, harness.Options{})
	n := &testNode{t: b, ctx: context.Background(), srv: srv, agents: filepath.Join(b.TempDir(), "agents"),
		pw: map[string]string{srv.AdminLogin: srv.AdminPassword}}
	b.Cleanup(n.shutdown)
	n.must("", "init", "--project", "demo="+srv.Repo+","+srv.URL, "--release", root)
	return n
}

// waitLog polls the daemon's log until count lines satisfy match.
func waitLog(b *testing.B, n *testNode, what string, count int, match func(string) bool) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		c := 0
		for _, l := range strings.Split(n.daemonLog(), "\n") {
			if match(l) {
				c++
			}
		}
		if c >= count {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("waited for %s: %d of %d", what, c, count)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitStamp waits for the stamp a launch's program writes, and removes it.
func awaitStamp(b *testing.B, ws, launch string) int64 {
	b.Helper()
	p := filepath.Join(ws, "stamp-"+launch)
	deadline := time.Now().Add(time.Minute)
	for {
		data, err := os.ReadFile(p)
		if err == nil && len(data) > 0 {
			os.Remove(p)
			ns, err := strconv.ParseInt(string(data), 10, 64)
			if err != nil {
				b.Fatalf("stamp %q: %v", data, err)
			}
			return ns
		}
		if time.Now().After(deadline) {
			b.Fatalf("no stamp from launch %s", launch)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// percentile is the p-th percentile (0 to 100) of sorted samples.
func percentile(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// BenchmarkDaemonLaunch measures a line to `workspace serve`'s main(): the
// daemon reads `post REPO HASH`, reads the launch note and both definitions
// from the repository, checks the process table, checks the sandbox against
// the node's files, and spawns bwrap running the release's `workspace` (here
// the stamp program), with 1,000 workspace actors alive. Side by side,
// interleaved: the same bwrap command by a bare fork and exec from this
// process, and by s6-supervise when s6's control pipe gets `o`.
func BenchmarkDaemonLaunch(b *testing.B) {
	needs(b, "ocxd")
	const samples = 60
	stamp := buildStamp(b)
	root := b.TempDir()
	dir := filepath.Join(root, "releases", "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"ocx", "ocxd"} {
		copyFile(b, filepath.Join(release(), name), filepath.Join(dir, name))
	}
	copyFile(b, stamp, filepath.Join(dir, "workspace"))
	setCurrent(b, root, "bench")
	n := newBenchNode(b, root)
	admin := n.srv.AdminLogin
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
	flags := []string{"--grace", "1s"}
	// OCX_BENCH_PROFILE=DIR keeps the daemon's CPU profile and its debug
	// log of the run there, for `go tool pprof` and the stages' times.
	prof := os.Getenv("OCX_BENCH_PROFILE")
	if prof != "" {
		flags = append(flags, "--cpu-profile", filepath.Join(prof, "ocxd-launch.prof"), "--log-level", "debug")
		b.Cleanup(func() {
			if data, err := os.ReadFile(filepath.Join(n.agents, "ocxd.log")); err == nil {
				os.WriteFile(filepath.Join(prof, "ocxd-launch.log"), data, 0o644)
			}
		})
	}
	d := startDaemon(b, n, filepath.Join(root, "current", "ocxd"), flags...)

	// 1,000 workspace actors alive (each made by a stop of its workspace).
	var ghosts []string
	for i := 0; i < 1000; i++ {
		ghosts = append(ghosts, fmt.Sprintf("stop ghost-%d demo", i))
	}
	n.send(ghosts...)
	waitLog(b, n, "1,000 workspace actors", 1000, func(l string) bool { return strings.Contains(l, "stop: no process names the workspace") })

	// The session definition and the launch notes, written beforehand.
	client := &fossilio.Client{URL: n.srv.URL, Login: admin, Password: n.srv.AdminPassword, ProjectCode: n.srv.ProjectCode}
	ctx := context.Background()
	def := &messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"true"}, Lifetime: messages.Stays}
	block, _ := def.Encode()
	defHash, err := client.Reply(ctx, record, record, "bench session\n\n"+string(block))
	if err != nil {
		b.Fatal(err)
	}
	total := samples * b.N
	launches := make([]string, total)
	for i := range launches {
		ln := &messages.LaunchNote{Login: agent, Project: "demo", Workspace: binding.Workspace, Session: defHash, Release: messages.ReleaseCurrent}
		lb, _ := ln.Encode()
		if launches[i], err = client.Reply(ctx, record, record, fmt.Sprintf("launch %d\n\n%s", i, lb)); err != nil {
			b.Fatal(err)
		}
	}

	// The same sandboxed command, for the fork and exec and for s6.
	var sb messages.Sandbox
	wdef, err := readWorkspaceDefinition(n, binding.Workspace)
	if err != nil {
		b.Fatal(err)
	}
	sb = wdef.Sandbox
	env := []string{"HOME=" + ws, "PATH=" + strings.Join(sb.Path, ":"), "USER=" + agent, "LOGNAME=" + agent, "LANG=C.UTF-8"}
	argvFor := func(launch string, statusFD int) []string {
		a, err := host.BwrapArgs(host.SandboxSpec{Sandbox: sb,
			Workspace: ws, Release: dir}, statusFD, filepath.Join(ws, "tree"),
			[]string{filepath.Join(dir, "workspace"), "serve", agent + "/demo", "--root", n.agents, "--launch", launch})
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Fatal(err)
	}
	s6 := startS6(b, bwrap, argvFor("s6", -1), env)

	var viaDaemon, viaFork, viaS6 []time.Duration
	proot, err := unixhost.OpenRoot(n.agents)
	if err != nil {
		b.Fatal(err)
	}
	defer proot.Close()
	pw, err := unixhost.OpenLineWriter(proot, filepath.Join(n.agents, "ocxd"))
	if err != nil {
		b.Fatal(err)
	}
	defer pw.Close()
	ends := 0
	b.ResetTimer()
	for i := 0; i < total; i++ {
		// The daemon.
		t0 := monotonic()
		if err := pw.WriteLine([]byte(pipe.PostLine{Repository: n.srv.Repo, Hash: launches[i]}.String())); err != nil {
			b.Fatal(err)
		}
		viaDaemon = append(viaDaemon, time.Duration(awaitStamp(b, ws, launches[i])-t0))
		ends++
		waitLog(b, n, "the end note", ends, func(l string) bool { return strings.Contains(l, `"msg":"wrote a end note"`) })

		// A bare fork and exec of the same bwrap command.
		viaFork = append(viaFork, forkExecOnce(b, bwrap, argvFor("fork", 3), env, ws))

		// s6: `o` (once) to the service's control pipe.
		if s6 != nil {
			viaS6 = append(viaS6, s6.once(b, ws))
		}
	}
	b.StopTimer()
	if d.exited() {
		b.Fatalf("the daemon exited")
	}
	report := func(name string, s []time.Duration) (p50, p99 time.Duration) {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		p50, p99 = percentile(s, 50), percentile(s, 99)
		b.ReportMetric(float64(p50.Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, name+"-p99-ms")
		return
	}
	d50, d99 := report("ocxd", viaDaemon)
	f50, f99 := report("forkexec", viaFork)
	b.ReportMetric(float64(d50)/float64(f50), "ocxd/forkexec-p50")
	b.ReportMetric(float64(d99)/float64(f99), "ocxd/forkexec-p99")
	if s6 != nil {
		s50, s99 := report("s6", viaS6)
		b.ReportMetric(float64(d50)/float64(s50), "ocxd/s6-p50")
		b.ReportMetric(float64(d99)/float64(s99), "ocxd/s6-p99")
	}
	b.ReportMetric(0, "ns/op")
}

// readWorkspaceDefinition reads the workspace definition a binding names.
func readWorkspaceDefinition(n *testNode, hash string) (*messages.WorkspaceDefinition, error) {
	r := n.repo()
	defer r.Close()
	p, err := r.Post(context.Background(), hash)
	if err != nil {
		return nil, err
	}
	note, err := messages.ReadPost([]byte(p.Text))
	if err != nil {
		return nil, err
	}
	def, ok := note.(*messages.WorkspaceDefinition)
	if !ok {
		return nil, fmt.Errorf("%s is not a workspace definition", hash)
	}
	return def, nil
}

// forkExecOnce runs the sandboxed command by fork and exec, as the daemon's
// launcher does (a session of its own, /dev/null in, the status pipe as fd
// 3), and returns the time to its main().
func forkExecOnce(b *testing.B, bwrap string, argv, env []string, ws string) time.Duration {
	b.Helper()
	null, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	defer unix.Close(p[0])
	t0 := monotonic()
	pid, err := syscall.ForkExec(bwrap, argv, &syscall.ProcAttr{Dir: "/", Env: env,
		Files: []uintptr{null.Fd(), null.Fd(), null.Fd(), uintptr(p[1])}, Sys: &syscall.SysProcAttr{Setsid: true}})
	unix.Close(p[1])
	if err != nil {
		b.Fatal(err)
	}
	ns := awaitStamp(b, ws, "fork")
	var st syscall.WaitStatus
	syscall.Wait4(pid, &st, 0, nil)
	return time.Duration(ns - t0)
}

// s6Service is an s6-svscan with one service, down, whose run script execs
// the sandboxed command.
type s6Service struct {
	scan    string
	service string
	cmd     *exec.Cmd
}

// startS6 starts s6-svscan, or returns nil when s6 is not installed (`make
// deps` installs it).
func startS6(b *testing.B, bwrap string, argv, env []string) *s6Service {
	b.Helper()
	svscan, err := exec.LookPath("s6-svscan")
	if err != nil {
		b.Logf("s6 is not installed: no s6 comparison")
		return nil
	}
	scan := b.TempDir()
	svc := filepath.Join(scan, "bench")
	if err := os.MkdirAll(svc, 0o755); err != nil {
		b.Fatal(err)
	}
	var run bytes.Buffer
	run.WriteString("#!/bin/sh\nexec env -i")
	for _, e := range env {
		run.WriteString(" " + shellQuote(e))
	}
	run.WriteString(" " + shellQuote(bwrap))
	for _, a := range argv[1:] {
		run.WriteString(" " + shellQuote(a))
	}
	run.WriteString(" </dev/null >/dev/null 2>&1\n")
	if err := os.WriteFile(filepath.Join(svc, "run"), run.Bytes(), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(svc, "down"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(svscan, scan)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s := &s6Service{scan: scan, service: svc, cmd: cmd}
	b.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := os.Stat(filepath.Join(svc, "supervise", "control")); err == nil && st.Mode()&os.ModeNamedPipe != 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("s6-supervise did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// once starts the service once through its control pipe and returns the
// time to the command's main(), then waits for the service to be down.
func (s *s6Service) once(b *testing.B, ws string) time.Duration {
	b.Helper()
	t0 := monotonic()
	fd, err := unix.Open(filepath.Join(s.service, "supervise", "control"), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	unix.Write(fd, []byte("o"))
	unix.Close(fd)
	ns := awaitStamp(b, ws, "s6")
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := exec.Command("s6-svstat", "-o", "up", s.service).Output()
		if strings.TrimSpace(string(out)) == "false" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the s6 service stays up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Duration(ns - t0)
}

func (s *s6Service) stop() {
	exec.Command("s6-svscanctl", "-t", s.scan).Run()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// BenchmarkDaemonIngest measures the lines per second the daemon reads from
// its pipe and hands to its node, with none lost or torn: each op writes
// 100,000 `post` lines (of one post, which the node handles once and then
// knows), packed into atomic writes, and waits until the daemon's log counts
// every one read.
func BenchmarkDaemonIngest(b *testing.B) {
	needs(b, "ocxd")
	for _, mode := range []string{"packed", "line-per-write"} {
		b.Run(mode, func(b *testing.B) {
			n := newBenchNode(b, relRoot)
			n.must("", "login", "add", agent)
			record := n.result(n.srv.AdminLogin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
			d := startDaemon(b, n, program("ocxd"))
			line := []byte(pipe.PostLine{Repository: n.srv.Repo, Hash: record}.String())
			const perOp = 100000
			root, err := unixhost.OpenRoot(n.agents)
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			w, err := unixhost.OpenLineWriter(root, filepath.Join(n.agents, "ocxd"))
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			w.Wait = 10 * time.Second
			batch := make([][]byte, 256)
			for i := range batch {
				batch[i] = line
			}
			var want int64
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				for sent := 0; sent < perOp; {
					if mode == "packed" {
						if err := w.WriteLines(batch); err != nil {
							b.Fatal(err)
						}
						sent += len(batch)
						want += int64(len(batch))
					} else {
						if err := w.WriteLine(line); err != nil {
							b.Fatal(err)
						}
						sent++
						want++
					}
				}
				awaitRead(b, n, want)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(want)/elapsed.Seconds(), "lines/s")
			if d.exited() {
				b.Fatal("the daemon exited")
			}
			if strings.Contains(n.daemonLog(), "a pipe line refused") {
				b.Fatal("a line was torn")
			}
		})
	}
}

// awaitRead waits until the daemon's log says it read want lines.
func awaitRead(b *testing.B, n *testNode, want int64) {
	b.Helper()
	needle := []byte(fmt.Sprintf(`"n":%d}`, want))
	deadline := time.Now().Add(5 * time.Minute)
	for {
		f, err := os.Open(filepath.Join(n.agents, "ocxd.log"))
		if err != nil {
			b.Fatal(err)
		}
		st, _ := f.Stat()
		off := max(st.Size()-64<<10, 0)
		buf := make([]byte, st.Size()-off)
		f.ReadAt(buf, off)
		f.Close()
		if bytes.Contains(buf, needle) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the daemon did not read %d lines", want)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkDaemonMemory measures the daemon's memory idle and with 10,000
// workspace actors alive, in one run: its resident set (VmRSS) as the
// kernel counts it, then its live Go heap, which the daemon writes to its
// log on USR1 after a full collection.
func BenchmarkDaemonMemory(b *testing.B) {
	needs(b, "ocxd")
	for i := 0; i < b.N; i++ {
		n := newBenchNode(b, relRoot)
		d := startDaemon(b, n, program("ocxd"))
		rssIdle := rssKiB(b, d.pid())
		heapIdle := heapLive(b, n, d.pid(), 1)
		const actors = 10000
		lines := make([]string, 0, 1000)
		for j := 0; j < actors; j++ {
			lines = append(lines, fmt.Sprintf("stop ghost-%d demo", j))
			if len(lines) == cap(lines) {
				n.send(lines...)
				lines = lines[:0]
			}
		}
		waitLog(b, n, "10,000 workspace actors", actors, func(l string) bool { return strings.Contains(l, "stop: no process names the workspace") })
		rss := rssKiB(b, d.pid())
		heap := heapLive(b, n, d.pid(), 2)
		b.ReportMetric(float64(rssIdle)/1024, "rss-idle-MB")
		b.ReportMetric(float64(rss)/1024, "rss-10k-workspaces-MB")
		b.ReportMetric(float64(heapIdle)/(1<<20), "heap-idle-MB")
		b.ReportMetric(float64(heap)/(1<<20), "heap-10k-workspaces-MB")
		b.ReportMetric(float64(heap-heapIdle)/actors, "heap-B/workspace")
		b.ReportMetric(0, "ns/op")
		if os.Getenv("OCX_BENCH_VERBOSE") != "" {
			for _, l := range strings.Split(n.daemonLog(), "\n") {
				if strings.Contains(l, `"msg":"memory"`) {
					b.Log(l)
				}
			}
		}
		d.stop()
	}
}

// BenchmarkDaemonIndexMemory: the daemon's memory with 10,000 workspaces
// defined on the record, its index read whole (a status asked on its
// socket answers all 10,000), beside the same daemon with none.
func BenchmarkDaemonIndexMemory(b *testing.B) {
	needs(b, "ocxd")
	const workspaces = 10000
	for i := 0; i < b.N; i++ {
		n := newBenchNode(b, relRoot)
		admin := n.srv.AdminLogin
		c := &fossilio.Client{URL: n.srv.URL, Login: admin, Password: n.srv.AdminPassword, ProjectCode: n.srv.ProjectCode}
		layout, err := host.NewLayout(n.agents)
		if err != nil {
			b.Fatal(err)
		}
		drafts := make([]fossilio.PostDraft, 0, workspaces)
		for j := 0; j < workspaces; j++ {
			k := messages.WorkspaceKey{Login: fmt.Sprintf("agent-%05d", j), Project: "demo"}
			ws, err := layout.Workspace(k)
			if err != nil {
				b.Fatal(err)
			}
			def := &messages.WorkspaceDefinition{Login: k.Login, Project: "demo", Branch: "trunk", Sandbox: benchSandbox(ws.Dir, relRoot)}
			block, err := def.Encode()
			if err != nil {
				b.Fatal(err)
			}
			drafts = append(drafts, fossilio.PostDraft{User: admin, Title: "Workspace " + k.String(),
				Text: fmt.Sprintf("Workspace `%s`: agent login `%s` on project `demo`, branch `trunk`.\n\n%s", k, k.Login, block)})
		}
		pushDrafts(b, c, drafts)
		d := startDaemon(b, n, program("ocxd"))
		n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
		rssIdle := rssKiB(b, d.pid())
		r, err := nodesock.Ask(context.Background(), layout, wire.NewAsk(wire.AskStatus), time.Minute)
		if err != nil {
			b.Fatalf("the daemon's status: %v", err)
		}
		if got := len(replyState(b, r).Workspaces); got != workspaces {
			b.Fatalf("the daemon's status holds %d workspaces, want %d", got, workspaces)
		}
		// Read once the daemon logged its memory line, which follows the
		// answer: the resident set it keeps, not the moment the reply left.
		heap, sys := goMemory(b, n, d.pid(), 1)
		rss, rssFile := rssKiB(b, d.pid()), procStatusKiB(b, d.pid(), "RssFile:")
		b.ReportMetric(float64(rssFile)/1024, "rss-file-10k-indexed-MB")
		b.ReportMetric(float64(sys)/(1<<20), "go-sys-10k-indexed-MB")
		b.ReportMetric(float64(rssIdle)/1024, "rss-started-MB")
		b.ReportMetric(float64(rss)/1024, "rss-10k-indexed-MB")
		b.ReportMetric(float64(heap)/(1<<20), "heap-10k-indexed-MB")
		b.ReportMetric(0, "ns/op")
		d.stop()
	}
}

// heapLive sends the daemon USR1 and returns the live heap of the memory
// line it logs, the nth since it started.
func heapLive(b *testing.B, n *testNode, pid, nth int) uint64 {
	heap, _ := goMemory(b, n, pid, nth)
	return heap
}

// goMemory is heapLive with the memory the Go runtime holds from the
// system (runtime.MemStats.Sys).
func goMemory(b *testing.B, n *testNode, pid, nth int) (heap, sys uint64) {
	b.Helper()
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		b.Fatal(err)
	}
	waitLog(b, n, "the daemon's memory line", nth, func(l string) bool {
		var m struct {
			Msg      string `json:"msg"`
			HeapLive uint64 `json:"heap_live"`
			Sys      uint64 `json:"sys"`
		}
		if json.Unmarshal([]byte(l), &m) != nil || m.Msg != "memory" {
			return false
		}
		heap, sys = m.HeapLive, m.Sys
		return true
	})
	return heap, sys
}

func rssKiB(b *testing.B, pid int) int64 { return procStatusKiB(b, pid, "VmRSS:") }

// procStatusKiB is a field of /proc/PID/status in KiB: VmRSS, or its parts
// RssAnon (the heap, stacks, SQLite's caches) and RssFile (the program's
// pages read from its file).
func procStatusKiB(b testing.TB, pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
