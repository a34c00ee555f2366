package workspaces_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/nodetest"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// echoOnce is a mechanical session's command: it answers a post with its
// first line.
const echoOnce = `read -r line; printf 'echo: %s\n' "$line"`

// startSession starts a mechanical session of lifetime in login's workspace
// on demo, run by the real daemon, and returns its launch note.
func (f *fix) startSession(login, lifetime string) string {
	f.T.Helper()
	a := f.OK(workspaces.Of(f.N).SessionStart(f.Ctx, workspaces.SessionStartInput{Workspace: login + "/demo", Kind: "mechanical", Lifetime: lifetime,
		Hears: []string{person}, Command: []string{"/bin/sh", "-c", echoOnce}}))
	return *a.Result
}

// stopSession stops login's session on demo and waits for the end note of
// its launch.
func (f *fix) stopSession(login, launch string) {
	f.T.Helper()
	f.OK(workspaces.Of(f.N).SessionStop(f.Ctx, login+"/demo", false))
	f.awaitEnd(launch)
}

// awaitEnd waits for the daemon's end note of launch.
func (f *fix) awaitEnd(launch string) {
	f.T.Helper()
	f.WaitFor("the end note of "+launch[:10], 30*time.Second, func() bool {
		end, err := workspaces.Of(f.N).Ended(f.Ctx, "demo", launch)
		if err != nil {
			f.T.Fatal(err)
		}
		return end != nil
	})
}

// notes lists the notes of kind T on the record, with the posts holding
// them.
func notes[T messages.Note](f *fix) map[string]T {
	f.T.Helper()
	out := map[string]T{}
	for _, i := range f.Artifacts() {
		if i.Kind != fossilio.KindPost {
			continue
		}
		p := f.Post(i.Hash)
		if n, err := messages.ReadPost([]byte(p.Text)); err == nil {
			if t, ok := n.(T); ok {
				out[i.Hash] = t
			}
		}
	}
	return out
}

// endsOf counts the end notes of launch on the record.
func endsOf(f *fix, launch string) int {
	n := 0
	for _, e := range notes[*messages.EndNote](f) {
		if e.Launch == launch {
			n++
		}
	}
	return n
}

// outcome finds workspace key's session in a restart's answer.
func outcome(t *testing.T, a *node.Answer, key string) node.SessionOutcome {
	t.Helper()
	for _, o := range a.Sessions {
		if o.Workspace == key {
			return o
		}
	}
	t.Fatalf("the restart's answer names no session of %s: %v\nlog:\n%s", key, a.Sessions, strings.Join(a.Log, "\n"))
	return node.SessionOutcome{}
}

