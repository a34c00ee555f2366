package itest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// A shell in a run's sandbox, `ocx run shell` (issue 43 item 1, D100),
// end to end: seed 004 section 14's second run, as written, in bwrap
// under the real daemon, and a shell in it.

// claudeRun starts seed 004 section 14's second run as written, with the
// stand-in claude of TestRunClaudeOnATerminal, and returns its node, the
// run's hash and its holder (killed by PID at the end if alive).
func claudeRun(t *testing.T) (*testNode, string, protocol.ProcID) {
	t.Helper()
	needs(t, "ocxd", "ocx")
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bwrap is not on PATH (make deps installs it): %v", err)
	}
	// The sandbox as written mounts a fresh /tmp: the node's root and its
	// release are under /var/tmp.
	t.Setenv("TMPDIR", "/var/tmp")
	relDir := filepath.Join(t.TempDir(), "rel")
	rel := filepath.Join(relDir, "releases", "shell")
	if err := os.MkdirAll(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ocx", "ocxd", "workspace"} {
		copyFile(t, filepath.Join(release(), name), filepath.Join(rel, name))
	}
	if err := os.Symlink(filepath.Join("releases", "shell"), filepath.Join(relDir, "current")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rel, "claude"), []byte(claudeStandIn), 0o755); err != nil {
		t.Fatal(err)
	}
	homeAtEnd(t, "/root/.claude", true)
	homeAtEnd(t, "/root/.claude.json", false)
	n := newNodeOn(t, relDir, harness.User{Login: "claude-1", Password: "claude-pw-1", Caps: fossilio.AgentCaps})
	startDaemon(t, n, filepath.Join(relDir, "current", "ocxd"), "--grace", "2s")
	run := strings.Replace(design.Example("run-claude.json"), `"node": "lab-1"`, fmt.Sprintf(`"node": %q`, n.nodeUser()), 1)
	root := n.result(n.srv.AdminLogin, "thread", "--title", "Claude", "--text", block(run))
	var holder protocol.ProcID
	n.waitFor("the run's holder", func() bool {
		var ok bool
		holder, ok = n.runCare(root)
		return (ok && n.startedOf(root) != nil) || n.endedOf(root) != nil
	})
	if e := n.endedOf(root); e != nil {
		t.Fatalf("the run ended before it ran: %+v", e)
	}
	killAtEnd(t, holder)
	return n, root, holder
}

// shellNotes are the node user's notes about shells in run root's thread.
func (n *testNode) shellNotes(root string) []string {
	var out []string
	for _, p := range n.runThread(root) {
		// The kept logs of a session hearing "*" quote them too (table 9).
		if p.Msg == nil && (strings.HasPrefix(p.Text, "A shell was opened in the sandbox of run "+root) ||
			strings.HasPrefix(p.Text, "The shell ") && strings.Contains(p.Text, " opened in the sandbox of run "+root)) {
			if p.Sender != n.nodeUser() {
				n.t.Errorf("a shell's note sent by %q, not the node user: %s", p.Sender, p.Text)
			}
			out = append(out, p.Text)
		}
	}
	return out
}

