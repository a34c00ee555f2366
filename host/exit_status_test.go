package host

import (
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages/protocol"
)

// TestExitStatus: the one mapping of a wait status, for a session and a
// run alike (moved from the daemon's reaper).
func TestExitStatus(t *testing.T) {
	id := protocol.ProcID{PID: 9, Start: 99}
	for _, c := range []struct {
		exit   Exit
		killed bool
		want   string
	}{
		{Exit{ID: id, Known: true, Code: 3}, false, "exited 3"},
		{Exit{ID: id, Known: true, Signal: 15}, false, "signaled SIGTERM"},
		{Exit{ID: id, Known: true, Sandbox: &SandboxExit{Reported: true, Code: 0}}, false, "exited 0"},
		// bwrap's 137 is the daemon's own KILL only when it sent one
		// (messages.ExitStatus.AfterKill, which the session's core applies).
		{Exit{ID: id, Known: true, Code: 137, Sandbox: &SandboxExit{Reported: true, Code: 137}}, true, "signaled SIGKILL"},
		{Exit{ID: id, Known: true, Code: 137, Sandbox: &SandboxExit{Reported: true, Code: 137}}, false, "exited 137"},
		{Exit{ID: id, Known: true, Code: 137}, true, "exited 137"},
		{Exit{ID: id, Known: true, Code: 1, Sandbox: &SandboxExit{}}, false, "sandbox-failed 1"},
		{Exit{ID: id}, false, "unknown"},
	} {
		if got := c.exit.Status().AfterKill(c.killed).String(); got != c.want {
			t.Errorf("%s (killed %v): %s, want %s", c.exit, c.killed, got, c.want)
		}
	}
}

// TestExitStatusOfARun: a run's exit in table 12's terms, and the limit
// its cgroup names.
func TestExitStatusOfARun(t *testing.T) {
	id := protocol.ProcID{PID: 9, Start: 99}
	if got := (Exit{ID: id, Known: true, Signal: 15}).Status().Exit(); got != 143 {
		t.Errorf("SIGTERM: %d, want 143", got)
	}
	if got := (Exit{ID: id, Known: true, Code: 3}).Status().Exit(); got != 3 {
		t.Errorf("exit 3: %d, want 3", got)
	}
	c := &CgroupExit{Limits: CgroupLimits{Memory: 32 << 20}, Events: CgroupEvents{OOMKills: 1}}
	if st := (Exit{ID: id, Known: true, Code: 137, Cgroup: c}).Status(); st.Limit != c.Events.Limit() || st.LimitNote != c.Events.Words(c.Limits) || st.Limit == "" {
		t.Errorf("an OOM kill: %+v", st)
	}
}

// TestExitStatusPastCPULimit: bwrap reports a command the kernel's
// SIGXCPU ended as exit 152: under a cpu limit, that is SIGXCPU (limits.cpu,
// seed 004 table 7); without one, the code as it is. A command that exits
// 152 by itself under a cpu limit cannot be told from it (D83).
func TestExitStatusPastCPULimit(t *testing.T) {
	id := protocol.ProcID{PID: 9, Start: 99}
	sb := &SandboxExit{Reported: true, Code: 152}
	for _, c := range []struct {
		name string
		exit Exit
		want string
	}{
		{"152 under a cpu limit", Exit{ID: id, Known: true, Sandbox: sb, CPULimit: time.Second}, "signaled SIGXCPU"},
		{"152 without a limit", Exit{ID: id, Known: true, Sandbox: sb}, "exited 152"},
		{"another code under a limit", Exit{ID: id, Known: true, Sandbox: &SandboxExit{Reported: true, Code: 1}, CPULimit: time.Second}, "exited 1"},
		{"a sandbox that failed", Exit{ID: id, Known: true, Code: 1, Sandbox: &SandboxExit{}, CPULimit: time.Second}, "sandbox-failed 1"},
		{"unconfined, the signal itself", Exit{ID: id, Known: true, Signal: 24}, "signaled SIGXCPU"},
	} {
		if got := c.exit.Status().String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if got := (Exit{ID: id, Known: true, Sandbox: sb, CPULimit: time.Second}).Status().Exit(); got != 152 {
		t.Errorf("past its limit: exit %d, want 152", got)
	}
}
