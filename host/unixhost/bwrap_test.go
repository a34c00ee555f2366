//go:build linux

package unixhost

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

const launchHash = "aaaabbbbccccddddeeeeffff0000111122223333"

// sandboxSetup is an agents root with the workspace alice/demo, a release
// root whose release r1 holds the test binary as `workspace`, a home to
// bind, and the other logins' files a sandbox must not see.
type sandboxSetup struct {
	root        *Root
	layout      host.Layout
	ws          host.Workspace
	releaseRoot string
	release     string
	exe         string
	home        string
	secret      string
	other       string // another release, which the sandbox must not see
}

func newSandboxSetup(t testing.TB) sandboxSetup {
	t.Helper()
	var s sandboxSetup
	s.root, s.layout, s.ws = agentsRoot(t, messages.WorkspaceKey{Login: "alice", Project: "demo"})
	if err := s.root.MkdirAll(s.ws.Tree, 0o755); err != nil {
		t.Fatal(err)
	}
	pw, _ := s.layout.Password("alice")
	if err := s.root.WriteFile(pw, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.secret = pw
	s.releaseRoot = filepath.Join(t.TempDir(), "release")
	s.release = filepath.Join(s.releaseRoot, "releases", "r1")
	if err := os.MkdirAll(s.release, 0o755); err != nil {
		t.Fatal(err)
	}
	s.other = filepath.Join(s.releaseRoot, "releases", "r0")
	if err := os.MkdirAll(s.other, 0o755); err != nil {
		t.Fatal(err)
	}
	s.exe = filepath.Join(s.release, "workspace")
	if err := os.Link(testExe(t), s.exe); err != nil {
		copyFile(t, testExe(t), s.exe)
	}
	if err := os.Symlink("releases/r1", filepath.Join(s.releaseRoot, "current")); err != nil {
		t.Fatal(err)
	}
	s.home = filepath.Join(t.TempDir(), ".tool")
	if err := os.MkdirAll(s.home, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.home, "config"), []byte("x"), 0o644)
	return s
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
}

func (s sandboxSetup) spec(network bool, mode string, env ...string) host.SpawnSpec {
	sb := messages.Sandbox{
		Network:   network,
		ReadOnly:  []string{"/usr", "/lib", "/lib64", "/bin", "/etc/passwd", "/nonexistent/ok-to-miss"},
		ReadWrite: []string{s.ws.Dir},
		Homes:     []string{s.home},
		Path:      []string{s.release, "/usr/bin", "/bin"},
	}
	return host.SpawnSpec{
		Path: s.exe,
		Args: []string{"workspace", "serve", "alice/demo", "--root", s.layout.Root(), "--launch", launchHash},
		Env:  append([]string{helperEnv + "=" + mode}, env...),
		Dir:  s.ws.Tree,
		Log:  s.ws.Log,
		Sandbox: &host.SandboxSpec{
			Sandbox:   sb,
			Workspace: s.ws.Dir,
			Release:   s.release,
		},
	}
}

var reportRE = regexp.MustCompile(`(?m)^REPORT (.*)$`)

