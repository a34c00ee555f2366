package itest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

// The console's benchmarks (issue 12): a page through one fossil server,
// side by side with Fossil's own /timeline on that server as the same
// viewer; and the status JSON of a node with 100 workspaces, 100 sessions
// and 300 listeners in the CGI process, side by side with `ocx status
// --json`. Each request is timed on its own and the kinds are interleaved,
// so that the machine's drift affects all of them alike; each benchmark
// reports per-request p50 and mean (ms), and no ns/op: one op is a whole
// set of samples.

// BenchmarkConsolePage times, as a logged-in admin, the console's Sessions
// and Workspaces pages through `fossil server --extroot` on a node with
// three workspaces and one running session, each followed by Fossil's own
// /timeline on the same server. Beside them, to see where the console's
// time goes: a static extension through the same server (what Fossil's
// /ext costs before the console runs), each page by `ocx console` run
// directly as a CGI process with the environment Fossil gave it, and the
// ocx binary's start alone (`ocx help`).
func BenchmarkConsolePage(b *testing.B) {
	needs(b, "ocxd", "workspace")
	const samples = 40
	n := consoleNode(b)
	admin := n.srv.AdminLogin
	for _, l := range []string{agent, "agent-2", "agent-3"} {
		n.must("", "login", "add", l)
		n.result(admin, "workspace", "add", "--login", l, "--project", "demo", "--branch", "trunk")
	}
	n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	floor := "#!/bin/sh\nprintf 'Status: 200 OK\\r\\nContent-Type: text/html; charset=utf-8\\r\\n\\r\\n'\n" +
		"printf '%s\\n' \"<div class='fossil-doc' data-title='floor'><p id='floor'>a static page</p></div>\"\n"
	writeScript(b, filepath.Join(n.srv.ExtRoot, "floor"), floor)

	v := n.viewer(admin)
	pages := []struct {
		path, marker string
		count        int
	}{
		{"sessions", `data-ocx-session="` + key(agent) + `"`, 1},
		{"workspaces", `data-ocx-workspace="`, 3},
	}
	envs := make([][]string, len(pages))
	for i, p := range pages {
		envs[i] = fossilEnvFor(b, n, v, p.path)
	}
	checkPage := func(what string, code int, body, marker string, count int) {
		if code != http.StatusOK || strings.Count(body, marker) != count ||
			strings.Contains(body, `id="ocx-daemon"`) || strings.Contains(body, `id="ocx-problem"`) {
			b.Fatalf("%s: %d, %d of %q:\n%s", what, code, strings.Count(body, marker), marker, body)
		}
	}
	ocx := program("ocx")
	var (
		viaServer = make([][]time.Duration, len(pages))
		direct    = make([][]time.Duration, len(pages))
		timeline  []time.Duration
		ext       []time.Duration
		start     []time.Duration
	)
	b.ResetTimer()
	for i := 0; i < samples*b.N; i++ {
		// The pages' order turns each time: a request that follows one
		// through the server shares the CPU with that request's process,
		// which closes the repository and checks the backoffice's lease
		// after its reply (fossil-2.21.md 4.5).
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, j := range order {
			p := pages[j]
			d, code, body := timedGet(b, v.c, v.base+"ext/console/"+p.path)
			checkPage("console "+p.path, code, body, p.marker, p.count)
			viaServer[j] = append(viaServer[j], d)
			d, code, body = timedGet(b, v.c, v.base+"timeline")
			checkPage("timeline", code, body, `class="timelineTable`, 1)
			timeline = append(timeline, d)
		}
		d, code, body := timedGet(b, v.c, v.base+"ext/floor")
		checkPage("ext/floor", code, body, "id='floor'", 1)
		ext = append(ext, d)
		for _, j := range order {
			p := pages[j]
			d, code, _, body := runConsoleCGI(b, ocx, n.agents, n.srv.ExtRoot, envs[j])
			checkPage("ocx console "+p.path, code, body, p.marker, p.count)
			direct[j] = append(direct[j], d)
		}
		start = append(start, timedRun(b, ocx, n.agents, "help"))
	}
	b.StopTimer()
	t50, tmean := reportTimes(b, "timeline", timeline)
	for j, p := range pages {
		c50, cmean := reportTimes(b, p.path, viaServer[j])
		b.ReportMetric(float64(c50)/float64(t50), p.path+"/timeline-p50")
		b.ReportMetric(float64(cmean)/float64(tmean), p.path+"/timeline-mean")
		reportTimes(b, p.path+"-cgi", direct[j])
	}
	reportTimes(b, "ext-floor", ext)
	reportTimes(b, "ocx-start", start)
	b.ReportMetric(0, "ns/op")

	n.must("", "session", "stop", key(agent))
	n.waitFor("the session to end", func() bool { return len(n.status().Sessions) == 0 })
}

