package itest

import (
	"bytes"
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

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// The people of every test node: the repository's admin (setup) and a
// person who may read, post and open tickets.
const (
	person   = "alice"
	personPW = "alice-pw-1"
)

// testNode is a real fossil server with OCX's node around it: an agents
// root made by `ocx init` for the test's release, and the hook installed by
// `ocx hook install`.
type testNode struct {
	t      testing.TB
	ctx    context.Context
	srv    *harness.Server
	agents string
	pw     map[string]string
	// fossilClients says the test pushes with the fossil command too (a
	// committer), not only through OCX.
	fossilClients bool
	// env is added to the environment of each ocx run (goEnv's, for the
	// tools that build releases).
	env []string
	// host, when set, is the host of its own the node runs on (a node on
	// another host, D72): its ocx and ocxd run there.
	host *harness.Host
	// ownDisk: the agents root is a disk of the host's own (a small tmpfs
	// in its mount namespace), which the test sees through host.Path.
	ownDisk bool
	// pokeURL is, on a node on another host that takes pokes, where the
	// test reaches them.
	pokeURL string
}

// seen is the path p below the agents root as the test sees it: on the
// node's host, when the root is a disk of the host's own.
func (n *testNode) seen(p string) string {
	if n.host != nil && n.ownDisk {
		return n.host.Path(p)
	}
	return p
}

// command is a program of the node's run where the node runs: on its host
// of its own, when it has one.
func (n *testNode) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if n.host != nil {
		return n.host.Command(ctx, name, args...)
	}
	if ctx == nil {
		return exec.Command(name, args...)
	}
	return exec.CommandContext(ctx, name, args...)
}

func newNode(t testing.TB) *testNode { return newNodeWith(t) }

// newNodeWith is newNode with more people, each who may read, post and
// push as alice may.
func newNodeWith(t testing.TB, people ...harness.User) *testNode {
	t.Helper()
	return newNodeOn(t, relRoot, people...)
}

// newNodeOn is newNodeWith on the release root root.
func newNodeOn(t testing.TB, root string, people ...harness.User) *testNode {
	t.Helper()
	users := append([]harness.User{{Login: person, Password: personPW, Caps: "cghijnorwz234"}}, people...)
	srv := harness.StartServer(t, harness.Options{Users: users})
	n := &testNode{t: t, ctx: context.Background(), srv: srv, agents: filepath.Join(t.TempDir(), "agents"),
		pw: map[string]string{srv.AdminLogin: srv.AdminPassword}}
	for _, u := range users {
		n.pw[u.Login] = u.Password
	}
	t.Cleanup(n.shutdown)
	n.must("", "init", "--project", "demo="+srv.Repo+","+srv.URL, "--release", root)
	n.must("", "hook", "install")
	return n
}

// result is what one run of ocx gave.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return "ocx " + strings.Join(r.args, " ") + " -> exit " + strconv.Itoa(r.code) + "\nstdout:\n" + r.stdout + "stderr:\n" + r.stderr
}

// ocx runs the release's ocx as user (none when ""), with the agents root
// in the environment and the user's password in OCX_PASSWORD.
func (n *testNode) ocx(user string, args ...string) result {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.ctx, 3*time.Minute)
	defer cancel()
	cmd := n.command(ctx, program("ocx"), args...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + n.agents, "LANG=C.UTF-8", "OCX_AGENTS=" + n.agents}
	if user != "" {
		cmd.Env = append(cmd.Env, "OCX_USER="+user, "OCX_PASSWORD="+n.pw[user])
	}
	cmd.Env = append(cmd.Env, n.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		n.t.Fatalf("ocx %v: %v", args, err)
	}
	return r
}

// must runs ocx and fails the test unless it exits 0.
func (n *testNode) must(user string, args ...string) result {
	n.t.Helper()
	r := n.ocx(user, args...)
	if r.code != 0 {
		n.t.Fatalf("%s", r)
	}
	return r
}

// answer is the tools' one answer shape (seed 001 E8).
type answer struct {
	Tool    string   `json:"tool"`
	DryRun  bool     `json:"dry_run"`
	Log     []string `json:"log"`
	Result  *string  `json:"result"`
	Stopped *string  `json:"stopped"`
}

