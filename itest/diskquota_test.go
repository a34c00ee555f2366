package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Disks bounded by the kernel (issue 39 item 5, D82): each workspace, and
// each run's asking limits.disk, on a file system of its own that the
// node makes and mounts; the node's files on the host's, which no agent
// fills.

// setNodeDisk writes node.json's session_limits.disk, before the daemon
// starts.
func (n *testNode) setNodeDisk(disk string) {
	n.t.Helper()
	l, _ := host.NewLayout(n.agents)
	p := n.seen(l.NodeJSON())
	b, err := os.ReadFile(p)
	if err != nil {
		n.t.Fatal(err)
	}
	cfg, err := messages.DecodeNodeConfig(b)
	if err != nil {
		n.t.Fatal(err)
	}
	cfg.SessionLimits = &messages.NodeSessionLimits{Disk: disk}
	if b, err = cfg.Encode(); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// waitSessionGone waits until the status lists no session of login's
// workspace of demo, and no process names that workspace (its session's
// sandbox, its MCP server).
func (n *testNode) waitSessionGone(login string) {
	n.t.Helper()
	n.waitFor(login+"'s session to end", func() bool {
		for _, x := range n.status().Sessions {
			if x.Login == login {
				return false
			}
		}
		for _, pid := range n.naming() {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if slices.Contains(strings.Split(string(b), "\x00"), login+"/demo") {
				return false
			}
		}
		return true
	})
}

// fsOf is the file system at p as the test sees it: its size and what is
// free, in bytes, and its device.
func fsOf(t testing.TB, p string) (size, free, dev uint64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		t.Fatal(err)
	}
	var s unix.Stat_t
	if err := unix.Stat(p, &s); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), s.Dev
}

// diskScript fills its workspace's disk, and says what dd said and how
// much it wrote.
const diskScript = `read -r line; case "$line" in fill*) dd if=/dev/zero of="$HOME/fill" bs=64k 2>&1 | grep -o 'No space left on device' | head -1; printf 'filled %s KiB\n' "$(du -k "$HOME/fill" | cut -f1)";; *) printf 'echo: %s\n' "$line";; esac`