// BenchmarkConsoleState times the status JSON (/state) of a node with 100
// workspaces, 100 sessions and 300 listeners in the CGI process: `ocx
// console` run directly per request with the environment Fossil gave it
// for GET /ext/console/state, beside `ocx status --json` (the same
// document from the command line) and the ocx binary's start alone.
//
// The node is made cheaply but truthfully: 100 agent logins provisioned as
// `ocx login add` provisions them; each workspace's definition posted by
// the admin as the first post of its own thread, with a session definition
// and a launch note in it; three listen notes per agent, each pushed as
// its agent login (D7); and 100 session processes, a program that holds
// its workspace's wake pipe open for reading and sleeps, run from the
// release as `workspace serve LOGIN/demo --root AGENTS --launch HASH`. No
// hook is installed and no daemon runs: the benchmark holds the daemon's
// lock and reads its pipe, so the console starts none, and nothing is
// launched.
func BenchmarkConsoleState(b *testing.B) {
	needs(b, "ocxd")
	const (
		perLogin = 3 // listeners
		samples  = 30
	)
	// OCX_BENCH_WORKSPACES sets the size of the record (100 unless set):
	// the cost of a read by the daemon should be flat in it.
	workspaces := 100
	if v := os.Getenv("OCX_BENCH_WORKSPACES"); v != "" {
		var err error
		if workspaces, err = strconv.Atoi(v); err != nil || workspaces < 4 {
			b.Fatalf("OCX_BENCH_WORKSPACES=%q: not a count of 4 or more", v)
		}
	}
	// OCX_BENCH_HISTORY adds that many posts of conversation (0 unless
	// set), spread over the workspaces' threads: a year of records with
	// the same live workspaces, which the daemon's read should not pay for.
	history := 0
	if v := os.Getenv("OCX_BENCH_HISTORY"); v != "" {
		var err error
		if history, err = strconv.Atoi(v); err != nil || history < 0 {
			b.Fatalf("OCX_BENCH_HISTORY=%q: not a count", v)
		}
	}
	ctx := context.Background()
	root := b.TempDir()
	rel := filepath.Join(root, "releases", "bench")
	if err := os.MkdirAll(rel, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"ocx", "ocxd", host.ConsoleProgram} {
		if err := os.Link(filepath.Join(release(), name), filepath.Join(rel, name)); err != nil {
			copyFile(b, filepath.Join(release(), name), filepath.Join(rel, name))
		}
	}
	copyFile(b, buildProgram(b, "sleeper", sleeperSource), filepath.Join(rel, "workspace"))
	setCurrent(b, root, "bench")
	n := consoleNodeOn(b, root)
	admin := n.srv.AdminLogin
	layout, err := host.NewLayout(n.agents)
	if err != nil {
		b.Fatal(err)
	}

	// The stand-in daemon: its lock held and its pipe read by the
	// benchmark, so that the console's "ensure the daemon runs" finds one.
	lock, err := unixhost.AcquireLock(layout.Lock())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lock.Release() }) // again: releasing twice is harmless
	froot, err := unixhost.OpenRoot(n.agents)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { froot.Close() })
	if err := froot.Mkfifo(layout.Pipe(), 0o600); err != nil {
		b.Fatal(err)
	}
	daemon := countPipe(b, froot, layout.Pipe())

	// The agent logins, as `ocx login add` provisions them.
	fa := &fossilio.Admin{Repository: n.srv.Repo}
	logins := make([]string, workspaces)
	for i := range logins {
		logins[i] = fmt.Sprintf("agent-%03d", i+1)
		pwFile, err := layout.Password(logins[i])
		if err != nil {
			b.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(pwFile), 0o700); err != nil {
			b.Fatal(err)
		}
		if err := fa.ProvisionAgent(ctx, logins[i], pwFile); err != nil {
			b.Fatal(err)
		}
	}

	// The workspaces' definitions, each the first post of its thread, as
	// `ocx workspace add` posts them.
	adminPush := &fossilio.Client{URL: n.srv.URL, Login: admin, Password: n.srv.AdminPassword, ProjectCode: n.srv.ProjectCode}
	keys := make([]messages.WorkspaceKey, workspaces)
	wss := make([]host.Workspace, workspaces)
	var drafts []fossilio.PostDraft
	for i, l := range logins {
		keys[i] = messages.WorkspaceKey{Login: l, Project: "demo"}
		if wss[i], err = layout.Workspace(keys[i]); err != nil {
			b.Fatal(err)
		}
		def := &messages.WorkspaceDefinition{Login: l, Project: "demo", Branch: "trunk", Sandbox: benchSandbox(wss[i].Dir, filepath.Join(root, "current"))}
		block, err := def.Encode()
		if err != nil {
			b.Fatal(err)
		}
		drafts = append(drafts, fossilio.PostDraft{User: admin, Title: "Workspace " + keys[i].String(),
			Text: fmt.Sprintf("Workspace `%s`: agent login `%s` on project `%s`, branch `%s`.\n\n%s", keys[i], l, "demo", "trunk", block)})
	}
	records := pushDrafts(b, adminPush, drafts)

	// A session definition and a launch note on each record, as `ocx
	// session start` posts them.
	drafts = drafts[:0]
	sdef := &messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"/bin/sh", "-c", "true"}, Lifetime: messages.Stays, Hears: []string{person}}
	sblock, err := sdef.Encode()
	if err != nil {
		b.Fatal(err)
	}
	for i, k := range keys {
		drafts = append(drafts, fossilio.PostDraft{User: admin, Root: records[i], InReplyTo: records[i],
			Text: fmt.Sprintf("Session of workspace `%s`: %s.\n\n%s", k, sdef, sblock)})
	}
	sessionDefs := pushDrafts(b, adminPush, drafts)
	drafts = drafts[:0]
	for i, k := range keys {
		ln := &messages.LaunchNote{Login: k.Login, Project: k.Project, Workspace: records[i], Session: sessionDefs[i], Release: messages.ReleaseCurrent}
		block, err := ln.Encode()
		if err != nil {
			b.Fatal(err)
		}
		drafts = append(drafts, fossilio.PostDraft{User: admin, Root: records[i], InReplyTo: records[i],
			Text: fmt.Sprintf("Launch of the session %s in workspace `%s`.\n\n%s", sessionDefs[i][:fossilio.MinPrefix], k, block)})
	}
	launches := pushDrafts(b, adminPush, drafts)
	for done := 0; done < history; {
		drafts = drafts[:0]
		for ; done < history && len(drafts) < 1000; done++ {
			r := records[done%workspaces]
			drafts = append(drafts, fossilio.PostDraft{User: admin, Root: r, InReplyTo: r,
				Text: fmt.Sprintf("Conversation, post %d: what was said and done on this record.", done)})
		}
		pushDrafts(b, adminPush, drafts)
	}

	// Three listeners per agent, on the next three workspaces' threads:
	// each listen note in the thread it listens to, pushed as the agent.
	for i, k := range keys {
		pwFile, _ := layout.Password(k.Login)
		pw, err := fossilio.ReadPasswordFile(pwFile)
		if err != nil {
			b.Fatal(err)
		}
		c := &fossilio.Client{URL: n.srv.URL, Login: k.Login, Password: pw, ProjectCode: n.srv.ProjectCode}
		var ds []fossilio.PostDraft
		for j := 1; j <= perLogin; j++ {
			thread := records[(i+j)%workspaces]
			note := &messages.ListenNote{Listener: messages.Listener{Login: k.Login, Project: k.Project, Kind: messages.ListenThread, Names: thread}}
			block, err := note.Encode()
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, fossilio.PostDraft{User: k.Login, Root: thread, InReplyTo: thread,
				Text: fmt.Sprintf("Listening to thread `%s` in workspace `%s`.\n\n%s", thread, k, block)})
		}
		pushDrafts(b, c, ds)
	}

	// The sessions: each workspace's session directory with its wake pipe
	// and the hears file its starter writes, and a process naming it.
	hears, err := messages.HearsFileContent(sdef.Hears)
	if err != nil {
		b.Fatal(err)
	}
	var cmds []*exec.Cmd
	for i, k := range keys {
		if err := froot.MkdirAll(wss[i].Session, 0o700); err != nil {
			b.Fatal(err)
		}
		if err := froot.Mkfifo(wss[i].Wake, 0o600); err != nil {
			b.Fatal(err)
		}
		if err := froot.MkdirAll(filepath.Dir(wss[i].Hears), 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(wss[i].Hears, hears, 0o600); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, &exec.Cmd{
			Path: filepath.Join(root, "current", "workspace"),
			Args: []string{"workspace", "serve", k.String(), "--root", n.agents, "--launch", launches[i]},
			Env:  []string{"OCX_BENCH_WAKE=" + wss[i].Wake},
			Dir:  "/",
		})
	}
	startSessions(b, cmds)

	// The fixture is what it should be, as `ocx status --json` says.
	n.waitFor(fmt.Sprintf("%d workspaces, sessions listening and %d listeners", workspaces, perLogin*workspaces), func() bool {
		st := n.status()
		listening, active := 0, 0
		for _, s := range st.Sessions {
			if s.Listening && s.StartedBy == messages.OriginDaemon && !s.Older && s.Record != "" {
				listening++
			}
		}
		for _, w := range st.Workspaces {
			if w.State == messages.WorkspaceActive {
				active++
			}
		}
		ok := len(st.Logins) == workspaces && active == workspaces && len(st.Workspaces) == workspaces &&
			listening == workspaces && len(st.Sessions) == workspaces && len(st.Listeners) == perLogin*workspaces
		if !ok {
			b.Logf("status: %d logins, %d workspaces (%d active), %d sessions (%d listening, from the daemon, current), %d listeners",
				len(st.Logins), len(st.Workspaces), active, len(st.Sessions), listening, len(st.Listeners))
		}
		return ok
	})

	v := n.viewer(admin)
	env := fossilEnvFor(b, n, v, "state")
	for _, want := range []string{"REQUEST_METHOD=GET", "PATH_INFO=/state", "SCRIPT_NAME=/ext/console", "FOSSIL_REPOSITORY=" + n.srv.Repo, "FOSSIL_USER=" + admin} {
		if !hasEnv(env, want) {
			b.Fatalf("Fossil's environment for /ext/console/state lacks %s: %q", want, env)
		}
	}
	schemas, err := validate.Load()
	if err != nil {
		b.Fatal(err)
	}
	ocx := filepath.Join(root, "current", "ocx")
	check := func(code int, ctype, body string) {
		if code != http.StatusOK || ctype != "application/json" {
			b.Fatalf("ocx console /state: %d %q\n%s", code, ctype, body)
		}
		if err := schemas.Validate("state.schema.json", []byte(body)); err != nil {
			b.Fatalf("the console's state is not valid: %v", err)
		}
		st, err := messages.DecodeState([]byte(body))
		if err != nil {
			b.Fatal(err)
		}
		if len(st.Workspaces) != workspaces || len(st.Sessions) != workspaces || len(st.Listeners) != perLogin*workspaces {
			b.Fatalf("the console's state names %d workspaces, %d sessions, %d listeners", len(st.Workspaces), len(st.Sessions), len(st.Listeners))
		}
	}
	_, code, ctype, body := runConsoleCGI(b, ocx, n.agents, n.srv.ExtRoot, env)
	check(code, ctype, body)
	if cli := n.must("", "status", "--json").stdout; cli != body {
		b.Fatalf("the console's state differs from ocx status --json:\n%s\n---\n%s", body, cli)
	}

	var console, status, start []time.Duration
	b.ResetTimer()
	for i := 0; i < samples*b.N; i++ {
		d, code, ctype, body := runConsoleCGI(b, ocx, n.agents, n.srv.ExtRoot, env)
		check(code, ctype, body)
		console = append(console, d)
		status = append(status, timedRun(b, ocx, n.agents, "status", "--json"))
		start = append(start, timedRun(b, ocx, n.agents, "help"))
	}
	b.StopTimer()
	c50, cmean := reportTimes(b, "console", console)
	s50, smean := reportTimes(b, "status", status)
	b.ReportMetric(float64(c50)/float64(s50), "console/status-p50")
	b.ReportMetric(float64(cmean)/float64(smean), "console/status-mean")
	reportTimes(b, "ocx-start", start)
	b.ReportMetric(0, "ns/op")
	if got := daemon.count(0); got != 0 {
		b.Fatalf("%d lines were handed to the daemon", got)
	}

	// The same, answered by the real daemon from its live record (D66):
	// the stand-in gives way, the daemon finds the sessions running at its
	// start, and the console and the command ask it on its socket.
	lock.Release()
	daemon.r.Close()
	<-daemon.done
	if err := froot.Remove(layout.Pipe()); err != nil {
		b.Fatal(err)
	}
	// OCX_BENCH_PROFILE=DIR keeps the daemon's CPU profile there.
	var flags []string
	if prof := os.Getenv("OCX_BENCH_PROFILE"); prof != "" {
		flags = append(flags, "--cpu-profile", filepath.Join(prof, "ocxd-state.prof"))
	}
	startDaemon(b, n, filepath.Join(root, "current", "ocxd"), flags...)
	n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
	r, err := nodesock.Ask(ctx, layout, wire.NewAsk(wire.AskStatus), 10*time.Second)
	if err != nil {
		b.Fatalf("the daemon's status: %v\nocxd.log:\n%s", err, n.daemonLog())
	}
	if st := replyState(b, r); len(st.Workspaces) != workspaces || len(st.Sessions) != workspaces {
		b.Fatalf("the daemon's status holds %d workspaces and %d sessions, want %d\nocxd.log:\n%s", len(st.Workspaces), len(st.Sessions), workspaces, n.daemonLog())
	}
	if prof := os.Getenv("OCX_BENCH_PROFILE"); prof != "" {
		os.WriteFile(filepath.Join(prof, "status-reply.json"), r.StateDoc, 0o644)
	}
	// The console's entry runs the release's ocx-console (D71), which asks
	// the daemon for the page; `ocx console` asks it for the status.
	lean := filepath.Join(root, "current", host.ConsoleProgram)
	console, status = nil, nil
	var asks, pages, entry []time.Duration
	for i := 0; i < samples*b.N; i++ {
		began := time.Now()
		if _, err := nodesock.Ask(ctx, layout, wire.NewAsk(wire.AskStatus), 10*time.Second); err != nil {
			b.Fatal(err)
		}
		asks = append(asks, time.Since(began))
		began = time.Now()
		pa := wire.NewAsk(wire.AskPage)
		pa.Env = env
		if _, err := nodesock.Ask(ctx, layout, pa, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		pages = append(pages, time.Since(began))
		d, code, ctype, body := runConsoleCGI(b, ocx, n.agents, n.srv.ExtRoot, env)
		check(code, ctype, body)
		console = append(console, d)
		d, code, ctype, body = runConsoleCGIWith(b, lean, n.agents, n.srv.ExtRoot, env)
		check(code, ctype, body)
		entry = append(entry, d)
		status = append(status, timedRun(b, ocx, n.agents, "status", "--json"))
	}
	bc50, _ := reportTimes(b, "console-by-daemon", console)
	reportTimes(b, "entry-by-daemon", entry)
	reportTimes(b, "status-by-daemon", status)
	reportTimes(b, "ask-of-daemon", asks)
	reportTimes(b, "page-ask-of-daemon", pages)
	b.ReportMetric(float64(bc50)/float64(c50), "by-daemon/console-p50")
}