// answer runs ocx with --json and decodes the tools' answer.
func (n *testNode) answer(user string, args ...string) (answer, result) {
	n.t.Helper()
	// --json goes before a "--" that ends the flags.
	withJSON := append([]string{}, args...)
	for i, a := range args {
		if a == "--" {
			withJSON = append(append(append([]string{}, args[:i]...), "--json"), args[i:]...)
			break
		}
	}
	if len(withJSON) == len(args) {
		withJSON = append(withJSON, "--json")
	}
	r := n.ocx(user, withJSON...)
	var a answer
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		n.t.Fatalf("not an answer: %v\n%s", err, r)
	}
	if (a.Stopped == nil) != (r.code == 0) {
		n.t.Errorf("exit %d with stopped %v", r.code, a.Stopped)
	}
	return a, r
}

// result runs ocx --json and returns the answer's result, failing the test
// unless it did its work.
func (n *testNode) result(user string, args ...string) string {
	n.t.Helper()
	a, r := n.answer(user, args...)
	if a.Stopped != nil || a.Result == nil {
		n.t.Fatalf("no result: %s", r)
	}
	return *a.Result
}

// repo opens the node's repository for reading.
func (n *testNode) repo() *fossilio.Repo {
	n.t.Helper()
	r, err := fossilio.OpenNode(n.srv.Repo, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	return r
}

// posted is a note or text on the record and who sent it, as the node's
// repository recorded it.
type posted struct {
	Hash, Sender, InReplyTo, Text string
	Note                          messages.Note
}

// thread reads a thread's posts (first versions).
func (n *testNode) thread(root string) []posted {
	n.t.Helper()
	r := n.repo()
	defer r.Close()
	posts, err := r.Thread(n.ctx, root)
	if err != nil {
		n.t.Fatal(err)
	}
	var out []posted
	for _, p := range posts {
		note, _ := messages.ReadPost([]byte(p.Text))
		out = append(out, posted{Hash: p.Hash, Sender: p.Sender, InReplyTo: p.InReplyTo, Text: p.Text, Note: note})
	}
	return out
}

// ticket reads a ticket's changes.
func (n *testNode) ticket(id string) []posted {
	n.t.Helper()
	r := n.repo()
	defer r.Close()
	changes, err := r.TicketChanges(n.ctx, id)
	if err != nil {
		n.t.Fatal(err)
	}
	var out []posted
	for _, c := range changes {
		note, _ := messages.ReadPost([]byte(c.Comment))
		out = append(out, posted{Hash: c.Hash, Sender: c.Sender, Text: c.Comment, Note: note})
	}
	return out
}

// status runs `ocx status --json` and decodes it.
func (n *testNode) status() *messages.NodeState {
	n.t.Helper()
	r := n.must("", "status", "--json")
	st, err := messages.DecodeState([]byte(r.stdout))
	if err != nil {
		n.t.Fatalf("the status does not decode: %v\n%s", err, r.stdout)
	}
	return st
}

// waitFor polls cond until it holds, failing the test after a generous
// bound; what names what is awaited.
func (n *testNode) waitFor(what string, cond func() bool) {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(n.seen(filepath.Join(n.agents, "hook.log")))
			dlog, _ := os.ReadFile(n.seen(filepath.Join(n.agents, "ocxd.log")))
			hooks, _ := n.srv.Fossil("hook", "status", "-R", n.srv.Repo)
			lease, _ := n.srv.Fossil("test-backoffice-lease", "-R", n.srv.Repo)
			rcv, _ := n.srv.Fossil("sql", "-R", n.srv.Repo, "SELECT rcvid, uid, ipaddr, datetime(mtime) FROM rcvfrom ORDER BY rcvid DESC LIMIT 5")
			blobs, _ := n.srv.Fossil("sql", "-R", n.srv.Repo, "SELECT rid, rcvid, size, uuid FROM blob ORDER BY rid DESC LIMIT 8")
			logs, _ := filepath.Glob(filepath.Join(n.seen(n.agents), "*", "projects", "*", "session", "log"))
			mcpLogs, _ := filepath.Glob(filepath.Join(n.seen(n.agents), "*", "mcp", "*.log"))
			logs = append(logs, mcpLogs...)
			for _, l := range logs {
				// A session's log is its agent's to replace with a pipe.
				b, _, _ := unixhost.Below(n.seen(n.agents)).ReadTail(l, 64<<10)
				blobs += "\n" + l + ":\n" + string(lastLines(b, 40))
			}
			n.t.Fatalf("waited 60 s for %s\nhook.log:\n%s\nocxd.log:\n%s\nfossil hook status:\n%s\nbackoffice lease:\n%s\nlast receipts:\n%s\nlast artifacts:\n%s",
				what, log, dlog, hooks, lease, rcv, blobs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// daemonPID is the PID holding the daemon's lock, 0 when none.
func (n *testNode) daemonPID() int {
	pid, held, err := unixhost.LockHolder(n.seen(filepath.Join(n.agents, "ocxd.lock")))
	if err != nil {
		n.t.Fatal(err)
	}
	if !held {
		return 0
	}
	return pid
}

// naming lists the processes whose command line names the agents root.
func (n *testNode) naming() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(n.agents)) {
			continue
		}
		if st, err := unixhost.ReadStat(pid); err == nil && !st.Zombie() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hookRunning says whether a run of the hook for this agents root is going.
func (n *testNode) hookRunning() bool {
	for _, pid := range n.naming() {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		args := strings.Split(string(cmd), "\x00")
		if len(args) > 1 && args[1] == "hook" || filepath.Base(args[0]) == host.HookProgram {
			return true
		}
	}
	return false
}

// anyServing says whether a `workspace serve` process names the agents root.
func (n *testNode) anyServing() bool {
	for _, pid := range n.naming() {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if args := strings.Split(string(cmd), "\x00"); len(args) > 1 && filepath.Base(args[0]) == "workspace" && args[1] == "serve" {
			return true
		}
	}
	return false
}

// shutdown ends what the test's node started, by PID: the daemon (TERM; it
// leaves its sessions running, so a test stops those first), then anything
// left naming the agents root, which fails the test.
func (n *testNode) shutdown() {
	// No test leaves the node holding back its hooks.
	if !n.t.Failed() {
		n.hooksFree()
	}
	// A test that failed half-way may leave a session running: stop each
	// through the daemon, as a person would, before ending the daemon.
	stopped := false
	for _, pid := range n.naming() {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		args := strings.Split(string(cmd), "\x00")
		if len(args) > 2 && filepath.Base(args[0]) == "workspace" && args[1] == "serve" {
			n.ocx("", "session", "stop", args[2])
			stopped = true
		}
	}
	if stopped {
		deadline := time.Now().Add(15 * time.Second)
		for n.anyServing() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	// A hook run starts a daemon when posts arrive and none runs, so the
	// hook goes first; then the hook runs still going end, and each daemon
	// is stopped, until neither is left.
	n.ocx("", "hook", "remove")
	deadline := time.Now().Add(30 * time.Second)
	for quiet := 0; quiet < 2 && time.Now().Before(deadline); {
		busy := n.hookRunning()
		if !busy {
			if pid := n.daemonPID(); pid > 0 {
				busy = true
				_ = syscall.Kill(pid, syscall.SIGTERM)
				end := time.Now().Add(10 * time.Second)
				for n.daemonPID() == pid && time.Now().Before(end) {
					time.Sleep(20 * time.Millisecond)
				}
				if n.daemonPID() == pid {
					n.t.Errorf("the daemon (pid %d) did not end on TERM", pid)
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if busy {
			quiet = 0
		} else {
			quiet++
		}
		time.Sleep(100 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * time.Second)
	for len(n.naming()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := n.naming(); len(left) > 0 {
		for _, pid := range left {
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			n.t.Errorf("process %d still names the agents root at the end: %q", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	n.cgroupsGone()
}

// cgroupsGone removes the node's cgroups left empty (a session that ended
// while no daemon ran leaves one for the next daemon's sweep), and ends,
// with an error, what is left in one that still holds processes.
func (n *testNode) cgroupsGone() {
	cg := unixhost.HostCgroups()
	if cg.Why() != "" {
		return
	}
	l, _ := host.NewLayout(n.agents)
	cg.Sweep(l.CgroupNode())
	for _, d := range cg.Hierarchies().Dirs() {
		ents, _ := os.ReadDir(filepath.Join(d, l.CgroupNode()))
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			name := l.CgroupNode() + "/" + e.Name()
			g, err := cg.Open(name)
			if err != nil {
				continue
			}
			procs, _ := g.Procs()
			n.t.Errorf("the cgroup %s still holds processes %v at the end", name, procs)
			g.Kill(5 * time.Second)
			g.Remove(5 * time.Second)
		}
	}
}

// awaitListening waits until login's session holds its wake pipe: a post
// made before is noted unheard (no-reader), not answered.
func (n *testNode) awaitListening(login string) {
	n.t.Helper()
	n.waitFor(login+"'s session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == login && s.Listening {
				return true
			}
		}
		return false
	})
}