// A command in the sandbox sees what the definition states and nothing of
// the node's own files; it exits and bwrap reports its code.
func TestSandboxSeesWhatItShould(t *testing.T) {
	for _, network := range []bool{false, true} {
		t.Run(fmt.Sprintf("network=%v", network), func(t *testing.T) {
			s := newSandboxSetup(t)
			l := newLauncher(t, s.root)
			x := newExits()
			hostTmp, err := os.CreateTemp("", "host-only")
			if err != nil {
				t.Fatal(err)
			}
			hostTmp.Close()
			defer os.Remove(hostTmp.Name())
			probe := []string{
				s.secret, s.other, filepath.Join(s.ws.Dir, ".tool", "config"),
				"/usr/bin/env", "/root", hostTmp.Name(), s.ws.Wake, s.exe,
				filepath.Join(s.releaseRoot, "current"),
			}
			id, err := l.Spawn(s.spec(network, "report", "HELPER_CODE=7", "HELPER_PROBE="+strings.Join(probe, ":")), x.on)
			if err != nil {
				t.Fatal(err)
			}
			e := x.wait(t, id)
			log := readFile(t, s.ws.Log)
			if out, status := e.Outcome(); out != host.OutcomeExited || status != 7 || e.Sandbox == nil || !e.Sandbox.Reported || e.Sandbox.ChildPID <= 0 {
				t.Fatalf("exit %s; log:\n%s", e, log)
			}
			m := reportRE.FindStringSubmatch(log)
			if m == nil {
				t.Fatalf("no report in the log:\n%s", log)
			}
			var r struct {
				PID    int             `json:"pid"`
				Home   string          `json:"home"`
				Path   string          `json:"path"`
				WD     string          `json:"wd"`
				Env    []string        `json:"env"`
				Seen   map[string]bool `json:"seen"`
				Procs  int             `json:"procs"`
				Ifaces int             `json:"ifaces"`
				Wrote  bool            `json:"wrote"`
			}
			if err := json.Unmarshal([]byte(m[1]), &r); err != nil {
				t.Fatal(err)
			}
			if r.Home != s.ws.Dir || r.WD != s.ws.Tree || r.Path != s.release+":/usr/bin:/bin" {
				t.Errorf("home %q wd %q path %q", r.Home, r.WD, r.Path)
			}
			// The environment is what was given, plus HOME and PATH.
			for _, kv := range r.Env {
				name, _, _ := strings.Cut(kv, "=")
				switch name {
				// bwrap sets PWD for --chdir.
				case helperEnv, "HELPER_CODE", "HELPER_PROBE", "HOME", "PATH", "PWD":
				default:
					t.Errorf("the sandbox has %s in its environment", kv)
				}
			}
			want := map[string]bool{
				s.secret: false, s.other: false, filepath.Join(s.ws.Dir, ".tool", "config"): true,
				"/usr/bin/env": true, "/root": false, hostTmp.Name(): false, s.ws.Wake: true, s.exe: true,
				filepath.Join(s.releaseRoot, "current"): false,
			}
			for p, w := range want {
				if r.Seen[p] != w {
					t.Errorf("sees %s: %v, want %v", p, r.Seen[p], w)
				}
			}
			// Its own PID namespace: bwrap's init and the command.
			if r.PID > 3 || r.Procs > 3 {
				t.Errorf("inside: pid %d, %d processes in /proc", r.PID, r.Procs)
			}
			if network && r.Ifaces < 2 || !network && r.Ifaces != 1 {
				t.Errorf("network %v: %d interfaces", network, r.Ifaces)
			}
			if !r.Wrote || readFile(t, filepath.Join(s.ws.Dir, "written-inside")) != "hello\n" {
				t.Error("what it wrote in its home is not in the workspace")
			}
		})
	}
}

// A bad bind makes bwrap fail before the command runs, and that is told
// apart from the command's own exit, even an exit with bwrap's code 1.
func TestSandboxFailureToldApart(t *testing.T) {
	s := newSandboxSetup(t)
	l := newLauncher(t, s.root)
	x := newExits()
	spec := s.spec(false, "exit", "HELPER_CODE=1")
	spec.Sandbox.Sandbox.ReadWrite = append(spec.Sandbox.Sandbox.ReadWrite, "/nonexistent/must-exist")
	id, err := l.Spawn(spec, x.on)
	if err != nil {
		t.Fatal(err)
	}
	e := x.wait(t, id)
	log := readFile(t, s.ws.Log)
	if out, _ := e.Outcome(); out != host.OutcomeSandboxFailed || e.Sandbox.Reported || !strings.Contains(log, "bwrap:") {
		t.Fatalf("exit %s; log:\n%s", e, log)
	}
	id, err = l.Spawn(s.spec(false, "exit", "HELPER_CODE=1"), x.on)
	if err != nil {
		t.Fatal(err)
	}
	e = x.wait(t, id)
	if out, status := e.Outcome(); out != host.OutcomeExited || status != 1 || !e.Sandbox.Reported {
		t.Fatalf("the command's own exit 1: %s", e)
	}
}