// consoleNodeOn is consoleNode on a release root of the benchmark's own.
func consoleNodeOn(t testing.TB, releaseRoot string) *testNode {
	t.Helper()
	extroot := filepath.Join(t.TempDir(), "ext")
	if err := os.MkdirAll(extroot, 0o755); err != nil {
		t.Fatal(err)
	}
	users := []harness.User{{Login: person, Password: personPW, Caps: "cghijnorwz234"}}
	srv := harness.StartServer(t, harness.Options{Users: users, ExtRoot: extroot})
	n := &testNode{t: t, ctx: context.Background(), srv: srv, agents: filepath.Join(t.TempDir(), "agents"),
		pw: map[string]string{srv.AdminLogin: srv.AdminPassword, person: personPW}}
	t.Cleanup(n.shutdown)
	n.must("", "init", "--project", "demo="+srv.Repo+","+srv.URL, "--release", releaseRoot, "--extroot", extroot)
	return n
}

// benchSandbox is the shape of the node's default sandbox (node's
// DefaultSandbox) for a workspace directory and a release.
func benchSandbox(wsDir, release string) messages.Sandbox {
	sb := messages.Sandbox{Network: false, ReadWrite: []string{wsDir}, Homes: []string{}}
	for _, p := range []string{"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc/ssl", "/etc/resolv.conf", "/etc/hosts", "/etc/passwd", "/etc/group"} {
		if _, err := os.Lstat(p); err == nil {
			sb.ReadOnly = append(sb.ReadOnly, p)
		}
	}
	sb.ReadOnly = append(sb.ReadOnly, release)
	sb.Path = []string{release, "/usr/local/bin", "/usr/bin", "/bin"}
	return sb
}