// TestSessionPastItsDisk: the agents root on a 256 MB disk of the host's
// own, node.json's session_limits.disk 32M. Each workspace add makes its
// workspace a file system of 32 MiB of its own; agent-1's session fills
// its own: dd is told ENOSPC inside the sandbox, having written at most
// 32 MiB, and the node's file system loses not a block: ocxd.log and
// hook.log drop nothing and hold whole records, agent-2 answers. A
// session start asking --disk 48M grows agent-2's disk at its launch; its
// disk unmounted (a host's reboot) is mounted again at the next launch,
// its clone on it; terminate unmounts agent-1's and gives its 32 MiB
// back. Before D82, node.json's session_limits.disk was refused (a key
// the node did not know), and a session filled the node's disk.
func TestSessionPastItsDisk(t *testing.T) {
	needs(t, "ocxd", "workspace")
	if why := unixhost.DiskWhy(); why != "" {
		t.Skipf("this host makes no disks (%s): TestDiskRefusedWhereItCannotBeGiven tests the refusal", why)
	}
	n := newNodeOnTmpfs(t, "256m")
	admin := n.srv.AdminLogin
	n.setNodeDisk("32M")
	startDaemon(t, n, program("ocxd"))

	if sl := n.status().SessionLimits; sl == nil || sl.Disk != 32<<20 || sl.DiskNotApplied != "" {
		t.Errorf("the status's session limits: %+v, want disk 32 MiB applied", sl)
	}
	records := map[string]string{}
	for _, login := range []string{agent, "agent-2"} {
		n.must("", "login", "add", login)
		records[login] = n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
		ws := n.seen(n.workspaceDir(login))
		size, _, dev := fsOf(t, ws)
		_, _, parent := fsOf(t, filepath.Dir(ws))
		if dev == parent || size > 32<<20 || size < 24<<20 {
			t.Fatalf("%s's workspace: %d bytes on device %d (its parent's %d): not a disk of 32 MiB of its own", login, size, dev, parent)
		}
		if _, err := os.Stat(filepath.Join(ws, "clone")); err != nil {
			t.Errorf("%s's clone is not on its disk: %v", login, err)
		}
		n.result(admin, "session", "start", login+"/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", diskScript)
	}
	n.waitFor("both sessions to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 2 && st.Sessions[0].Listening && st.Sessions[1].Listening
	})

	root := n.seen(n.agents)
	_, before, _ := fsOf(t, root)
	fill := n.result(person, "post", "--to", records[agent], "--text", "fill")
	r := n.awaitReplyBy(agent, records[agent], fill)
	t.Logf("agent-1 after filling its disk: %q", r.Text)
	if !strings.Contains(r.Text, "No space left on device") {
		t.Errorf("the agent filling its disk was not told ENOSPC: %q", r.Text)
	}
	var kib uint64
	if _, err := fmt.Sscanf(r.Text[strings.Index(r.Text, "filled"):], "filled %d KiB", &kib); err != nil || kib > 32<<10 || kib < 16<<10 {
		t.Errorf("the agent wrote %d KiB into a 32 MiB disk (%v)", kib, err)
	}
	_, after, _ := fsOf(t, root)
	if after+(1<<20) < before {
		t.Errorf("the node's file system lost %d bytes while an agent filled its own disk", before-after)
	}
	t.Logf("the node's file system: %d bytes free before the fill, %d after", before, after)

	ping := n.result(person, "post", "--to", records["agent-2"], "--text", "ping")
	if r := n.awaitReplyBy("agent-2", records["agent-2"], ping); !strings.Contains(r.Text, "echo: ping") {
		t.Errorf("agent-2's reply: %q", r.Text)
	}
	daemonLog, hookLog := n.seen(filepath.Join(n.agents, "ocxd.log")), n.seen(filepath.Join(n.agents, "hook.log"))
	if d, h := droppedIn(t, daemonLog), droppedIn(t, hookLog); d != 0 || h != 0 {
		t.Errorf("the node's logs dropped records: ocxd.log %d, hook.log %d", d, h)
	}
	n.logLines()
	textRecords(t, hookLog)

	// A session asking more: its disk grown at its launch.
	n.must("", "session", "stop", "agent-2/demo")
	n.waitSessionGone("agent-2")
	ws2 := n.seen(n.workspaceDir("agent-2"))
	again := n.result(admin, "session", "start", "agent-2/demo", "--disk", "48M", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", diskScript)
	if _, ok := n.serving(again); !ok {
		t.Fatal("agent-2's session asking 48M does not run")
	}
	if size, _, _ := fsOf(t, ws2); size < 36<<20 || size > 48<<20 {
		t.Errorf("agent-2's disk is %d bytes after a launch asking 48M", size)
	}

	// Its disk unmounted, as after a host's reboot: the next launch mounts
	// it again, its clone on it.
	n.must("", "session", "stop", "agent-2/demo")
	n.waitSessionGone("agent-2")
	if out, err := n.command(nil, "umount", n.workspaceDir("agent-2")).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(ws2, "clone")); err == nil {
		t.Fatal("the clone is still there with the disk unmounted")
	}
	back := n.result(admin, "session", "start", "agent-2/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", diskScript)
	if _, ok := n.serving(back); !ok {
		t.Fatal("agent-2's session does not run after its disk was unmounted")
	}
	if _, err := os.Stat(filepath.Join(ws2, "clone")); err != nil {
		t.Errorf("the clone after the launch mounted the disk again: %v", err)
	}
	if size, _, _ := fsOf(t, ws2); size > 32<<20 {
		t.Errorf("agent-2's disk is %d bytes at a launch asking the node's 32M", size)
	}
	pong := n.result(person, "post", "--to", records["agent-2"], "--text", "pong")
	n.awaitReplyBy("agent-2", records["agent-2"], pong)

	// Terminated: unmounted, its image gone, its room back.
	n.must("", "session", "stop", agent+"/demo")
	n.waitSessionGone(agent)
	n.must(admin, "workspace", "terminate", agent+"/demo")
	wl, _ := n.layoutWorkspace(agent)
	if _, err := os.Stat(n.seen(wl.Disk)); err == nil {
		t.Errorf("the terminated workspace's disk image %s is left", wl.Disk)
	}
	if _, free, _ := fsOf(t, root); free < after+(24<<20) {
		t.Errorf("the node's file system has %d bytes free after the terminate, %d before: the disk's room did not come back", free, after)
	}
}