// A session in its sandbox: the process table names its workspace three
// times (bwrap, bwrap's init, workspace serve), all started by the daemon,
// the session listening and on release r1. TERM reaches the command inside
// and bwrap reports its exit.
func TestSandboxedSessionTableAndStop(t *testing.T) {
	s := newSandboxSetup(t)
	readyP, lines := readyPipe(t, s.ws.Dir)
	l := newLauncher(t, s.root)
	x := newExits()
	pt, err := NewProcTable(ProcOptions{Layout: s.layout, ReleaseRoot: s.releaseRoot, Daemon: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	if err := pt.Watch(); err != nil {
		t.Fatal(err)
	}
	k := s.ws.Key
	id, err := l.Spawn(s.spec(false, "serve", "HELPER_WAKE="+s.ws.Wake, "HELPER_READY="+readyP), x.on)
	if err != nil {
		t.Fatal(err)
	}
	// Named as soon as bwrap's exec is reported, a moment after Spawn
	// returns (ForkExec returns when the exec closes the child's
	// close-on-exec descriptors, before the kernel sets up its command line
	// and reports the exec; docs/host.md).
	for deadline := time.Now().Add(10 * time.Second); ; {
		v, err := pt.Naming(k)
		if err == nil && v.Named == host.Yes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Naming after Spawn = %s %v", v, err)
		}
		time.Sleep(time.Millisecond)
	}
	await(t, lines, "session ready")
	tab, err := pt.Scan()
	if err != nil {
		t.Fatal(err)
	}
	var serve *host.Process
	comms := map[string]int{}
	for i, p := range tab.Procs {
		if n, _ := p.NamesKey(k); !n {
			continue
		}
		comms[p.Comm]++
		if p.Origin != messages.OriginDaemon {
			t.Errorf("%s %q: origin %q", p.ID, p.Comm, p.Origin)
		}
		if p.Names[0].Verb == host.VerbServe {
			serve = &tab.Procs[i]
		}
	}
	if comms["bwrap"] != 2 || serve == nil {
		t.Fatalf("table: %+v", tab.Procs)
	}
	if serve.Listening != host.Yes || serve.Release != "r1" || serve.Names[0].Launch != launchHash {
		t.Fatalf("serve: listening %v release %q launch %q exe %q", serve.Listening, serve.Release, serve.Names[0].Launch, serve.Exe)
	}
	v, err := pt.Naming(k)
	if err != nil || v.Named != host.Yes || len(v.By) != 3 {
		t.Fatalf("Naming = %s %v", v, err)
	}
	if err := l.Signal(id, host.SIGTERM); err != nil {
		t.Fatal(err)
	}
	e := x.wait(t, id)
	log := readFile(t, s.ws.Log)
	if out, status := e.Outcome(); out != host.OutcomeExited || status != 0 || !e.Sandbox.Reported || !strings.Contains(log, "got TERM") {
		t.Fatalf("exit %s; log:\n%s", e, log)
	}
	// Every exit was queued before bwrap was reaped, so the answer is fresh.
	if v, err := pt.Naming(k); err != nil || v.Named != host.No {
		t.Fatalf("Naming after the end = %s %v", v, err)
	}
}

// A session that ignores TERM is ended by KILL, which ends its whole PID
// namespace; bwrap still reports the code.
func TestSandboxKill(t *testing.T) {
	s := newSandboxSetup(t)
	readyP, lines := readyPipe(t, s.ws.Dir)
	l := newLauncher(t, s.root)
	x := newExits()
	id, err := l.Spawn(s.spec(false, "serve", "HELPER_IGNORE_TERM=1", "HELPER_READY="+readyP), x.on)
	if err != nil {
		t.Fatal(err)
	}
	await(t, lines, "session ready")
	if err := l.Signal(id, host.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := l.Signal(id, host.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e := x.wait(t, id)
	if out, status := e.Outcome(); out != host.OutcomeExited || status != 128+9 || !e.Sandbox.Reported {
		t.Fatalf("exit %s; log:\n%s", e, readFile(t, s.ws.Log))
	}
}

// TERM to bwrap alone (what a stop to the daemon child's group would be)
// ends bwrap and orphans the session: this is why Signal goes inside. The
// orphans are then found in the table as orphans, by the node's record of
// the sandbox (D45): without it, nothing says whose sandbox it is, and its
// processes are look-alikes.
func TestSandboxOrphanedWhenBwrapDies(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		t.Run(fmt.Sprintf("recorded=%v", recorded), func(t *testing.T) { orphanedSandbox(t, recorded) })
	}
}

func orphanedSandbox(t *testing.T, recorded bool) {
	s := newSandboxSetup(t)
	readyP, lines := readyPipe(t, s.ws.Dir)
	l := newLauncher(t, s.root)
	x := newExits()
	id, err := l.Spawn(s.spec(false, "serve", "HELPER_WAKE="+s.ws.Wake, "HELPER_READY="+readyP), x.on)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := l.SandboxOf(id, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if recorded {
		if err := WriteSandboxRecord(s.root, s.ws, rec); err != nil {
			t.Fatal(err)
		}
	}
	await(t, lines, "session ready")
	if err := unix.Kill(-id.PID, unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	e := x.wait(t, id)
	if out, _ := e.Outcome(); out != host.OutcomeSignaled || e.Sandbox.Reported {
		t.Fatalf("exit %s", e)
	}
	if e.Sandbox.ChildPID != rec.Init.PID {
		t.Fatalf("bwrap's child %d, the record's init %s", e.Sandbox.ChildPID, rec.Init)
	}
	// The reaper's forgetting leaves the record of a sandbox that runs on.
	if err := ForgetSandbox(s.root, s.ws, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.ws.Sandbox); (err == nil) != recorded {
		t.Fatalf("the record after bwrap's end: %v", err)
	}
	// This test process is a subreaper, so the orphans come to it; the
	// daemon is then some other process.
	self := os.Getpid()
	pt, err := NewProcTable(ProcOptions{Layout: s.layout, Daemon: 0, Subreaper: func(pid int) bool { return pid == self }})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	tab, err := pt.Scan()
	if err != nil {
		t.Fatal(err)
	}
	var orphans []host.Process
	for _, p := range tab.Procs {
		if p.Origin == messages.OriginOrphan {
			orphans = append(orphans, p)
		}
	}
	v, err := pt.Naming(s.ws.Key)
	if recorded && (len(orphans) != 2 || v.Named != host.Yes || len(tab.LookAlikes) != 0) {
		t.Fatalf("recorded: orphans %+v, look-alikes %+v, %s %v", orphans, tab.LookAlikes, v, err)
	}
	if !recorded {
		if len(tab.Procs) != 0 || len(tab.LookAlikes) != 2 || v.Named != host.No || len(v.LookAlikes) != 2 {
			t.Errorf("unrecorded: processes %+v, look-alikes %+v, %s %v; want the two as look-alikes", tab.Procs, tab.LookAlikes, v, err)
		}
		for _, la := range tab.LookAlikes {
			orphans = append(orphans, la.Process)
		}
	}
	if len(orphans) != 2 {
		t.Fatalf("orphans %+v", orphans)
	}
	// The init is this process's child now; killing it ends the namespace.
	if err := l.Signal(orphans[0].ID, host.SIGKILL); err != nil && !errors.Is(err, host.ErrGone) {
		t.Fatal(err)
	}
	killReap(e.Sandbox.ChildPID)
	eventually(t, "the orphans ended", func() bool {
		tab, err := pt.Scan()
		return err == nil && len(tab.Procs) == 0 && len(tab.LookAlikes) == 0
	})
	if err := ForgetSandbox(s.root, s.ws, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.ws.Sandbox); err == nil {
		t.Errorf("the record is left after its sandbox ended")
	}
}

// A sandbox that binds the release root's current link shows the executable
// as .../current/workspace; the table still names the release, by inode.
func TestReleaseThroughCurrentLink(t *testing.T) {
	s := newSandboxSetup(t)
	readyP, lines := readyPipe(t, s.ws.Dir)
	l := newLauncher(t, s.root)
	x := newExits()
	current := filepath.Join(s.releaseRoot, "current")
	spec := s.spec(false, "serve", "HELPER_READY="+readyP)
	spec.Path = filepath.Join(current, "workspace")
	spec.Sandbox.Release = ""
	spec.Sandbox.Sandbox.ReadOnly = append(spec.Sandbox.Sandbox.ReadOnly, current)
	id, err := l.Spawn(spec, x.on)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		l.Signal(id, host.SIGKILL)
		x.wait(t, id)
	}()
	await(t, lines, "session ready")
	pt, err := NewProcTable(ProcOptions{Layout: s.layout, ReleaseRoot: s.releaseRoot})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	tab, err := pt.Scan()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range tab.Procs {
		if p.Names[0].Verb != host.VerbServe {
			continue
		}
		found = true
		if p.Exe != spec.Path || p.Release != "r1" {
			t.Fatalf("exe %q release %q", p.Exe, p.Release)
		}
	}
	if !found {
		t.Fatalf("no serve process: %+v", tab.Procs)
	}
}