// pushDrafts pushes posts as c's login, 25 to a request, and returns their
// hashes in order.
func pushDrafts(b *testing.B, c *fossilio.Client, drafts []fossilio.PostDraft) []string {
	b.Helper()
	var hashes []string
	for len(drafts) > 0 {
		batch := drafts[:min(25, len(drafts))]
		drafts = drafts[len(batch):]
		var arts [][]byte
		for _, d := range batch {
			d.Date = time.Now().UTC()
			a, err := d.Bytes()
			if err != nil {
				b.Fatal(err)
			}
			arts = append(arts, a)
		}
		hs, err := c.PushAll(context.Background(), arts...)
		if err != nil {
			b.Fatalf("push as %s: %v", c.Login, err)
		}
		hashes = append(hashes, hs...)
	}
	return hashes
}

// sleeperSource is the state benchmark's session program: it holds its
// workspace's wake pipe open for reading, as a listening session does
// (OCX_BENCH_WAKE names it), and sleeps until it is killed.
const sleeperSource = `package main

import (
	"os"
	"syscall"
	"time"
)

func main() {
	if wake := os.Getenv("OCX_BENCH_WAKE"); wake != "" {
		if _, err := syscall.Open(wake, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0); err != nil {
			os.Exit(1)
		}
	}
	for {
		time.Sleep(time.Hour)
	}
}
`

