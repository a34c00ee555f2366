package node_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node/nodetest"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// nameWorkspace starts a real process whose command line names the
// fixture's workspace as a terminal session's does (`workspace serve KEY
// --root ROOT`): a shell reading its script from a file named serve. It is
// ended, with its group, by PID at the test's end.
func nameWorkspace(t *testing.T, f *fix) int {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "serve"), []byte("sleep 300\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: "/bin/sh", Args: []string{"workspace", "serve", agent + "/demo", "--root", f.Agents}, Dir: dir,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	// The shell forks its sleep: until the child has exec'd, it too names
	// the workspace. Wait for the sleep, so the workspace is named once.
	pid := strconv.Itoa(cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; {
		kids, _ := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
		if f := strings.Fields(string(kids)); len(f) == 1 {
			if cl, _ := os.ReadFile("/proc/" + f[0] + "/cmdline"); string(cl) == "sleep\x00300\x00" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell naming the workspace (%s) started no sleep in 10 s", pid)
		}
		time.Sleep(time.Millisecond)
	}
	return cmd.Process.Pid
}

func TestNothingRemovesAWorkspaceAProcessNames(t *testing.T) {
	f := newFix(t)
	def := *f.AddWorkspace().Result
	pid := nameWorkspace(t, f)
	key := agent + "/demo"
	f.Refused(workspaces.Of(f.N).WorkspaceTerminate(f.Ctx, key, "", false), "a running process names workspace agent-1/demo", "stop its session first")
	f.Refused(f.N.LoginWithdraw(f.Ctx, agent, false), "a running process names workspace agent-1/demo")
	// Its record ends it (a terminated note written meanwhile), yet gc leaves
	// it while the process runs.
	note, _ := (&messages.TerminatedNote{Login: agent, Project: "demo"}).Encode()
	admin := &fossilio.Client{URL: f.Srv.URL, Login: f.Srv.AdminLogin, Password: f.Srv.AdminPassword, ProjectCode: f.Srv.ProjectCode}
	if _, err := admin.Reply(f.Ctx, def, def, string(note)); err != nil {
		t.Fatal(err)
	}
	a := f.OK(workspaces.Of(f.N).WorkspaceGC(f.Ctx, false))
	if log := strings.Join(a.Log, "\n"); !strings.Contains(log, "a running process names it") || !nodetest.Exists(f.WS()) {
		t.Errorf("gc with a process naming the workspace: %s", log)
	}
	st, err := f.N.Status(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sessions) != 1 || st.Sessions[0].PID != pid || st.Sessions[0].StartedBy != messages.OriginTerminal || st.Sessions[0].Record != def || st.Sessions[0].Listening {
		t.Errorf("the status's sessions: %v", st.Sessions)
	}
	if st.Workspaces[0].State != messages.WorkspaceActive {
		t.Errorf("a workspace a process names is %s", st.Workspaces[0].State)
	}
	// The process gone, gc collects it.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for nodetest.Exists("/proc/" + strconv.Itoa(pid)) {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); strings.Contains(string(b), ") Z") {
			break
		}
	}
	f.OK(workspaces.Of(f.N).WorkspaceGC(f.Ctx, false))
	if nodetest.Exists(f.WS()) {
		t.Errorf("gc left %s once nothing named it", f.WS())
	}
}

// TestStatusReadsSessionsInParallel: the sessions' files of a status are
// read several at once (under -race here), and each session is still
// itself in the status, in PID order: six terminal sessions of one
// workspace.
func TestStatusReadsSessionsInParallel(t *testing.T) {
	f := newFix(t)
	def := *f.AddWorkspace().Result
	var pids []int
	for range 6 {
		pids = append(pids, nameWorkspace(t, f))
	}
	slices.Sort(pids)
	st, err := f.N.Status(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, s := range st.Sessions {
		got = append(got, s.PID)
		if s.Record != def || s.Login != agent || s.StartedBy != messages.OriginTerminal {
			t.Errorf("session %d: %+v", s.PID, s)
		}
	}
	if !slices.Equal(got, pids) {
		t.Errorf("the status's sessions are %v, want %v", got, pids)
	}
}
