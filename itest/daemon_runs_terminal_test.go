package itest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// claudeStandIn is the stand-in `claude` the release holds for the test:
// it checks it runs in $$tree$$ ($HOME is $$workspace$$) with
// --remote-control on a terminal, says it is ready, then echoes each line
// typed into its terminal.
const claudeStandIn = `#!/bin/sh
[ "$1" = "--remote-control" ] || { echo "claude: not --remote-control: $*"; exit 2; }
[ "$(pwd)" = "$HOME/tree" ] || { echo "claude: not in the tree: $(pwd), HOME $HOME"; exit 3; }
test -t 0 && test -t 1 || { echo "claude: no terminal"; exit 4; }
echo "claude ready"
while read -r l; do echo "claude heard: $l"; done
`

// homeAtEnd makes a home the sandbox binds (a directory, or a file), when
// missing, and removes it at the end only if it made it.
func homeAtEnd(t *testing.T, p string, dir bool) {
	if _, err := os.Lstat(p); err == nil {
		return
	}
	var err error
	if dir {
		err = os.Mkdir(p, 0o700)
	} else {
		err = os.WriteFile(p, []byte("{}\n"), 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(p) })
}

// TestRunClaudeOnATerminal is seed 004's section 14, second example, as
// written, with a stand-in claude: the node starts it in a holder on a
// terminal of its own in the sandbox, a person's post in the run's thread
// is typed into its terminal as table 9's line, `ocx attach RUN` shows its
// output, and the admin's stop ends it stopped, every process gone.
func TestRunClaudeOnATerminal(t *testing.T) {
	needs(t, "ocxd", "ocx")
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bwrap is not on PATH (make deps installs it): %v", err)
	}
	// The sandbox as written mounts a fresh /tmp over what it binds there:
	// the node's root and its release are put under /var/tmp.
	t.Setenv("TMPDIR", "/var/tmp")
	relDir := filepath.Join(t.TempDir(), "rel")
	rel := filepath.Join(relDir, "releases", "term")
	if err := os.MkdirAll(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ocx", "ocxd", "workspace"} {
		copyFile(t, filepath.Join(release(), name), filepath.Join(rel, name))
	}
	if err := os.Symlink(filepath.Join("releases", "term"), filepath.Join(relDir, "current")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rel, "claude"), []byte(claudeStandIn), 0o755); err != nil {
		t.Fatal(err)
	}
	homeAtEnd(t, "/root/.claude", true)
	homeAtEnd(t, "/root/.claude.json", false)

	n := newNodeOn(t, relDir, harness.User{Login: "claude-1", Password: "claude-pw-1", Caps: fossilio.AgentCaps})
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	d := startDaemon(t, n, filepath.Join(relDir, "current", "ocxd"), "--grace", "2s")
	// Section 14's second example as written (docs/design/examples), for
	// this node.
	run := strings.Replace(design.Example("run-claude.json"), `"node": "lab-1"`, fmt.Sprintf(`"node": %q`, node), 1)
	root := n.result(admin, "thread", "--title", "Claude", "--text", block(run))
	var holder protocol.ProcID
	n.waitFor("the run's holder", func() bool {
		var ok bool
		holder, ok = n.runCare(root)
		return (ok && n.startedOf(root) != nil) || n.endedOf(root) != nil
	})
	if e := n.endedOf(root); e != nil {
		for _, p := range n.runThread(root) {
			t.Logf("%s: %s", p.Sender, p.Text)
		}
		hl, _ := os.ReadFile(filepath.Join(n.agents, "ocxd.runs", root[:16]+".holder.log"))
		t.Fatalf("the run ended before it ran: %+v; holder log: %s", e, hl)
	}
	killAtEnd(t, holder)
	var out *lockedBuffer
	t.Cleanup(func() {
		if t.Failed() {
			hl, _ := os.ReadFile(filepath.Join(n.agents, "ocxd.runs", root[:16]+".holder.log"))
			t.Logf("holder log:\n%s", hl)
			if out != nil {
				t.Logf("seen through attach: %q", out.String())
			}
		}
	})
	s := n.startedOf(root)
	for _, v := range []string{"run", "user", "node", "project", "root", "server", "release", "workspace", "clone", "tree"} {
		if s.Values[v] == "" {
			t.Errorf("started lists no %s: %v", v, s.Values)
		}
	}
	if s.Values["user"] != "claude-1" {
		t.Errorf("started's user %q", s.Values["user"])
	}

	// The holder's socket (docs/runs.md section 8.1): the hash's first 16
	// digits, in the node's care directory; its status request.
	sock := filepath.Join(n.agents, "ocxd.runs", root[:16]+".sock")
	info := holderStatus(t, sock)
	st, err := unixhost.ReadStat(info.PID)
	if err != nil {
		t.Fatalf("claude's process %d: %v", info.PID, err)
	}
	claude := protocol.ProcID{PID: info.PID, Start: st.Start}
	killAtEnd(t, claude)

	// ocx attach RUN, its input a pipe: the replay, then the output.
	ocx := filepath.Join(relDir, "current", "ocx")
	a := startAttach(t, ocx, n.agents, root[:12])
	out = a.out
	n.waitFor("claude ready, seen through attach", func() bool { return strings.Contains(out.String(), "claude ready") })

	said := n.result(person, "post", "--to", root, "--text", "what is two and two")
	line := n.postLine(said, person, "what is two and two")
	n.waitFor("alice's line typed into claude's terminal, seen through attach", func() bool {
		return strings.Contains(out.String(), "claude heard: "+line)
	})
	if err := a.detach(); err != nil {
		t.Errorf("attach: %v: %s", err, out.String())
	}
	if !strings.Contains(out.String(), "[detached") {
		t.Errorf("attach did not detach: %q", out.String())
	}

	// The daemon killed outright: the holder and claude go on; the daemon
	// started again adopts the holder from its care file, and types the
	// next post in.
	d.kill9()
	if !procAlive(holder) || !procAlive(claude) {
		t.Fatal("the run did not outlive the daemon")
	}
	startDaemon(t, n, filepath.Join(relDir, "current", "ocxd"), "--grace", "2s")
	said2 := n.result(person, "post", "--to", root, "--text", "and three and three")
	line2 := n.postLine(said2, person, "and three and three")
	again := startAttach(t, ocx, n.agents, root[:12])
	n.waitFor("the post after the restart typed into claude's terminal", func() bool {
		return strings.Contains(again.out.String(), "claude heard: "+line2)
	})
	if err := again.detach(); err != nil {
		t.Errorf("the second attach: %v: %s", err, again.out.String())
	}

	stop := fmt.Sprintf(`{"ocx": 1, "kind": "stop", "node": %q, "run": %q}`, node, root)
	n.result(admin, "post", "--to", root, "--text", block(stop))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	if e := n.endedOf(root); e.Outcome != runmsg.RunStopped {
		t.Errorf("ended %+v, want stopped", e)
	}
	n.waitFor("the holder gone", func() bool { return !procAlive(holder) })
	n.waitFor("claude gone", func() bool { return !procAlive(claude) })
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("the holder's socket is left: %s", sock)
	}
}