// buildProgram builds a one-file static Go program into a temporary
// directory and returns its path.
func buildProgram(b testing.TB, name, source string) string {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(source), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+name+"\n\ngo 1.21\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build %s: %v\n%s", name, err, o)
	}
	return out
}

// startSessions starts the session processes and ends each, by its PID, at
// the benchmark's end (SIGKILL, then wait). They are started from one
// locked thread with Pdeathsig, as the harness starts its server, so that
// none outlives a benchmark binary that dies without its cleanups; that
// thread ends only after they have been waited for.
func startSessions(b *testing.B, cmds []*exec.Cmd) {
	b.Helper()
	started := make(chan error, 1)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		defer close(done)
		var running []*exec.Cmd
		end := func() {
			for _, c := range running {
				c.Process.Kill()
				c.Wait()
			}
		}
		for _, c := range cmds {
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := c.Start(); err != nil {
				end()
				started <- fmt.Errorf("start %q: %w", c.Args, err)
				return
			}
			running = append(running, c)
		}
		started <- nil
		<-stop
		end()
	}()
	if err := <-started; err != nil {
		<-done
		b.Fatal(err)
	}
	b.Cleanup(func() { close(stop); <-done })
}

// fossilEnvFor is the environment Fossil gives the console for a GET of
// ext/console/PATH by viewer v: for that one request the console's entry
// is a script that writes its environment to a file, then runs the
// console as the entry does.
func fossilEnvFor(b testing.TB, n *testNode, v *viewer, path string) []string {
	b.Helper()
	entry := filepath.Join(n.srv.ExtRoot, "console")
	orig, err := os.ReadFile(entry)
	if err != nil {
		b.Fatal(err)
	}
	dump := filepath.Join(b.TempDir(), "env")
	_, rest, _ := strings.Cut(string(orig), "\n")
	writeScript(b, entry, "#!/bin/sh\n/usr/bin/env -0 >"+shellQuote(dump)+"\n"+rest)
	code, body := v.get(path)
	writeScript(b, entry, string(orig))
	if code != http.StatusOK {
		b.Fatalf("GET ext/console/%s: %d\n%s", path, code, body)
	}
	data, err := os.ReadFile(dump)
	if err != nil {
		b.Fatal(err)
	}
	var env []string
	for _, kv := range strings.Split(strings.TrimRight(string(data), "\x00"), "\x00") {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "PWD", "OLDPWD", "SHLVL", "_": // the shell's, not Fossil's
		default:
			env = append(env, kv)
		}
	}
	return env
}

