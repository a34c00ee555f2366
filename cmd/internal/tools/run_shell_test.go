package tools

import (
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/runhold"
)

// TestRunShellRefusal: each state of a run, and whether a shell may be
// opened in it (D100): the first refusal in order, naming why.
func TestRunShellRefusal(t *testing.T) {
	const run = "ab12"
	live := RunState{Run: run, Node: "node", State: "started", Started: "s1", InCare: true, Alive: true}
	with := func(f func(*RunState)) RunState { s := live; f(&s); return s }
	for _, c := range []struct {
		name     string
		st       RunState
		confined bool
		want     string
	}{
		{"a live confined run", live, true, ""},
		{"another node's", with(func(s *RunState) { s.Node = "lab-2" }), true, `run: ab12 runs on node "lab-2", not here ("node")`},
		{"another node's, ended", with(func(s *RunState) { s.Node = "lab-2"; s.Ended = "e1" }), true, `runs on node "lab-2"`},
		{"ended", with(func(s *RunState) { s.State, s.Ended, s.Outcome = "ended", "e1", "stopped" }), true, "run: ab12 has ended (stopped, ended e1): its sandbox is gone"},
		{"ended before it started", with(func(s *RunState) { s.State, s.Started, s.Ended, s.Outcome = "ended", "", "e1", "refused" }), true, "has ended (refused"},
		{"waiting", with(func(s *RunState) { s.State, s.Started, s.Manual = "waiting", "", true }), true, "run: ab12 has not started (waiting): there is no sandbox yet"},
		{"not arrived", with(func(s *RunState) { s.State, s.Started = "none", "" }), true, "has not started (none)"},
		{"waiting, unconfined", with(func(s *RunState) { s.State, s.Started = "waiting", "" }), false, "has not started"},
		{"unconfined", live, false, "run: ab12 is not confined (it has no sandbox layer): there is no sandbox to enter"},
		{"not in care", with(func(s *RunState) { s.InCare, s.Alive = false, false }), true, "has no process running on this node (in its care false, its holder alive false)"},
		{"its holder dead", with(func(s *RunState) { s.Alive = false }), true, "its holder alive false"},
	} {
		err := runShellRefusal(c.st, c.confined, "node")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want a refusal naming %q", c.name, err, c.want)
		}
	}
}

// TestRunShellNotes: the notes name the run, who opened the shell, the
// command as typed, its PID, how long it was open and how it ended.
func TestRunShellNotes(t *testing.T) {
	tg := RunShellTarget{Run: "ab12", By: "admin"}
	cmd := []string{"sh", "-c", "echo $HOME; ls"}
	if got, want := RunShellStartNote(tg, "node-1", cmd, 4242),
		"A shell was opened in the sandbox of run ab12 by admin, on node node-1: `sh -c \"echo $HOME; ls\"` (PID 4242 on the host).\n"; got != want {
		t.Errorf("start note\n got %q\nwant %q", got, want)
	}
	for _, c := range []struct {
		end  RunShellEnd
		want string
	}{
		{RunShellEnd{Exit: 0}, "was open 1.5s: it exited 0.\n"},
		{RunShellEnd{Exit: 129, Signal: "SIGHUP", Detached: true}, "it was ended by SIGHUP (exit 129), hung up as Ctrl-] detached it.\n"},
		{RunShellEnd{Exit: 137, Signal: "SIGKILL", RunGone: true}, "it was ended by SIGKILL (exit 137), as the run's sandbox ended.\n"},
	} {
		got := RunShellEndNote(tg, []string{"/bin/sh"}, 1500*time.Millisecond, c.end)
		if !strings.HasPrefix(got, "The shell admin opened in the sandbox of run ab12, `/bin/sh`, ") || !strings.HasSuffix(got, c.want) {
			t.Errorf("end note %q, want it to end %q", got, c.want)
		}
	}
	if got := ShellCommand(nil); len(got) != 1 || got[0] != "/bin/sh" {
		t.Errorf("the default command %q", got)
	}
	if got := quoteCommand([]string{"a", "", "b c", "d\x1be"}); got != `a "" "b c" "d\x1be"` {
		t.Errorf("quoted %s", got)
	}
}

// TestRunShellEnter: what a shell is given comes from the run's spec, as
// its holder started it: the sandbox's uid, gid and capabilities, the
// run's environment, directory, limits and cgroup.
func TestRunShellEnter(t *testing.T) {
	tg := RunShellTarget{Init: 77, Spec: runhold.Spec{Command: []string{"claude"}, Env: []string{"HOME=/w", "PATH=/bin"}, Dir: "/w/tree",
		Sandbox: &host.RunSandbox{UID: 1000, GID: 1001, Capabilities: []string{"CAP_NET_BIND_SERVICE"}},
		Limits:  host.RunLimits{CPU: 60, Processes: 40}, Cgroup: "ocx/run-ab12"}}
	e := tg.Enter([]string{"/bin/sh"}, "/rel/ocx", true)
	if e.Init != 77 || e.Exe != "/rel/ocx" || e.Cgroup != "ocx/run-ab12" || e.Limits.CPU != 60 || e.Limits.Processes != 40 {
		t.Errorf("enter %+v", e)
	}
	s := e.Spec
	if s.UID != 1000 || s.GID != 1001 || s.Dir != "/w/tree" || strings.Join(s.Env, " ") != "HOME=/w PATH=/bin" ||
		strings.Join(s.Command, " ") != "/bin/sh" || !s.Terminal || strings.Join(s.Capabilities, " ") != "CAP_NET_BIND_SERVICE" {
		t.Errorf("spec %+v", s)
	}
}