// holderStatus asks a holder for its command's PID (its socket's status
// request).
func holderStatus(t *testing.T, sock string) struct{ PID, Clients int } {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the holder's socket: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("status\n")); err != nil {
		t.Fatal(err)
	}
	ans, err := bufio.NewReader(c).ReadString('\n')
	var st struct {
		PID     int `json:"pid"`
		Clients int `json:"clients"`
	}
	if err != nil || json.Unmarshal([]byte(ans), &st) != nil || st.PID <= 0 {
		t.Fatalf("the holder's status: %q %v", ans, err)
	}
	return struct{ PID, Clients int }{st.PID, st.Clients}
}

// attachProc is an `ocx attach` the test runs, its input a pipe.
type attachProc struct {
	out  *lockedBuffer
	keys io.WriteCloser
	done chan error
}

// startAttach runs `ocx attach --agents AGENTS RUN`; it is killed at the
// end of the test unless detach ended it.
func startAttach(t *testing.T, ocx, agents, run string) *attachProc {
	t.Helper()
	a := &attachProc{out: &lockedBuffer{}, done: make(chan error, 1)}
	cmd := exec.Command(ocx, "attach", "--agents", agents, run)
	cmd.Stdout, cmd.Stderr = a.out, a.out
	keys, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	a.keys = keys
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	var once sync.Once
	var result error
	wait := func() error { once.Do(func() { result = <-ended }); return result }
	go func() { a.done <- wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		wait()
	})
	return a
}

// detach types Ctrl-], attach's detach key, and returns how attach ended.
func (a *attachProc) detach() error {
	a.keys.Write([]byte{0x1d})
	return <-a.done
}
