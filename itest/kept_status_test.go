package itest

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

// TestKeptStatusFollowsEveryChange: the daemon keeps its status between
// asks (D70), and after every step of a random sequence of changes of
// each kind it is derived from, its answer is what a fresh read gives: a
// turn begun or ended (a file), whom the session hears (a held file), a
// login's password made or removed (a file), a user's capabilities (a
// write to the repository that no receipt records), a listen or an
// unlisten (a receipt), a process naming a workspace started or killed
// (the process events). Before each step the ask is answered by the kept
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
	n.must("", "login", "add", "agent-3")
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
		r, err := nodesock.Ask(context.Background(), layout, wire.NewAsk(wire.AskStatus), 10*time.Second)
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
	mine := func(st *messages.NodeState) *messages.SessionStatus {
		for i := range st.Sessions {
			if st.Sessions[i].Login == agent {
				return &st.Sessions[i]
			}
		}
		return nil
	}
	login := func(st *messages.NodeState, l string) *messages.LoginStatus {
		for i := range st.Logins {
			if st.Logins[i].Login == l {
				return &st.Logins[i]
			}
		}
		return nil
	}
	sleeper := buildProgram(t, "sleeper", sleeperSource)
	var proc *exec.Cmd
	t.Cleanup(func() {
		if proc != nil {
			proc.Process.Kill()
			proc.Wait()
		}
	})
	hears := func(who ...string) {
		b, err := messages.HearsFileContent(who)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ws.Hears, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caps := func(c string) {
		if out, err := exec.Command("fossil", "user", "capabilities", "agent-3", c, "-R", n.srv.Repo).CombinedOutput(); err != nil {
			t.Fatalf("fossil user capabilities: %v\n%s", err, out)
		}
	}
	on := map[string]bool{}
	type change struct {
		do    func(on bool)
		holds func(st *messages.NodeState, on bool) bool
	}
	changes := map[string]change{
		"turn": {func(on bool) {
			if on {
				err = os.WriteFile(filepath.Join(ws.Session, "turn"), nil, 0o600)
			} else {
				err = os.Remove(filepath.Join(ws.Session, "turn"))
			}
			if err != nil {
				t.Fatal(err)
			}
		}, func(st *messages.NodeState, on bool) bool {
			s := mine(st)
			return s != nil && (s.State == messages.SessionWorking) == on
		}},
		"hears": {func(on bool) {
			if on {
				hears(person, "agent-2")
			} else {
				hears(person)
			}
		}, func(st *messages.NodeState, on bool) bool {
			s := mine(st)
			return s != nil && (len(s.Hears) == 2) == on
		}},
		"password": {func(on bool) {
			pw := filepath.Join(n.agents, "agent-4", "password")
			if on {
				if err := os.MkdirAll(filepath.Dir(pw), 0o700); err != nil {
					t.Fatal(err)
				}
				err = os.WriteFile(pw, []byte("not-used\n"), 0o600)
			} else {
				err = os.Remove(pw)
			}
			if err != nil {
				t.Fatal(err)
			}
		}, func(st *messages.NodeState, on bool) bool { return (login(st, "agent-4") != nil) == on }},
		"capabilities": {func(on bool) {
			if on {
				caps("cghijknorz4")
			} else {
				caps("cghijnorz4")
			}
		}, func(st *messages.NodeState, on bool) bool {
			l := login(st, "agent-3")
			return l != nil && len(l.Accounts) == 1 && strings.Contains(l.Accounts[0].Capabilities, "k") == on
		}},
		"listen": {func(on bool) {
			verb := map[bool]string{true: "add", false: "remove"}[on]
			n.result("", "listener", verb, key("agent-2"), "--kind", "thread", "--names", records[agent])
		}, func(st *messages.NodeState, on bool) bool { return (len(st.Listeners) == 1) == on }},
		"process": {func(on bool) {
			if !on {
				if err := syscall.Kill(proc.Process.Pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				proc.Wait()
				return
			}
			proc = &exec.Cmd{Path: sleeper, Args: []string{"workspace", "serve", key("agent-2"), "--root", n.agents}, Dir: "/"}
			if err := proc.Start(); err != nil {
				t.Fatal(err)
			}
			n.waitFor("the process to run its program", func() bool {
				b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(proc.Process.Pid), "cmdline"))
				return strings.HasPrefix(string(b), "workspace\x00serve\x00")
			})
		}, func(st *messages.NodeState, on bool) bool { return listsPID(st, proc.Process.Pid) == on }},
	}
	var kinds []string
	for k := range changes {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	// Each step reads the node afresh, so the runs are fewer than rapid's
	// default unless the caller asks more.
	if fl := flag.Lookup("rapid.checks"); fl != nil && fl.Value.String() == fl.DefValue {
		fl.Value.Set("12")
		defer fl.Value.Set(fl.DefValue)
	}
	rapid.Check(t, func(rt *rapid.T) {
		steps := rapid.IntRange(1, 6).Draw(rt, "steps")
		for range steps {
			kind := rapid.SampledFrom(kinds).Draw(rt, "change")
			// Nothing changes now: the kept status answers.
			before := kept()
			var was []byte
			n.waitFor("before "+kind+": the kept status to answer", func() bool {
				was = ask()
				return kept() > before
			})
			on[kind] = !on[kind]
			c := changes[kind]
			c.do(on[kind])
			live := ask()
			if string(live) == string(was) {
				rt.Fatalf("%s %v: the daemon's status did not change\n%s", kind, on[kind], live)
			}
			if read := fresh(); string(live) != string(read) {
				rt.Fatalf("%s %v: the daemon's status differs from a fresh read\ndaemon: %s\nfresh:  %s", kind, on[kind], live, read)
			}
			if !c.holds(last, on[kind]) {
				rt.Fatalf("%s %v: the daemon's status says otherwise: %s", kind, on[kind], live)
			}
		}
	})
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