// TestRunPastItsDisk: a run asking limits.disk 32M has its workspace on
// a file system of that size, which its directory step makes: its dd is
// told ENOSPC inside the sandbox, the node's disk loses nothing, and once
// the run has ended its disk is unmounted and its image removed. A run
// asking limits.disk without a directory step is refused (row 8), naming
// why. Before D82 limits.disk was refused as a key table 7 lacks.
func TestRunPastItsDisk(t *testing.T) {
	needs(t, "ocxd")
	if why := unixhost.DiskWhy(); why != "" {
		t.Skipf("this host makes no disks (%s): TestDiskRefusedWhereItCannotBeGiven tests the refusal", why)
	}
	n := newNodeOnTmpfs(t, "256m")
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	root := n.seen(n.agents)
	_, before, _ := fsOf(t, root)
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Fill its disk.",
"workspace": [{"step": "directory", "at": "$$root$$/fill"}],
"sandbox": {"uid": 1000, "gid": 1000, "capabilities": [], "network": false, "own_session": true, "ends_with_node": false,
  "read_only": ["/usr", "/bin", "/lib", "/lib64"], "read_write": ["$$workspace$$"], "homes": [], "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/sandbox-tmp"},
"limits": {"disk": "32M"},
"process": {"user": "builder", "command": ["/bin/sh", "-c", "dd if=/dev/zero of=$$workspace$$/fill bs=64k 2>&1 | grep -o 'No space left on device' | head -1; du -k $$workspace$$/fill | cut -f1"],
  "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`, node)
	rec := n.result(admin, "thread", "--title", "Past its disk", "--text", block(run))
	n.waitFor("the run's ended", func() bool { return n.endedOf(rec) != nil })
	e := n.endedOf(rec)
	out := strings.Join(n.keptStdouts(rec), "\n")
	t.Logf("ended %+v\n%s", e, out)
	if e.Outcome != runmsg.RunExited || n.startedOf(rec) == nil {
		t.Fatalf("ended %+v; want started, then exited", e)
	}
	if st := n.startedOf(rec); st.Limits.Disk != "32M" {
		t.Errorf("started's limits: %+v, want disk 32M as written", st.Limits)
	}
	if !strings.Contains(out, "No space left on device") {
		t.Errorf("the run filling its disk was not told ENOSPC:\n%s", out)
	}
	kib := uint64(0)
	for _, line := range strings.Split(out, "\n") {
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "%d", &kib); err == nil {
			break
		}
	}
	if kib == 0 || kib > 32<<10 {
		t.Errorf("the run wrote %d KiB into a 32 MiB disk", kib)
	}
	l, _ := host.NewLayout(n.agents)
	img, _ := l.RunDisk(rec)
	n.waitFor("the run's disk removed", func() bool {
		_, err := os.Stat(n.seen(img))
		return os.IsNotExist(err)
	})
	// Measured once the disk is removed: until then its image, on the
	// node's file system, holds what the run wrote, and the node removes
	// it only after ended is on the record (and its backoffice ran).
	if _, after, _ := fsOf(t, root); after+(1<<20) < before {
		t.Errorf("the node's file system lost %d bytes to the run's fill", before-after)
	}
	ws := n.seen(filepath.Join(n.agents, "ocxd.work", "fill"))
	_, _, dev := fsOf(t, ws)
	_, _, parent := fsOf(t, filepath.Dir(ws))
	if dev != parent {
		t.Errorf("the run's disk is still mounted at its workspace after it ended")
	}

	// Without a directory step there is no workspace to give a disk.
	bare := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "A disk and no workspace.",
"sandbox": {"uid": 1000, "gid": 1000, "capabilities": [], "network": false, "own_session": true, "ends_with_node": false,
  "read_only": ["/usr", "/bin", "/lib", "/lib64"], "read_write": [], "homes": [], "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/tmp"},
"limits": {"disk": "32M"},
"process": {"user": "builder", "command": ["/bin/true"], "env": {"PATH": "/usr/bin:/bin"}}}`, node)
	rec2 := n.result(admin, "thread", "--title", "A disk and no workspace", "--text", block(bare))
	n.waitFor("the second run's ended", func() bool { return n.endedOf(rec2) != nil })
	if e := n.endedOf(rec2); e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "limits.disk is not provided by this node") || !strings.Contains(e.Note, "0 directory steps") {
		t.Errorf("a run asking a disk without a workspace: %+v, want refused naming why", e)
	}
}

// TestDiskRefusedWhereItCannotBeGiven: a session asking limits.disk of a
// workspace that has no disk of its own (node.json gives none, or the
// host makes none) is refused by `session start` before anything is
// written, naming why; where the host makes no disks the reason is the
// host's (unixhost.DiskWhy). The daemon refuses its launch for the same
// reasons (reaper.disk).
func TestDiskRefusedWhereItCannotBeGiven(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	startDaemon(t, n, program("ocxd"))
	n.must("", "login", "add", agent)
	rec := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	launches := len(notesOn[*messages.LaunchNote](n, rec))
	a, r := n.answer(admin, "session", "start", agent+"/demo", "--disk", "64M", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", echoScript)
	want := "was made without a disk of its own"
	if why := unixhost.DiskWhy(); why != "" {
		want = why
	}
	if r.code != 1 || a.Stopped == nil || !strings.Contains(*a.Stopped, "limits.disk") || !strings.Contains(*a.Stopped, want) {
		t.Fatalf("a start asking a disk the workspace cannot have: want exit 1 naming limits.disk and %q:\n%s", want, r)
	}
	t.Logf("refused: %s", *a.Stopped)
	if got := len(notesOn[*messages.LaunchNote](n, rec)); got != launches {
		t.Errorf("a refused start posted a launch note")
	}
}