// TestRunShellInTheSandbox: a shell in section 14's run sees the run's
// tree, as its uid and gid (1000), in its PID namespace (its $$ small,
// /proc holding only the sandbox's processes), with no capability, and
// cannot read the node's own files; the notes name who opened it, the
// command and how long it was open. A second shell running sleep 999
// dies, by PID, when the run is stopped (ocx run stop). Each refusal
// names why.
func TestRunShellInTheSandbox(t *testing.T) {
	n, root, holder := claudeRun(t)
	admin := n.srv.AdminLogin
	nodeFile := filepath.Join(n.agents, "node.json")
	script := fmt.Sprintf(`id -u; id -g; echo "pid $$"; echo "root: $(ls / | tr '\n' ' ')"; echo "procs: $(ls /proc | grep -c '^[0-9]')"; grep Cap /proc/self/status; pwd; echo "home $HOME"; cat %s`, nodeFile)
	r := n.ocx(admin, "run", "shell", root[:12], "--", "sh", "-c", script)
	t.Logf("the shell said:\n%s", r)
	if r.code != 1 {
		t.Errorf("the shell exited %d, want 1 (cat of the node's file fails as the script's last command)", r.code)
	}
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 4 || lines[0] != "1000" || lines[1] != "1000" {
		t.Errorf("the shell does not run as the sandbox's uid and gid 1000:\n%s", r.stdout)
	}
	if m := regexp.MustCompile(`(?m)^pid (\d+)$`).FindStringSubmatch(r.stdout); m == nil {
		t.Errorf("no $$:\n%s", r.stdout)
	} else if pid, _ := strconv.Atoi(m[1]); pid > 50 {
		t.Errorf("the shell's $$ is %d: not the sandbox's PID namespace", pid)
	}
	if m := regexp.MustCompile(`(?m)^procs: (\d+)$`).FindStringSubmatch(r.stdout); m == nil {
		t.Errorf("no count of /proc:\n%s", r.stdout)
	} else if k, _ := strconv.Atoi(m[1]); k > 10 {
		t.Errorf("the shell sees %d processes in /proc: the host's, not the sandbox's", k)
	}
	// The tree is section 14's: what it binds, and none of the host's
	// other top directories (/root, /home, /srv are the host's).
	rootLine := regexp.MustCompile(`(?m)^root: (.*)$`).FindStringSubmatch(r.stdout)
	if rootLine == nil || !strings.Contains(rootLine[1], "usr ") || !strings.Contains(rootLine[1], "var ") {
		t.Errorf("the shell does not see the run's tree:\n%s", r.stdout)
	} else {
		for _, host := range []string{"root", "home", "srv", "boot"} {
			if strings.Contains(" "+rootLine[1], " "+host+" ") {
				t.Errorf("the shell sees the host's /%s: %s", host, rootLine[1])
			}
		}
	}
	for _, c := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapAmb:\t0000000000000000"} {
		if !strings.Contains(r.stdout, c) {
			t.Errorf("the shell holds a capability the run does not: want %q in\n%s", c, r.stdout)
		}
	}
	s := n.startedOf(root)
	if !strings.Contains(r.stdout, "\n"+s.Values["tree"]+"\n") || !strings.Contains(r.stdout, "home "+s.Values["workspace"]+"\n") {
		t.Errorf("the shell is not in the run's cwd %s with its HOME %s:\n%s", s.Values["tree"], s.Values["workspace"], r.stdout)
	}
	if !strings.Contains(r.stderr, nodeFile+": No such file or directory") {
		t.Errorf("the node's file %s was not out of the shell's sight:\n%s", nodeFile, r)
	}
	n.waitFor("the shell's two notes", func() bool { return len(n.shellNotes(root)) == 2 })
	notes := n.shellNotes(root)
	if !strings.Contains(notes[0], "opened in the sandbox of run "+root+" by "+admin) || !strings.Contains(notes[0], "`sh -c ") {
		t.Errorf("the start note does not name who opened it and the command: %s", notes[0])
	}
	if !regexp.MustCompile(`was open [0-9.]+m?s: it exited 1\.`).MatchString(notes[1]) || !strings.Contains(notes[1], "The shell "+admin+" opened") {
		t.Errorf("the end note does not say who, how long and how it ended: %s", notes[1])
	}

	// Refusals, before anything starts or is written.
	refused := func(user, want string, args ...string) {
		t.Helper()
		r := n.ocx(user, append([]string{"run", "shell"}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("ocx run shell %v as %s: want a refusal naming %q, got %s", args, user, want, r)
		}
	}
	refused(person, "without admin (a) or setup (s)", root, "--", "true")
	waiting := n.result(admin, "run", "post", "--message", manualRun(n.nodeUser(), "echo later"))
	n.waiting(waiting)
	refused(admin, "has not started", waiting, "--", "true")
	unconfined := n.result(admin, "run", "post", "--message", fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Sleep.",
"process": {"user": "builder", "command": ["sleep", "600"], "env": {"PATH": "/usr/bin:/bin"}}}`, n.nodeUser()))
	n.waitFor("the unconfined run's started", func() bool { return n.startedOf(unconfined) != nil })
	refused(admin, "is not confined (it has no sandbox layer): there is no sandbox to enter", unconfined, "--", "true")
	n.result(admin, "run", "stop", unconfined)
	n.waitFor("the unconfined run's ended", func() bool { return n.endedOf(unconfined) != nil })
	other := n.result(admin, "run", "post", "--message", `{"ocx": 1, "kind": "run", "node": "lab-2", "objective": "Elsewhere.",
"process": {"user": "builder", "command": ["true"], "env": {"PATH": "/usr/bin:/bin"}}}`)
	refused(admin, `runs on node "lab-2", not here`, other, "--", "true")
	if got := len(n.shellNotes(root)); got != 2 {
		t.Errorf("a refused shell wrote a note: %d notes", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + n.agents, "LANG=C.UTF-8", "OCX_AGENTS=" + n.agents,
		"OCX_USER=" + admin, "OCX_PASSWORD=" + n.pw[admin]}

	// On a terminal: the shell has one of its own, what is typed goes in,
	// and Ctrl-] detaches, which hangs the shell up.
	master, tty, err := unixhost.OpenPTY()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	term := n.command(ctx, program("ocx"), "run", "shell", root)
	term.Env = env
	term.Stdin, term.Stdout, term.Stderr = tty, tty, tty
	term.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := term.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	termDone := make(chan error, 1)
	go func() { termDone <- term.Wait() }()
	var seen lockedBuffer
	go io.Copy(&seen, master)
	n.waitFor("the shell's banner", func() bool { return strings.Contains(seen.String(), "Ctrl-] detaches") })
	if _, err := master.Write([]byte("echo typed-$((40+2)) in $$\r")); err != nil {
		t.Fatal(err)
	}
	n.waitFor("what was typed, run in the sandbox", func() bool { return strings.Contains(seen.String(), "typed-42 in ") })
	if _, err := master.Write([]byte{0x1d}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-termDone:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 129 {
			t.Errorf("the detached shell: %v, want exit 129 (SIGHUP): %q", err, seen.String())
		}
	case <-ctx.Done():
		t.Fatalf("Ctrl-] did not end the shell: %q", seen.String())
	}
	if !strings.Contains(seen.String(), "[detached: the shell is hung up") {
		t.Errorf("no word of the detach: %q", seen.String())
	}
	n.waitFor("the terminal shell's end note", func() bool { return len(n.shellNotes(root)) >= 4 })
	if notes := n.shellNotes(root); !strings.Contains(notes[2], "`/bin/sh`") || !strings.Contains(notes[3], "it was ended by SIGHUP (exit 129), hung up as Ctrl-] detached it.") {
		t.Errorf("the terminal shell's notes: %q", notes[2:])
	}

	// sleep 999 in the sandbox, and the run stopped: the shell dies with
	// it, by PID.
	cmd := n.command(ctx, program("ocx"), "run", "shell", root, "--", "sleep", "999")
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var sleep protocol.ProcID
	n.waitFor("the sleep's start note, naming its PID", func() bool {
		notes := n.shellNotes(root)
		if len(notes) < 5 {
			return false
		}
		m := regexp.MustCompile(`\(PID (\d+) on the host\)`).FindStringSubmatch(notes[4])
		if m == nil {
			t.Fatalf("the start note names no PID: %s", notes[4])
		}
		pid, _ := strconv.Atoi(m[1])
		st, err := unixhost.ReadStat(pid)
		if err != nil {
			return false
		}
		sleep = protocol.ProcID{PID: pid, Start: st.Start}
		return true
	})
	killAtEnd(t, sleep)
	n.waitFor("sleep 999 running in the sandbox", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", sleep.PID))
		return err == nil && string(b) == "sleep\x00999\x00"
	})
	ours, _ := os.Readlink("/proc/self/ns/pid")
	its, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", sleep.PID))
	if its == "" || its == ours {
		t.Errorf("sleep 999 is in PID namespace %q, the host's is %q", its, ours)
	}
	n.result(admin, "run", "stop", root)
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	if e := n.endedOf(root); e.Outcome != runmsg.RunStopped {
		t.Errorf("ended %+v, want stopped", e)
	}
	n.waitFor("sleep 999 gone with the run", func() bool { return !procAlive(sleep) })
	n.waitFor("the holder gone", func() bool { return !procAlive(holder) })
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 137 {
			t.Errorf("ocx run shell ended %v, want exit 137 (SIGKILL, as the sandbox ended): %s %s", err, out.String(), errb.String())
		}
	case <-ctx.Done():
		t.Fatalf("ocx run shell did not end with the run: %s %s", out.String(), errb.String())
	}
	t.Logf("ocx run shell -- sleep 999 said: %s %s", out.String(), errb.String())
	n.waitFor("the sleep's end note", func() bool { return len(n.shellNotes(root)) >= 6 })
	if notes := n.shellNotes(root); len(notes) != 6 || !strings.Contains(notes[5], "it was ended by SIGKILL (exit 137), as the run's sandbox ended") {
		t.Errorf("the end note does not say the run's end ended it: %q", notes)
	}
	refused(admin, "has ended (stopped", root, "--", "true")
}

// TestRunShellInTheRunsLimits: a shell in a run with a cgroup of its own
// (limits.memory and processes) is in that cgroup, by PID, and holds the
// run's rlimits (cpu, processes), so the run's limits count it.
func TestRunShellInTheRunsLimits(t *testing.T) {
	needs(t, "ocxd", "ocx")
	if why := unixhost.HostCgroups().Why(); why != "" {
		t.Logf("no cgroup here (%s): TestRunPastItsMemory tests the refusal", why)
		return
	}
	n := newNode(t)
	admin := n.srv.AdminLogin
	startDaemon(t, n, program("ocxd"), "--grace", "2s")
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Be limited.",
"sandbox": {"uid": 1000, "gid": 1000, "capabilities": [], "network": false, "own_session": true, "ends_with_node": true,
  "read_only": ["/usr", "/bin", "/lib", "/lib64"], "read_write": [], "homes": [], "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/tmp"},
"limits": {"memory": "64M", "processes": 20, "cpu": 600},
"process": {"user": "builder", "command": ["sleep", "600"], "env": {"PATH": "/usr/bin:/bin"}}}`, n.nodeUser())
	root := n.result(admin, "thread", "--title", "Limited", "--text", block(run))
	var holder protocol.ProcID
	n.waitFor("the run's holder", func() bool {
		var ok bool
		holder, ok = n.runCare(root)
		return (ok && holder.PID > 0 && n.startedOf(root) != nil) || n.endedOf(root) != nil
	})
	if e := n.endedOf(root); e != nil {
		t.Fatalf("the run ended before it ran: %+v", e)
	}
	killAtEnd(t, holder)

	r := n.ocx(admin, "run", "shell", root, "--", "sh", "-c", "grep -E '^Max (cpu time|processes) ' /proc/self/limits | tr -s ' '")
	if r.code != 0 || r.stdout != "Max cpu time 600 601 seconds \nMax processes 20 20 processes \n" {
		t.Errorf("the shell's rlimits are not the run's (processes 20, cpu 600): %s", r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := n.command(ctx, program("ocx"), "run", "shell", root, "--", "sleep", "999")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + n.agents, "LANG=C.UTF-8", "OCX_AGENTS=" + n.agents,
		"OCX_USER=" + admin, "OCX_PASSWORD=" + n.pw[admin]}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var pid int
	n.waitFor("the sleep's start note", func() bool {
		notes := n.shellNotes(root)
		if len(notes) < 3 {
			return false
		}
		m := regexp.MustCompile(`\(PID (\d+) on the host\)`).FindStringSubmatch(notes[2])
		if m == nil {
			t.Fatalf("the start note names no PID: %s", notes[2])
		}
		pid, _ = strconv.Atoi(m[1])
		return true
	})
	st, err := unixhost.ReadStat(pid)
	if err != nil {
		t.Fatalf("the shell's process %d: %v", pid, err)
	}
	sleep := protocol.ProcID{PID: pid, Start: st.Start}
	killAtEnd(t, sleep)
	l, err := host.NewLayout(n.agents)
	if err != nil {
		t.Fatal(err)
	}
	g, err := unixhost.HostCgroups().Open(l.RunCgroup(root))
	if err != nil {
		t.Fatalf("the run's cgroup: %v", err)
	}
	procs, err := g.Procs()
	if err != nil || !slices.Contains(procs, pid) {
		t.Errorf("the shell's process %d is not in the run's cgroup %s: %v %v", pid, l.RunCgroup(root), procs, err)
	}
	n.result(admin, "run", "stop", root)
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	n.waitFor("the shell gone with the run", func() bool { return !procAlive(sleep) })
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("ocx run shell did not end with the run")
	}
}

