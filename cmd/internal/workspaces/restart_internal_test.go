package workspaces

import (
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// TestDecideRestart is the restart's rule (D33), fact by fact: only a
// `stays` session whose start counts and ended, in a workspace on the host
// that no process names and that was not terminated, with its login's
// account, is launched again; a start without an end note is in flight,
// unless it was launched before the host booted.
func TestDecideRestart(t *testing.T) {
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	start := strings.Repeat("a", 64)
	code := 0
	ended := &messages.EndNote{Status: messages.EndExited, ExitCode: &code}
	boot := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	stays := record.Verdict{Spec: &protocol.LaunchSpec{Lifetime: messages.Stays}}
	good := restartFacts{Key: k, Start: start, Verdict: stays, Caps: "cghijnorz4", OnHost: true,
		Named: host.Verdict{Key: k, Named: host.No}, End: ended, Boot: boot}
	with := func(change func(*restartFacts)) restartFacts {
		f := good
		change(&f)
		return f
	}
	for _, c := range []struct {
		name    string
		f       restartFacts
		restart bool
		why     string
	}{
		{"ended", good, true, "it ended: exited 0"},
		{"as the list showed it", with(func(f *restartFacts) { f.Shown = start }), true, "it ended"},
		{"another start than the list showed", with(func(f *restartFacts) { f.Shown = strings.Repeat("b", 64) }), false, "not the bbbbbbbbbb the list showed"},
		{"terminated", with(func(f *restartFacts) { f.Terminated = strings.Repeat("c", 64) }), false, "its workspace was terminated (cccccccccc)"},
		{"completes", with(func(f *restartFacts) {
			f.Verdict = record.Verdict{Spec: &protocol.LaunchSpec{Lifetime: messages.Completes}}
		}), false, "a completes session is never restarted"},
		{"refused", with(func(f *restartFacts) {
			f.Verdict = record.Verdict{Refuse: &protocol.LaunchRefused{Reason: "its definition does not count"}}
		}), false, "would be refused: its definition does not count"},
		{"ignored", with(func(f *restartFacts) { f.Verdict = record.Verdict{Ignore: "sent by bob"} }), false, "would not count: sent by bob"},
		{"withdrawn", with(func(f *restartFacts) { f.Caps = "" }), false, "its login agent-1 was withdrawn from demo"},
		{"no account", with(func(f *restartFacts) { f.Caps, f.NoAccount = "", true }), false, "has no account on demo"},
		{"not on the host", with(func(f *restartFacts) { f.OnHost = false }), false, "is not on the host"},
		{"running", with(func(f *restartFacts) {
			f.Named = host.Verdict{Key: k, Named: host.Yes, By: []protocol.ProcID{{PID: 42, Start: 7}}}
		}), false, "it runs: workspace agent-1/demo is named by 42@7"},
		{"unknown", with(func(f *restartFacts) { f.Named = host.Verdict{Key: k, Named: host.Unknown, Unsure: []int{9}} }), false, "cannot say whether it runs"},
		{"in flight", with(func(f *restartFacts) { f.End, f.Received = nil, boot.Add(time.Hour) }), false, "has no end note yet: its launch is in flight"},
		{"in flight, boot unknown", with(func(f *restartFacts) { f.End, f.Received, f.Boot = nil, boot.Add(-time.Hour), time.Time{} }), false, "in flight"},
		{"down with the host", with(func(f *restartFacts) { f.End, f.Received = nil, boot.Add(-time.Hour) }), true, "went down with the host"},
	} {
		restart, why := decideRestart(c.f)
		if restart != c.restart || !strings.Contains(why, c.why) {
			t.Errorf("%s: restart %v, %q; want %v, saying %q", c.name, restart, why, c.restart, c.why)
		}
	}
}

// TestHolderOf is what a second start finds in a workspace (D33): nothing;
// the daemon's session, which it stops (bwrap and its sandbox beside it,
// an orphan too); or a refusal naming a session at a terminal by PID and
// command line, a process the table could not read, or a sandbox with no
// session in it.
func TestHolderOf(t *testing.T) {
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	launch := strings.Repeat("d", 64)
	proc := func(pid int, origin messages.Origin, argv string, names ...host.Naming) host.Process {
		return host.Process{ID: protocol.ProcID{PID: pid, Start: uint64(pid) * 10}, Argv: strings.Fields(argv), Names: names, Origin: origin}
	}
	bwrap := proc(100, messages.OriginDaemon, "bwrap --bind /a/agent-1/projects/demo", host.Naming{Verb: host.VerbBind, Key: k})
	serve := proc(102, messages.OriginDaemon, "workspace serve agent-1/demo --root /a --launch "+launch, host.Naming{Verb: host.VerbServe, Key: k, Launch: launch})
	other := proc(200, messages.OriginTerminal, "workspace run agent-2/demo --root /a", host.Naming{Verb: host.VerbRun, Key: messages.WorkspaceKey{Login: "agent-2", Project: "demo"}})
	orphan := serve
	orphan.Origin = messages.OriginOrphan
	run := proc(300, messages.OriginTerminal, "workspace run agent-1/demo --root /a", host.Naming{Verb: host.VerbRun, Key: k})
	runOrphan := run
	runOrphan.Origin = messages.OriginOrphan
	byHand := proc(301, messages.OriginTerminal, "workspace serve agent-1/demo --root /a --launch "+launch, host.Naming{Verb: host.VerbServe, Key: k, Launch: launch})
	unsure := proc(302, messages.OriginTerminal, "workspace run agent-1/demo --root a", host.Naming{Verb: host.VerbRun, Key: k, Unsure: true})
	for _, c := range []struct {
		name  string
		tab   host.Table
		held  int // the PID of the session a start stops, 0 for none
		error string
	}{
		{"nothing", host.Table{Procs: []host.Process{other}}, 0, ""},
		{"the daemon's session", host.Table{Procs: []host.Process{bwrap, serve, other}}, 102, ""},
		{"an orphan", host.Table{Procs: []host.Process{orphan}}, 102, ""},
		{"at a terminal", host.Table{Procs: []host.Process{run}}, 0, "a session at a terminal holds workspace agent-1/demo (pid 300, `workspace run agent-1/demo --root /a`, started at a terminal)"},
		{"an orphaned terminal session", host.Table{Procs: []host.Process{runOrphan}}, 0, "pid 300, `workspace run"},
		{"serve started by hand", host.Table{Procs: []host.Process{byHand}}, 0, "pid 301, `workspace serve agent-1/demo"},
		{"at a terminal beside the daemon's", host.Table{Procs: []host.Process{bwrap, serve, run}}, 0, "pid 300"},
		{"unsure", host.Table{Procs: []host.Process{unsure}}, 0, "pids [302] could not be read or matched"},
		{"unreadable", host.Table{Unreadable: []host.Unreadable{{PID: 7, Err: "gone"}}}, 0, "the process table cannot say"},
		{"a sandbox alone", host.Table{Procs: []host.Process{bwrap}}, 0, "a session is starting or ending"},
	} {
		held, err := holderOf(c.tab, k)
		switch {
		case c.error != "" && (err == nil || !strings.Contains(err.Error(), c.error)):
			t.Errorf("%s: %v, %v; want an error saying %q", c.name, held, err, c.error)
		case c.error == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.error == "" && c.held == 0 && held != nil:
			t.Errorf("%s: held by %v, want nothing", c.name, held)
		case c.error == "" && c.held != 0 && (held == nil || held.Proc.ID.PID != c.held || held.Launch != launch):
			t.Errorf("%s: held by %v, want pid %d serving %s", c.name, held, c.held, launch)
		}
		if err != nil && !strings.Contains(err.Error(), "nothing written") {
			t.Errorf("%s: the refusal does not say nothing was written: %v", c.name, err)
		}
	}
}

// A launch whose session ended before it was seen running is a start that
// did its work when it exited 0 without a budget (a completes session's
// report written at once), and a start that failed otherwise.
func TestLaunchOutcomeRanToItsEnd(t *testing.T) {
	zero, one := 0, 1
	for _, c := range []struct {
		end  messages.EndNote
		fine bool
	}{
		{messages.EndNote{Status: messages.EndExited, ExitCode: &zero}, true},
		{messages.EndNote{Status: messages.EndExited, ExitCode: &one}, false},
		{messages.EndNote{Status: messages.EndExited, ExitCode: &zero, Budget: "wall"}, false},
		{messages.EndNote{Status: messages.EndSignaled, Signal: "SIGKILL"}, false},
		{messages.EndNote{Status: messages.EndSandboxFailed, ExitCode: &zero}, false},
		{messages.EndNote{Status: messages.EndUnknown}, false},
	} {
		o := launchOutcome{End: &c.end}
		if got := o.err() == nil; got != c.fine || o.ranToItsEnd() != c.fine {
			t.Errorf("%s: err %v, ran to its end %v; want fine %v", c.end.StatusString(), o.err(), o.ranToItsEnd(), c.fine)
		}
	}
	if (launchOutcome{Refusal: &messages.RefusalNote{Reason: "x"}}).err() == nil {
		t.Error("a refusal is fine")
	}
}
