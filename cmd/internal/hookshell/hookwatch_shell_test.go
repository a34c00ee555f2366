package hookshell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/actors/hookwatch"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
)

// shellNode is a real fossil server over a repository in WAL mode (as `ocx
// init` leaves the node's), whose own backoffice never runs, with a hook
// standing in for OCX's: it logs its start and end, and moves its mark to
// the newest receipt; it sleeps 3 s first while the file "slow" exists.
type shellNode struct {
	t      *testing.T
	srv    *harness.Server
	agents string
	log    string // the stand-in hook's log
	client *fossilio.Client
	logs   *lockedLog
	w      *Watch
}

// lockedLog is a slog handler's output, safe to read while the watch writes.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newShellNode(t *testing.T, every time.Duration, noEvents bool) *shellNode {
	return newShellNodeOwn(t, every, noEvents, nil)
}

// newShellNodeOwn is newShellNode whose installed hook, with own set, is
// OCX's own command line for its agents root (an ocx-hook that is not
// there, so that only own can do its work), done by own.
func newShellNodeOwn(t *testing.T, every time.Duration, noEvents bool, own func(ctx context.Context, repo string) error) *shellNode {
	srv := harness.StartServer(t, harness.Options{
		Settings: map[string]string{"backoffice-disable": "1"},
		Setup: func(s *harness.Server) error {
			_, err := s.Fossil("sql", "-R", s.Repo, "PRAGMA journal_mode=WAL")
			return err
		},
	})
	agents := t.TempDir()
	layout, err := host.NewLayout(agents)
	if err != nil {
		t.Fatal(err)
	}
	n := &shellNode{t: t, srv: srv, agents: agents, log: filepath.Join(agents, "hook.log"), logs: &lockedLog{}}
	script := filepath.Join(agents, "hook.sh")
	mark := layout.HookMark("demo")
	body := fmt.Sprintf(`#!/bin/sh
echo "start $$" >> %[1]q
if [ -e %[2]q ]; then sleep 3; fi
n=$(%[3]q sql -R "$1" "SELECT max(rcvid) FROM rcvfrom" 2>/dev/null)
printf '%%s\n' "$n" > %[4]q
echo "done $n" >> %[1]q
`, n.log, filepath.Join(agents, "slow"), harness.FossilPath, mark)
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	command := "/bin/sh " + script + " %R"
	if own != nil {
		command = "'" + filepath.Join(agents, "release", host.HookProgram) + "' --agents '" + agents + "' --repo %R"
	}
	if err := (&fossilio.Admin{Repository: srv.Repo}).InstallHook(ctx, command); err != nil {
		t.Fatal(err)
	}
	repo, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	newest, err := repo.NewestReceipt(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mark, host.HookMarkContent(newest), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := unixhost.OpenRoot(agents)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	n.client = &fossilio.Client{URL: srv.URL, Login: srv.AdminLogin, Password: srv.AdminPassword, ProjectCode: srv.ProjectCode}
	n.w = &Watch{layout: layout, root: root, projects: map[string]string{"demo": srv.Repo}, fossil: harness.FossilPath,
		repo:     func(string) (*fossilio.Repo, error) { return repo, nil },
		log:      slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		noEvents: noEvents,
		own:      own,
		times:    hookwatch.DefaultTimes(every)}
	n.w.Start()
	t.Cleanup(n.w.Release)
	return n
}

// post writes a post over sync, as a person's client would, with no
// backoffice after it: only the watch can run the hook for it. It returns
// the post's receipt.
func (n *shellNode) post(text string) int64 {
	n.t.Helper()
	if _, err := n.client.NewThread(context.Background(), "a post", text); err != nil {
		n.t.Fatal(err)
	}
	out, err := n.srv.Fossil("sql", "-R", n.srv.Repo, "SELECT max(rcvid) FROM rcvfrom")
	if err != nil {
		n.t.Fatal(err)
	}
	fields := strings.Fields(out)
	r, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil {
		n.t.Fatalf("the newest receipt: %q", out)
	}
	return r
}

func (n *shellNode) hookLog() string {
	b, _ := os.ReadFile(n.log)
	return string(b)
}

// waitHook waits (at most 60 s, to fail rather than hang) for the hook's log
// to hold s.
func (n *shellNode) waitHook(s string) {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(n.hookLog(), s) {
		if time.Now().After(deadline) {
			n.t.Fatalf("no %q in the hook's log in 60 s:\n%s\nthe watch's log:\n%s", s, n.hookLog(), n.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLog waits (at most 60 s) for the watch's log to hold s.
func (n *shellNode) waitLog(s string) {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(n.logs.String(), s) {
		if time.Now().After(deadline) {
			n.t.Fatalf("no %q in the watch's log in 60 s:\n%s", s, n.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHookWatchFollowsWrites: with no periodic look for an hour, a post the
// server's backoffice never hands the hook gets a run anyway, woken by the
// repository's write; the run's end is logged with the mark.
func TestHookWatchFollowsWrites(t *testing.T) {
	n := newShellNode(t, time.Hour, false)
	start := time.Now()
	r := n.post("hello")
	n.waitHook(fmt.Sprintf("done %d", r))
	took := time.Since(start)
	// The run's end is logged with the mark, once the hook has exited.
	n.waitLog(fmt.Sprintf(`msg="the wake hook the daemon ran is done" project=demo mark=%d`, r))
	if logs := n.logs.String(); !strings.Contains(logs, "running it") || !strings.Contains(logs, "woken=write") {
		t.Errorf("the watch did not say a write woke it:\n%s", logs)
	}
	if got := strings.Count(n.hookLog(), "start"); got != 1 {
		t.Errorf("%d runs for one post:\n%s", got, n.hookLog())
	}
	t.Logf("post to the hook's end: %s", took)
}

// TestHookWatchFallsBackToLooks: without the file events, the looks every
// Every still find the post, and run the hook a Settle later.
func TestHookWatchFallsBackToLooks(t *testing.T) {
	n := newShellNode(t, 200*time.Millisecond, true)
	r := n.post("hello")
	n.waitHook(fmt.Sprintf("done %d", r))
	if logs := n.logs.String(); !strings.Contains(logs, "woken=look") {
		t.Errorf("the run was not a look's:\n%s", logs)
	}
}

// TestHookWatchPauseAndStop: a pause waits for the run under way; a write
// during the pause is looked at on resuming; a stop ends a run under way
// (its process group) and returns.
func TestHookWatchPauseAndStop(t *testing.T) {
	n := newShellNode(t, time.Hour, false)
	if err := os.WriteFile(filepath.Join(n.agents, "slow"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := n.post("slow")
	n.waitHook("start")
	n.w.Pause()
	if !strings.Contains(n.hookLog(), fmt.Sprintf("done %d", r)) {
		t.Fatalf("the pause returned before the run under way ended:\n%s", n.hookLog())
	}
	if err := os.Remove(filepath.Join(n.agents, "slow")); err != nil {
		t.Fatal(err)
	}
	r2 := n.post("while paused")
	n.w.Resume()
	n.waitHook(fmt.Sprintf("done %d", r2))

	if err := os.WriteFile(filepath.Join(n.agents, "slow"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	runs := strings.Count(n.hookLog(), "start")
	n.post("stopped")
	deadline := time.Now().Add(60 * time.Second)
	for strings.Count(n.hookLog(), "start") == runs {
		if time.Now().After(deadline) {
			t.Fatalf("no run for the third post:\n%s", n.hookLog())
		}
		time.Sleep(5 * time.Millisecond)
	}
	begun := time.Now()
	n.w.Stop()
	if took := time.Since(begun); took > 2*time.Second {
		t.Errorf("the stop took %s with a run under way (it sleeps 3 s)", took)
	}
	if got := strings.Count(n.hookLog(), "done"); got != 2 {
		t.Errorf("the run under way at the stop was not ended (%d runs done):\n%s", got, n.hookLog())
	}
}

// TestHookWatchDoesItsOwnHookInTheDaemon: with OCX's own command
// installed, the watch's run for a post is the daemon's own work (own,
// given the repository), with no /bin/sh and no ocx-hook (the program it
// names is not there: a run of it would fail); when own refuses, the
// command is run as Fossil runs it, and its failure is logged.
func TestHookWatchDoesItsOwnHookInTheDaemon(t *testing.T) {
	var mu sync.Mutex
	var repos []string
	refuse, mark := false, ""
	n := newShellNodeOwn(t, time.Hour, false, func(ctx context.Context, repo string) error {
		mu.Lock()
		defer mu.Unlock()
		repos = append(repos, repo)
		if refuse {
			return errors.New("node.json changed since the daemon read it")
		}
		// The work's visible part: the mark moved to the newest receipt.
		out, err := exec.CommandContext(ctx, harness.FossilPath, "sql", "-R", repo, "SELECT max(rcvid) FROM rcvfrom").Output()
		if err != nil {
			return err
		}
		return os.WriteFile(mark, []byte(strings.TrimSpace(string(out))+"\n"), 0o600)
	})
	layout, err := host.NewLayout(n.agents)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	mark = layout.HookMark("demo")
	mu.Unlock()

	r := n.post("done in the daemon")
	n.waitLog(fmt.Sprintf(`msg="the wake hook the daemon ran is done" project=demo mark=%d`, r))
	mu.Lock()
	got := slices.Clone(repos)
	refuse = true
	mu.Unlock()
	if len(got) != 1 || got[0] != n.srv.Repo {
		t.Errorf("the daemon's own work was asked for %q, want once for %s", got, n.srv.Repo)
	}
	if strings.Contains(n.logs.String(), "failed") {
		t.Errorf("the watch ran the command, or its run failed:\n%s", n.logs.String())
	}

	// Refused: the command itself is run, and fails (no ocx-hook there).
	n.post("refused")
	n.waitLog(`msg="the daemon did not do the hook's work itself; running the command"`)
	n.waitLog(`msg="the wake hook the daemon ran failed" project=demo`)
}

// ownCommand knows OCX's own command lines, as `ocx hook install` writes
// them and bare, and nothing else: another agents root, another program,
// more words, anything a shell would expand or join.
func TestOwnCommand(t *testing.T) {
	for _, c := range []struct {
		command, agents string
		want            bool
	}{
		{`'/opt/ocx/current/ocx-hook' --agents '/srv/agents' --repo %R`, "/srv/agents", true},
		{`/opt/ocx/current/ocx-hook --agents /srv/agents --repo %R`, "/srv/agents", true},
		{`'/opt/ocx/current/ocx' hook --agents '/srv/agents' --repo %R`, "/srv/agents", true},
		{`'/opt/o'\''cx/ocx-hook' --agents '/srv/it'\''s' --repo %R`, "/srv/it's", true},
		{`'/opt/ocx/current/ocx-hook' --agents '/srv/agents' --repo %R`, "/srv/other", false},
		{`'/opt/ocx/current/ocx-hook' --agents '/srv/agents' --repo %R; rm -rf /`, "/srv/agents", false},
		{`'/opt/ocx/current/ocx-hook' --agents '/srv/agents' --repo %R --more`, "/srv/agents", false},
		{`'/opt/ocx/current/ocx' status --agents '/srv/agents' --repo %R`, "/srv/agents", false},
		{`ocx-hook --agents '/srv/agents' --repo %R`, "/srv/agents", false},
		{`"/opt/ocx/ocx-hook" --agents /srv/agents --repo %R`, "/srv/agents", false},
		{`/opt/ocx/ocx-hook --agents $HOME --repo %R`, "$HOME", false},
		{`/bin/sh /srv/hook.sh %R`, "/srv/agents", false},
		{`'/opt/ocx/ocx-hook --agents /srv/agents --repo %R`, "/srv/agents", false},
		{``, "/srv/agents", false},
	} {
		if got := ownCommand(c.command, c.agents); got != c.want {
			t.Errorf("ownCommand(%q, %q) = %v, want %v", c.command, c.agents, got, c.want)
		}
	}
}

// AfterWrites takes the hook's work after the daemon's own writes only for
// a repository whose one hook is OCX's own command for its agents root:
// not for another command, not with a hook of someone else's beside it
// (its backoffice runs them all), not for another agents root.
func TestAfterWritesTakesOnlyItsOwnHook(t *testing.T) {
	srv := harness.StartServer(t, harness.Options{})
	agents := t.TempDir()
	ctx := context.Background()
	repo, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	x := &noderepos.Index{Project: "demo", Path: srv.Repo, Repo: repo}
	var worked []string
	work := func(_ context.Context, repo string) error { worked = append(worked, repo); return nil }
	own := "'/opt/ocx/current/" + host.HookProgram + "' --agents '" + agents + "' --repo %R"
	install := func(command string) {
		t.Helper()
		if err := (&fossilio.Admin{Repository: srv.Repo}).InstallHook(ctx, command); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, root string, want bool) {
		t.Helper()
		worked = nil
		done, err := AfterWrites(root, work)(ctx, x)
		if err != nil || done != want || (len(worked) == 1) != want {
			t.Errorf("%s: done %v (%v), worked for %q; want done %v", what, done, err, worked, want)
		}
	}
	check("no hook installed", agents, false)
	install(own)
	check("OCX's own command", agents, true)
	check("another agents root's", t.TempDir(), false)
	install("/bin/sh /srv/hook.sh %R")
	check("another command", agents, false)
	install(own)
	out, err := srv.Fossil("sql", "-R", srv.Repo, "SELECT value FROM config WHERE name='hooks'")
	if err != nil {
		t.Fatal(err)
	}
	beside := strings.TrimSuffix(strings.TrimSpace(out), "]") + `,{"type":"after-receive","cmdline":"/bin/true","seq":2}]`
	if _, err := srv.Fossil("sql", "-R", srv.Repo, "UPDATE config SET value="+sqlQuote(beside)+" WHERE name='hooks'"); err != nil {
		t.Fatal(err)
	}
	check("a hook of someone else's beside it", agents, false)
}

// sqlQuote quotes s as an SQL string literal.
func sqlQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
