package itest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages"
)

// TestKeptStatusFollowsEveryChange: the daemon keeps its status between
// asks (D70), and an ask after each kind of change it is derived from
// gets what a fresh read gives: a turn begun and ended (a file), whom the
// session hears (a held file), a login's password (a file), a user's
// capabilities (a write to the repository that is no receipt), a listen
// (a receipt), a process naming a workspace started and killed (the
// process events). Before each change the ask is answered by the kept
// status, so that keeping is what each step tests.
func TestKeptStatusFollowsEveryChange(t *testing.T) {
	needs(t, "ocx", "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	startDaemon(t, n, program("ocxd"), "--grace", "1s", "--log-level", "debug")
	records := map[string]string{}
	for _, l := range []string{agent, "agent-2"} {
		n.must("", "login", "add", l)
		records[l] = n.result(admin, "workspace", "add", "--login", l, "--project", "demo", "--branch", "trunk")
	}
	n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	n.waitFor("the session to listen and begin its account", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening && st.Sessions[0].Usage != nil
	})
	n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
	layout, err := host.NewLayout(n.agents)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := layout.Workspace(messages.WorkspaceKey{Login: agent, Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	// The socket is put aside for a fresh read into a directory of its
	// own, made now: its move is then no change of what a status reads.
	aside := filepath.Join(n.agents, ".aside")
	if err := os.Mkdir(aside, 0o700); err != nil {
		t.Fatal(err)
	}
	var last *messages.NodeState
	ask := func() []byte {
		t.Helper()
		r, err := nodesock.Ask(context.Background(), layout, messages.NewAsk(messages.AskStatus), 10*time.Second)
		if err != nil {
			t.Fatalf("the daemon's status: %v\nocxd.log:\n%s", err, n.daemonLog())
		}
		last = replyState(t, r)
		b, _ := json.Marshal(last)
		return b
	}
	fresh := func() []byte {
		t.Helper()
		moved := filepath.Join(aside, host.SocketName)
		if err := os.Rename(layout.Socket(), moved); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(moved, layout.Socket())
		b, _ := json.Marshal(n.status())
		return b
	}
	kept := func() int {
		c := 0
		for _, l := range n.logLines() {
			if l.Msg == "ocxd.sock: the kept status answers" {
				c++
			}
		}
		return c
	}
	// settle asks until the kept status answers: nothing changes now.
	settle := func(what string) []byte {
		t.Helper()
		before := kept()
		var b []byte
		n.waitFor(what+": the kept status to answer", func() bool {
			b = ask()
			return kept() > before
		})
		return b
	}
	step := func(what string, change func(), holds func(*messages.NodeState) bool) {
		t.Helper()
		was := settle("before " + what)
		change()
		live := ask()
		if string(live) == string(was) {
			t.Fatalf("%s: the daemon's status did not change\n%s", what, live)
		}
		if read := fresh(); string(live) != string(read) {
			t.Fatalf("%s: the daemon's status differs from a fresh read\ndaemon: %s\nfresh:  %s", what, live, read)
		}
		if !holds(last) {
			t.Fatalf("%s: the daemon's status says otherwise: %s", what, live)
		}
	}
	mine := func(st *messages.NodeState) *messages.SessionStatus {
		for i := range st.Sessions {
			if st.Sessions[i].Login == agent {
				return &st.Sessions[i]
			}
		}
		return nil
	}

	step("a turn begun", func() {
		if err := os.WriteFile(filepath.Join(ws.Session, "turn"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}, func(st *messages.NodeState) bool {
		s := mine(st)
		return s != nil && s.State == messages.SessionWorking
	})
	step("the turn ended", func() {
		if err := os.Remove(filepath.Join(ws.Session, "turn")); err != nil {
			t.Fatal(err)
		}
	}, func(st *messages.NodeState) bool { s := mine(st); return s != nil && s.State == messages.SessionIdle })
	step("whom the session hears", func() {
		hears, err := messages.HearsFileContent([]string{person, "agent-2"})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ws.Hears, hears, 0o600); err != nil {
			t.Fatal(err)
		}
	}, func(st *messages.NodeState) bool { s := mine(st); return s != nil && len(s.Hears) == 2 })
	step("a login's password", func() {
		if err := os.MkdirAll(filepath.Join(n.agents, "agent-4"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.agents, "agent-4", "password"), []byte("not-used\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}, func(st *messages.NodeState) bool {
		for _, l := range st.Logins {
			if l.Login == "agent-4" {
				return true
			}
		}
		return false
	})
	step("a user's capabilities", func() {
		if out, err := exec.Command("fossil", "user", "capabilities", "agent-2", "io", "-R", n.srv.Repo).CombinedOutput(); err != nil {
			t.Fatalf("fossil user capabilities: %v\n%s", err, out)
		}
	}, func(st *messages.NodeState) bool {
		for _, l := range st.Logins {
			if l.Login == "agent-2" && len(l.Accounts) == 1 && l.Accounts[0].Capabilities == "io" {
				return true
			}
		}
		return false
	})
	step("a listen", func() {
		n.result("", "listener", "add", key("agent-2"), "--kind", "thread", "--names", records[agent])
	}, func(st *messages.NodeState) bool { return len(st.Listeners) == 1 })

	// A process naming agent-2's workspace, started and then killed.
	sleeper := buildProgram(t, "sleeper", sleeperSource)
	var proc *exec.Cmd
	step("a process naming a workspace", func() {
		proc = &exec.Cmd{Path: sleeper, Args: []string{"workspace", "serve", key("agent-2"), "--root", n.agents}, Dir: "/"}
		if err := proc.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { proc.Process.Kill(); proc.Wait() })
		n.waitFor("the process to run its program", func() bool {
			b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(proc.Process.Pid), "cmdline"))
			return strings.HasPrefix(string(b), "workspace\x00serve\x00")
		})
	}, func(st *messages.NodeState) bool { return listsPID(st, proc.Process.Pid) })
	step("the process killed", func() {
		if err := syscall.Kill(proc.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		proc.Wait()
	}, func(st *messages.NodeState) bool { return !listsPID(st, proc.Process.Pid) })
}

// listsPID says whether the status lists process pid as a session or a
// look-alike.
func listsPID(st *messages.NodeState, pid int) bool {
	for _, s := range st.Sessions {
		if s.PID == pid {
			return true
		}
	}
	for _, l := range st.LookAlikes {
		if l.PID == pid {
			return true
		}
	}
	return false
}