// TestRunShellKeepsTheRunsCapabilities: in a sandbox whose uid is 0 and
// which keeps CAP_NET_BIND_SERVICE, the shell holds that one capability
// in every set, its bounding set too, as the run's process does. As uid
// 1000 it cannot be given it, and says so (D100).
func TestRunShellKeepsTheRunsCapabilities(t *testing.T) {
	needs(t, "ocxd", "ocx")
	n := newNode(t)
	admin := n.srv.AdminLogin
	startDaemon(t, n, program("ocxd"), "--grace", "2s")
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Keep one capability.",
"sandbox": {"uid": 0, "gid": 0, "capabilities": ["CAP_NET_BIND_SERVICE"], "network": false, "own_session": true, "ends_with_node": true,
  "read_only": ["/usr", "/bin", "/lib", "/lib64"], "read_write": [], "homes": [], "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/tmp"},
"process": {"user": "builder", "command": ["sh", "-c", "grep Cap /proc/self/status; sleep 600"], "env": {"PATH": "/usr/bin:/bin"},
  "keep": {"stdout_when": "always"}}}`, n.nodeUser())
	root := n.result(admin, "thread", "--title", "One capability", "--text", block(run))
	var holder protocol.ProcID
	n.waitFor("the run's holder", func() bool {
		var ok bool
		holder, ok = n.runCare(root)
		return (ok && holder.PID > 0 && n.startedOf(root) != nil) || n.endedOf(root) != nil
	})
	if e := n.endedOf(root); e != nil {
		t.Fatalf("the run ended before it ran: %+v", e)
	}
	killAtEnd(t, holder)
	r := n.ocx(admin, "run", "shell", root, "--", "sh", "-c", "id -u; grep Cap /proc/self/status")
	want := "0\nCapInh:\t0000000000000400\nCapPrm:\t0000000000000400\nCapEff:\t0000000000000400\nCapBnd:\t0000000000000400\nCapAmb:\t0000000000000400\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("the shell's capabilities are not the run's one:\n%s\nwant\n%s", r, want)
	}
	n.result(admin, "run", "stop", root)
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	// The run's own process held the same, as its kept STDOUT says.
	n.waitFor("the run's kept STDOUT", func() bool {
		for _, p := range n.runThread(root) {
			if strings.Contains(p.Text, "```stdout") {
				if !strings.Contains(p.Text, "CapEff:\t0000000000000400") || !strings.Contains(p.Text, "CapBnd:\t0000000000000400") {
					t.Errorf("the run's process did not hold CAP_NET_BIND_SERVICE alone:\n%s", p.Text)
				}
				return true
			}
		}
		return false
	})

	as1000 := strings.NewReplacer(`"uid": 0, "gid": 0`, `"uid": 1000, "gid": 1000`, "Keep one capability.", "Keep one as 1000.").Replace(run)
	root2 := n.result(admin, "thread", "--title", "One capability as 1000", "--text", block(as1000))
	n.waitFor("the second run's holder", func() bool {
		h, ok := n.runCare(root2)
		if ok && h.PID > 0 && n.startedOf(root2) != nil {
			killAtEnd(t, h)
			return true
		}
		return n.endedOf(root2) != nil
	})
	r = n.ocx(admin, "run", "shell", root2, "--", "sh", "-c", "id -u; grep CapEff /proc/self/status")
	if r.code != 0 || r.stdout != "1000\nCapEff:\t0000000000000000\n" ||
		!strings.Contains(r.stderr, "the run keeps CAP_NET_BIND_SERVICE, which a shell as uid 1000 in its sandbox cannot be given (D100): it runs without") {
		t.Errorf("a shell as 1000 in a run keeping a capability: %s", r)
	}
	n.result(admin, "run", "stop", root2)
	n.waitFor("the second run's ended", func() bool { return n.endedOf(root2) != nil })
}