// TestRestartStoppedSession is seed 002's "restart stopped sessions": a
// stopped `stays` session, listed by a dry run that writes nothing, is
// launched again on the current release by the caller once the list is
// confirmed; pressing again leaves it alone, saying it runs; a list shown
// before that restart is stale, and confirming it restarts nothing.
func TestRestartStoppedSession(t *testing.T) {
	f := newFixDaemon(t)
	f.AddWorkspace()
	key := agent + "/demo"
	first := f.startSession(agent, "stays")
	f.stopSession(agent, first)

	before := f.Posts()
	dry := f.OK(workspaces.Of(f.N).SessionRestart(f.Ctx, workspaces.SessionRestartInput{Release: messages.ReleaseCurrent, DryRun: true}))
	o := outcome(t, dry, key)
	if o.Outcome != node.OutcomeWouldRestart || o.Start != first || o.Release != messages.ReleaseCurrent || o.Launch != "" || !strings.Contains(o.Why, "it ended") {
		t.Errorf("the dry run's %s: %+v", key, o)
	}
	if got := f.Posts(); got != before {
		t.Errorf("the dry run wrote %d posts", got-before)
	}

	a := f.OK(workspaces.Of(f.N).SessionRestart(f.Ctx, workspaces.SessionRestartInput{Release: messages.ReleaseCurrent, Only: []node.RestartPick{o.Pick()}}))
	o = outcome(t, a, key)
	if o.Outcome != node.OutcomeRestarted || o.Launch == "" || !strings.Contains(o.Why, "the daemon started it again: pid") {
		t.Fatalf("the restart's %s: %+v", key, o)
	}
	launch, ok := notes[*messages.LaunchNote](f)[o.Launch]
	if !ok || launch.Release != messages.ReleaseCurrent || launch.Login != agent {
		t.Errorf("the restart's launch note %s: %+v", o.Launch, launch)
	}
	if p := f.Post(o.Launch); p.Sender != f.Srv.AdminLogin {
		t.Errorf("the restart's launch note was sent by %q, not the caller %q", p.Sender, f.Srv.AdminLogin)
	}
	if got := f.Serving(); len(got) != 1 || got[0] != key {
		t.Errorf("after the restart, serving %v", got)
	}

	// Pressing twice restarts once: the second press leaves it alone.
	before = f.Posts()
	again := f.OK(workspaces.Of(f.N).SessionRestart(f.Ctx, workspaces.SessionRestartInput{Release: messages.ReleaseCurrent}))
	if o2 := outcome(t, again, key); o2.Outcome != node.OutcomeLeftAlone || !strings.Contains(o2.Why, "it runs") {
		t.Errorf("the second press's %s: %+v", key, o2)
	}
	// The list shown before the restart is stale now.
	stale := f.OK(workspaces.Of(f.N).SessionRestart(f.Ctx, workspaces.SessionRestartInput{Release: messages.ReleaseCurrent, Only: []node.RestartPick{{Workspace: key, Start: first}}}))
	if o3 := outcome(t, stale, key); o3.Outcome != node.OutcomeLeftAlone || !strings.Contains(o3.Why, "not the "+first[:10]+" the list showed") {
		t.Errorf("confirming a stale list: %+v", o3)
	}
	if got := f.Posts(); got != before {
		t.Errorf("the presses that restarted nothing wrote %d posts", got-before)
	}
	if n := len(notes[*messages.LaunchNote](f)); n != 2 {
		t.Errorf("%d launch notes on the record, want 2 (the start and one restart)", n)
	}
	f.Refused(workspaces.Of(f.N).SessionRestart(f.Ctx, workspaces.SessionRestartInput{Release: messages.ReleasePrevious}), "previous")
}

// TestRestartLeavesAlone: a `completes` session, a session whose workspace
// was terminated, one whose login was withdrawn and one that runs are left
// alone by a restart, each saying why, and nothing is written.
func TestRestartLeavesAlone(t *testing.T) {
	f := newFixDaemon(t)
	logins := map[string]string{"completes": "agent-2", "terminated": "agent-3", "withdrawn": "agent-4", "running": "agent-5"}
	launches := map[string]string{}
	for _, why := range []string{"completes", "terminated", "withdrawn", "running"} {
		login := logins[why]
		f.OK(f.N.LoginAdd(f.Ctx, login, false))
		f.OK(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: login, Project: "demo", Branch: "trunk"}))
		lifetime := "stays"
		if why == "completes" {
			lifetime = "completes"
		}
		launches[why] = f.startSession(login, lifetime)
		switch why {
		case "running":
		case "completes":
			// A job reports its result and ends by itself (D56).
			f.awaitEnd(launches[why])
		default:
			f.stopSession(login, launches[why])
		}
	}
	f.OK(workspaces.Of(f.N).WorkspaceTerminate(f.Ctx, logins["terminated"]+"/demo", "", false))
	f.OK(f.N.LoginWithdraw(f.Ctx, logins["withdrawn"], false))

	before := f.Posts()
	a := f.OK(workspaces.Of(f.N).SessionRestart(f.Ctx, workspaces.SessionRestartInput{Release: messages.ReleaseCurrent}))
	for why, want := range map[string]string{
		"completes":  "a completes session is never restarted",
		"terminated": "its workspace was terminated",
		"withdrawn":  "its login agent-4 was withdrawn from demo",
		"running":    "it runs: workspace agent-5/demo is named by",
	} {
		o := outcome(t, a, logins[why]+"/demo")
		if o.Outcome != node.OutcomeLeftAlone || o.Start != launches[why] || !strings.Contains(o.Why, want) {
			t.Errorf("%s: %+v, want left alone saying %q", why, o, want)
		}
	}
	if got := f.Posts(); got != before {
		t.Errorf("a restart that restarted nothing wrote %d posts", got-before)
	}
}