func hasEnv(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}

// writeScript replaces an executable script whole.
func writeScript(b testing.TB, path, text string) {
	b.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
}

// timedGet times one GET, its body read whole.
func timedGet(b *testing.B, c *http.Client, url string) (time.Duration, int, string) {
	b.Helper()
	t0 := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	return d, resp.StatusCode, string(body)
}

// runConsoleCGI times one run of `ocx console` as Fossil runs it (its
// entry execs it), with Fossil's environment env and no request body, and
// returns its reply's status, Content-Type and body.
func runConsoleCGI(b testing.TB, ocx, agents, dir string, env []string) (time.Duration, int, string, string) {
	b.Helper()
	return runCGI(b, dir, env, ocx, "console", "--agents", agents)
}

// runConsoleCGIWith is runConsoleCGI for the release's ocx-console (D71).
func runConsoleCGIWith(b testing.TB, lean, agents, dir string, env []string) (time.Duration, int, string, string) {
	b.Helper()
	return runCGI(b, dir, env, lean, "--agents", agents)
}

// runCGI times one run of a CGI program with Fossil's environment env
// and no request body, and returns its reply's status, Content-Type and
// body.
func runCGI(b testing.TB, dir string, env []string, argv ...string) (time.Duration, int, string, string) {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		b.Fatalf("%s: %v\n%s%s", argv[0], err, out.String(), errb.String())
	}
	head, body, ok := strings.Cut(out.String(), "\r\n\r\n")
	if !ok {
		b.Fatalf("%s: no CGI reply:\n%s", argv[0], out.String())
	}
	code, ctype := 0, ""
	for _, line := range strings.Split(head, "\r\n") {
		k, val, _ := strings.Cut(line, ": ")
		switch k {
		case "Status":
			code, _ = strconv.Atoi(strings.Fields(val)[0])
		case "Content-Type":
			ctype = val
		}
	}
	return d, code, ctype, body
}

// timedRun times one run of the release's ocx as the tests run it.
func timedRun(b *testing.B, ocx, agents string, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(ocx, args...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + agents, "LANG=C.UTF-8", "OCX_AGENTS=" + agents}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		b.Fatalf("ocx %v: %v\n%s", args, err, errb.String())
	}
	return d
}

// reportTimes reports the p50 and the mean of per-request times, in ms.
func reportTimes(b *testing.B, name string, s []time.Duration) (p50, mean time.Duration) {
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	if len(s) > 0 {
		mean = sum / time.Duration(len(s))
	}
	p50 = percentile(s, 50)
	b.ReportMetric(float64(p50.Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(mean.Microseconds())/1000, name+"-mean-ms")
	return p50, mean
}