// TestSessionSecondStartRestarts is seed 002's "start a session": a second
// start in a workspace whose session the daemon runs stops that session,
// waits for its end note, then launches the new one.
func TestSessionSecondStartRestarts(t *testing.T) {
	f := newFixDaemon(t)
	f.AddWorkspace()
	first := f.startSession(agent, "stays")
	a := f.OK(workspaces.Of(f.N).SessionStart(f.Ctx, workspaces.SessionStartInput{Workspace: agent + "/demo", Kind: "mechanical", Lifetime: "stays",
		Hears: []string{person}, Command: []string{"/bin/sh", "-c", echoOnce}}))
	second := *a.Result
	log := strings.Join(a.Log, "\n")
	if !strings.Contains(log, "a second start restarts it") || !strings.Contains(log, "the session of launch "+first+" ended") {
		t.Errorf("the second start's log does not say it stopped the first session and saw it end:\n%s", log)
	}
	if n := endsOf(f, first); n != 1 {
		t.Errorf("the first launch has %d end notes, want 1", n)
	}
	if n := endsOf(f, second); n != 0 {
		t.Errorf("the second launch has %d end notes while it runs", n)
	}
	st, err := f.N.Status(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sessions) != 1 || st.Sessions[0].Launch != second || st.Sessions[0].StartedBy != messages.OriginDaemon {
		t.Errorf("after the second start, the sessions: %v", st.Sessions)
	}
}

// TestSessionSecondStartRefusedAtTerminal: a session at a terminal
// (`workspace run`) is never stopped by a second start, which is refused
// naming its PID, and writes nothing.
func TestSessionSecondStartRefusedAtTerminal(t *testing.T) {
	f := newFixDaemon(t)
	f.AddWorkspace()
	// The definition `workspace run` runs: a session the daemon ran, ended.
	f.stopSession(agent, f.startSession(agent, "stays"))

	cmd := exec.Command(filepath.Join(nodetest.ReleaseDir(t), "workspace"), "run", agent+"/demo", "--root", f.Agents)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		stdin.Close()
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-done
		}
	})
	f.WaitFor("`workspace run` to hold the workspace", 20*time.Second, func() bool {
		st, err := f.N.Status(f.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(st.Sessions) == 1 && st.Sessions[0].PID == pid && st.Sessions[0].StartedBy == messages.OriginTerminal
	})

	before := f.Posts()
	in := workspaces.SessionStartInput{Workspace: agent + "/demo", Kind: "mechanical", Lifetime: "stays", Hears: []string{person}, Command: []string{"/bin/sh", "-c", echoOnce}}
	in.DryRun = true
	f.Refused(workspaces.Of(f.N).SessionStart(f.Ctx, in), "a session at a terminal holds workspace agent-1/demo", "pid "+strconv.Itoa(pid), "nothing written")
	in.DryRun = false
	f.Refused(workspaces.Of(f.N).SessionStart(f.Ctx, in), "a session at a terminal holds workspace agent-1/demo", "pid "+strconv.Itoa(pid), "`"+cmd.Path+" run agent-1/demo", "nothing written")
	if got := f.Posts(); got != before {
		t.Errorf("a refused start wrote %d posts", got-before)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		t.Errorf("the terminal session is gone after a refused start: %v\n%s", err, out.String())
	}
}
