//go:build linux

package unixhost

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// testCgroupNode is the node directory this test binary makes its
// cgroups in, its own so that tests run side by side never share one.
func testCgroupNode() string { return "ocx-unixhost-test-" + strconv.Itoa(os.Getpid()) }

// testCgroup names a cgroup for t, and removes it (and the node directory
// when it is empty) at the end of the test, whatever made it.
func testCgroup(t *testing.T, leaf string) string {
	t.Helper()
	name := testCgroupNode() + "/" + leaf
	t.Cleanup(func() {
		c := HostCgroups()
		if c.Why() != "" {
			return
		}
		if g, err := c.Open(name); err == nil {
			if err := g.Kill(5 * time.Second); err != nil {
				t.Errorf("the test's cgroup: %v", err)
			}
			if err := g.Remove(5 * time.Second); err != nil {
				t.Errorf("the test's cgroup: %v", err)
			}
		}
		for _, d := range c.Hierarchies().Dirs() {
			if _, err := os.Lstat(filepath.Join(d, name)); err == nil {
				t.Errorf("the test's cgroup %s is left in %s", name, d)
			}
		}
	})
	return name
}

// noCgroups tests the refusal where this host makes no cgroup, and says
// whether it did: the rest of the test then has nothing to test.
func noCgroups(t *testing.T, name string) bool {
	t.Helper()
	c := HostCgroups()
	if c.Why() == "" {
		return false
	}
	_, err := c.Make(name, host.CgroupLimits{Memory: 64 << 20})
	if !errors.Is(err, errNoCgroups) || !strings.Contains(err.Error(), c.Why()) {
		t.Fatalf("make on a host without cgroups: %v, want ErrNoCgroups and %q", err, c.Why())
	}
	t.Logf("no cgroup here: %s", c.Why())
	return true
}

// A cgroup is made with its limits, takes a process, is found again by
// its name, is not made again while it holds one, is removed once empty
// with the node's directory, and a sweep removes only empty ones.
func TestCgroupLifecycle(t *testing.T) {
	name := testCgroup(t, "life")
	if noCgroups(t, name) {
		return
	}
	c := HostCgroups()
	t.Logf("cgroups: %+v", c.Hierarchies())
	want := host.CgroupLimits{Memory: 48 << 20, Processes: 16}
	g, err := c.Make(name, want)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := c.Open(name); err != nil || o.Limits() != want {
		t.Fatalf("open: %+v %v, want %+v", o, err, want)
	}
	sleep := exec.Command("/bin/sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	if err := g.Join(sleep.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if procs, err := g.Procs(); err != nil || !slices.Contains(procs, sleep.Process.Pid) {
		t.Fatalf("procs %v %v", procs, err)
	}
	cg := readFile(t, "/proc/"+strconv.Itoa(sleep.Process.Pid)+"/cgroup")
	if !strings.Contains(cg, name) {
		t.Fatalf("the process is not in %s:\n%s", name, cg)
	}
	if _, err := c.Make(name, want); err == nil || !strings.Contains(err.Error(), "still holds processes") || !strings.Contains(err.Error(), strconv.Itoa(sleep.Process.Pid)) {
		t.Fatalf("made again while it holds a process: %v", err)
	}
	if err := g.Remove(0); err == nil || !strings.Contains(err.Error(), strconv.Itoa(sleep.Process.Pid)) {
		t.Fatalf("removed while it holds a process: %v", err)
	}
	empty := testCgroup(t, "empty")
	if _, err := c.Make(empty, host.CgroupLimits{Processes: 8}); err != nil {
		t.Fatal(err)
	}
	removed, err := c.Sweep(testCgroupNode())
	if err != nil || !slices.Equal(removed, []string{empty}) {
		t.Fatalf("sweep removed %q (%v), want the empty one alone", removed, err)
	}
	sleep.Process.Kill()
	sleep.Wait()
	if err := g.Remove(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.Hierarchies().Dirs() {
		if _, err := os.Lstat(filepath.Join(d, testCgroupNode())); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the node's directory is left in %s: %v", d, err)
		}
	}
	if _, err := c.Open(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open after remove: %v", err)
	}
	for _, bad := range []string{"", "one", "/abs/x", "a/../b", "a//b", "a/b/"} {
		if _, err := c.Make(bad, want); err == nil {
			t.Errorf("made %q", bad)
		}
	}
}

// A session's sandbox, spawned with a cgroup, is in it before its first
// instruction (its first command reads its own cgroups); past its memory
// limit a process is OOM-killed inside it, and a fork loop stops at its
// processes limit; the counts say both. The launcher leaves a session's
// cgroup to whoever follows the session.
func TestSpawnInCgroup(t *testing.T) {
	name := testCgroup(t, "session:alice:demo")
	if noCgroups(t, name) {
		return
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	script := `cat /proc/self/cgroup; dd if=/dev/zero of=/dev/null bs=256M count=1 2>/dev/null; echo dd $?
i=0; while [ $i -lt 30 ]; do sleep 2 & i=$((i+1)); done; echo forked; kill $(jobs -p) 2>/dev/null; exit 0`
	spec := host.SpawnSpec{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir, Log: log,
		Sandbox: &host.SandboxSpec{Sandbox: messages.Sandbox{ReadOnly: []string{"/usr", "/bin", "/lib", "/lib64"}}, Workspace: dir},
		Cgroup:  name, Limits: host.CgroupLimits{Memory: 32 << 20, Processes: 12}}
	l := newLauncher(t, nil)
	x := newExits()
	id, err := l.Spawn(spec, x.on)
	if err != nil {
		t.Fatal(err)
	}
	e := x.wait(t, id)
	out := readFile(t, log)
	t.Logf("exit %s\n%s", e, out)
	for _, ctl := range []string{"memory", "pids"} {
		if c := HostCgroups().Hierarchies(); c.Version == host.CgroupV2 {
			ctl = ""
		}
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, ":"+ctl) && strings.HasSuffix(line, "/session:alice:demo") {
				found = true
			}
		}
		if !found {
			t.Errorf("the sandbox's first command is not in the %s cgroup %s:\n%s", ctl, name, out)
		}
	}
	if !strings.Contains(out, "dd 137") {
		t.Errorf("dd past the memory limit was not killed:\n%s", out)
	}
	if !strings.Contains(out, "Cannot fork") && !strings.Contains(out, "fork") {
		t.Errorf("no fork failed at the processes limit:\n%s", out)
	}
	g, err := HostCgroups().Open(name)
	if err != nil {
		t.Fatalf("the session's cgroup is gone with the session: %v", err)
	}
	ev, err := g.Events()
	if err != nil || ev.OOMKills == 0 || ev.PidsMax == 0 || ev.Limit() != messages.LimitMemory {
		t.Fatalf("events %+v %v", ev, err)
	}
	// The sleeps the shell left keep the sandbox's init: they end with
	// the cgroup's Kill, and the launcher reaps the init.
	if err := g.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the sandbox's init reaped", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(e.Sandbox.ChildPID))
		return err != nil
	})
}

// A run with limits.memory is started (not refused) in its cgroup; past
// the limit the kernel kills a process inside it and the launcher ends the
// sandbox whole (the shell would sleep on); the exit says the limit, and
// the cgroup is removed.
func TestRunMemoryLimit(t *testing.T) {
	name := testCgroup(t, "run:memory")
	if noCgroups(t, name) {
		return
	}
	l := newLauncher(t, nil)
	if s := l.RunSupport(); s.Memory != "" || s.Processes != "" {
		t.Fatalf("a host making cgroups refuses memory or processes: %+v", s)
	}
	sb := systemSandbox()
	start := time.Now()
	r := run(t, l, host.RunSpec{Command: sh(`dd if=/dev/zero of=/dev/null bs=256M count=1 2>/dev/null; echo dd $?; sleep 60; echo survived`),
		Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Sandbox: &sb, Limits: host.RunLimits{Memory: 32 << 20}, Cgroup: name})
	t.Logf("exit %s in %s\n%s%s", r.exit, time.Since(start), r.stdout, r.stderr)
	if strings.Contains(r.stdout, "survived") || time.Since(start) > 30*time.Second {
		t.Fatalf("the run went on past its memory limit")
	}
	x := r.exit.Cgroup
	if x == nil || x.Name != name || x.Events.OOMKills == 0 || x.Events.Limit() != messages.LimitMemory || x.Limits.Memory != 32<<20 || x.Err != "" {
		t.Fatalf("the exit's cgroup: %+v", x)
	}
	if _, err := HostCgroups().Open(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the run's cgroup is left: %v", err)
	}
	// Without a name there is no cgroup to make.
	if _, err := l.StartRun(host.RunSpec{Command: []string{"/bin/true"}, Dir: "/", Sandbox: &sb, Limits: host.RunLimits{Memory: 1 << 30}}, func(host.Exit) {}); err == nil {
		t.Fatal("a run with limits.memory and no cgroup name started")
	}
}

// As root, limits.processes is the run's cgroup's pids.max: a fork loop
// stops there, counting bwrap's init and the shell.
func TestRunProcessesInCgroup(t *testing.T) {
	name := testCgroup(t, "run:processes")
	if noCgroups(t, name) {
		return
	}
	l := newLauncher(t, nil)
	sb := systemSandbox()
	r := run(t, l, host.RunSpec{Command: sh(`i=0; while [ $i -lt 20 ]; do sleep 1 & i=$((i+1)); echo started $i; done; kill $(jobs -p)`),
		Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Sandbox: &sb, Limits: host.RunLimits{Processes: 5}, Cgroup: name})
	t.Logf("exit %s\n%s%s", r.exit, r.stdout, r.stderr)
	if !strings.Contains(r.stdout, "started 3\n") || strings.Contains(r.stdout, "started 4\n") {
		t.Fatalf("want exactly 3 sleeps started (init, the shell and 3 make 5):\n%s", r.stdout)
	}
	if x := r.exit.Cgroup; x == nil || x.Events.PidsMax == 0 || x.Events.Limit() != messages.LimitProcesses || x.Limits.Processes != 5 {
		t.Fatalf("the exit's cgroup: %+v", x)
	}
	var st unix.Stat_t
	for _, d := range HostCgroups().Hierarchies().Dirs() {
		if err := unix.Lstat(filepath.Join(d, name), &st); err != unix.ENOENT {
			t.Errorf("the run's cgroup is left in %s: %v", d, err)
		}
	}
}

// BenchmarkSpawnInCgroup: what a session's cgroup costs its spawn, a
// sandboxed /bin/true interleaved with and without one: with it, the
// cgroup made, the child joined while bwrap holds it on --block-fd, and
// (as the daemon's close does) killed and removed after its exit. A third
// spawn, by a launcher with no nsenter, holds no user namespace to its
// counts (D82): what that costs every sandboxed spawn (nouserns-*).
func BenchmarkSpawnInCgroup(b *testing.B) {
	c := HostCgroups()
	if c.Why() != "" {
		b.Skipf("no cgroup here: %s", c.Why())
	}
	l, err := NewLauncher(LauncherOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	bare, err := NewLauncher(LauncherOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()
	bare.nsenter = ""
	dir := b.TempDir()
	spec := host.SpawnSpec{Path: "/bin/true", Args: []string{"true"}, Dir: dir,
		Sandbox: &host.SandboxSpec{Sandbox: messages.Sandbox{ReadOnly: []string{"/usr", "/bin", "/lib", "/lib64"}}, Workspace: dir}}
	name := testCgroupNode() + "/bench"
	done := make(chan host.Exit, 1)
	var with, without, spawnWith, spawnWithout, noNS, spawnNoNS time.Duration
	n := 0
	plain := func() {
		t0 := time.Now()
		if _, err := bare.Spawn(spec, func(e host.Exit) { done <- e }); err != nil {
			b.Fatal(err)
		}
		spawnNoNS += time.Since(t0)
		<-done
		noNS += time.Since(t0)
	}
	one := func(cg bool) {
		s := spec
		if cg {
			s.Cgroup, s.Limits = name, host.CgroupLimits{Memory: 256 << 20, Processes: 64}
		}
		t0 := time.Now()
		if _, err := l.Spawn(s, func(e host.Exit) { done <- e }); err != nil {
			b.Fatal(err)
		}
		ts := time.Since(t0)
		<-done
		if cg {
			g, err := c.Open(name)
			if err != nil {
				b.Fatal(err)
			}
			g.Kill(5 * time.Second)
			if err := g.Remove(5 * time.Second); err != nil {
				b.Fatal(err)
			}
			with += time.Since(t0)
			spawnWith += ts
		} else {
			without += time.Since(t0)
			spawnWithout += ts
		}
	}
	for b.Loop() {
		one(n%2 == 0)
		one(n%2 != 0)
		plain()
		n++
	}
	b.ReportMetric(float64(spawnWith.Microseconds())/float64(n), "cgroup-spawn-µs")
	b.ReportMetric(float64(spawnWithout.Microseconds())/float64(n), "plain-spawn-µs")
	b.ReportMetric(float64(with.Microseconds())/float64(n), "cgroup-cycle-µs")
	b.ReportMetric(float64(without.Microseconds())/float64(n), "plain-cycle-µs")
	b.ReportMetric(float64(spawnNoNS.Microseconds())/float64(n), "nouserns-spawn-µs")
	b.ReportMetric(float64(noNS.Microseconds())/float64(n), "nouserns-cycle-µs")
}

// On a host where no cgroup can be made (here: a launcher told so), a
// run's memory is refused naming the reason, and so are its processes as
// root; a session's spawn with a cgroup fails naming it, and nothing is
// started.
func TestNoCgroupsRefuses(t *testing.T) {
	const why = "no cgroup v2 hierarchy is mounted, and no cgroup v1 memory or pids hierarchy is mounted"
	none := &Cgroups{why: why}
	l, err := NewLauncher(LauncherOptions{Cgroups: none})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := l.RunSupport()
	if s.Memory != why || os.Geteuid() == 0 && !strings.Contains(s.Processes, why) {
		t.Fatalf("support %+v", s)
	}
	sb := systemSandbox()
	_, err = l.StartRun(host.RunSpec{Command: []string{"/bin/true"}, Dir: "/", Sandbox: &sb, Limits: host.RunLimits{Memory: 1 << 30}, Cgroup: "ocx-x/run:y"}, func(host.Exit) {})
	var ne *host.NotProvidedError
	if !errors.As(err, &ne) || ne.Field != "limits.memory" || ne.Why != why {
		t.Fatalf("memory: %v", err)
	}
	dir := t.TempDir()
	spec := host.SpawnSpec{Path: "/bin/true", Args: []string{"true"}, Dir: dir, Cgroup: "ocx-x/session:a:b",
		Sandbox: &host.SandboxSpec{Sandbox: messages.Sandbox{ReadOnly: []string{"/usr", "/bin", "/lib", "/lib64"}}, Workspace: dir}}
	if _, err := l.Spawn(spec, func(host.Exit) { t.Error("a spawn refused reported an exit") }); !errors.Is(err, errNoCgroups) || !strings.Contains(err.Error(), why) {
		t.Fatalf("spawn: %v", err)
	}
	if _, err := none.Open("ocx-x/session:a:b"); !errors.Is(err, errNoCgroups) {
		t.Fatalf("open: %v", err)
	}
	if removed, err := none.Sweep("ocx-x"); removed != nil || err != nil {
		t.Fatalf("sweep: %v %v", removed, err)
	}
}

// startHeld starts /bin/sh -c script held until its standard input
// closes (go), so that it is put in a cgroup before it runs; the process
// is killed and reaped at the test's end.
func startHeld(t *testing.T, script string) (cmd *exec.Cmd, out *strings.Builder, goOn func()) {
	t.Helper()
	cmd = exec.Command("/bin/sh", "-c", "read x; "+script)
	out = &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, out, func() { w.Close() }
}

// The session's MCP server's cgroup, below the session's (D80): its
// processes are held by the session's limits, and their OOM kills and
// forks refused count as the session's; the session's Kill ends its own
// processes and not the server's, EndBelow ends the server's (killing
// what does not end within its wait) and removes its cgroup; a sweep
// leaves a running session's server's cgroup (its counts); a cgroup an
// earlier session left with a server below it is made again, and a sweep
// removes an empty one with its empty child.
func TestCgroupBelow(t *testing.T) {
	name := testCgroup(t, "session:bob:demo")
	if noCgroups(t, name) {
		return
	}
	c := HostCgroups()
	g, err := c.Make(name, host.CgroupLimits{Memory: 32 << 20, Processes: 12})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := g.Child(host.MCPCgroupName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Child("a/b"); err == nil {
		t.Fatal("a child named a/b")
	}
	oom, oomOut, oomGo := startHeld(t, `dd if=/dev/zero of=/dev/null bs=256M count=1 2>/dev/null; echo dd $?`)
	// perl, which goes on when a fork is refused and waits for its
	// children (a shell exits, leaving them).
	fork, forkOut, forkGo := startHeld(t, `exec perl -e 'for (1..30) { my $p = fork(); if (!defined $p) { print "refused\n"; last } if ($p == 0) { select(undef, undef, undef, 0.2); exit 0 } } 1 while wait() != -1'`)
	for _, p := range []*exec.Cmd{oom, fork} {
		if err := srv.Join(p.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	cg := readFile(t, "/proc/"+strconv.Itoa(oom.Process.Pid)+"/cgroup")
	if !strings.Contains(cg, name+"/"+host.MCPCgroupName) {
		t.Fatalf("the process is not in %s/%s:\n%s", name, host.MCPCgroupName, cg)
	}
	// One after the other: both count against the one processes limit,
	// and forks the perl has taken could refuse the shell its dd.
	oomGo()
	oom.Wait()
	forkGo()
	fork.Wait()
	t.Logf("%s%s", oomOut, forkOut)
	if !strings.Contains(oomOut.String(), "dd 137") || !strings.Contains(forkOut.String(), "refused") {
		t.Errorf("below the session's cgroup, dd past its memory was not killed, or no fork refused: %s%s", oomOut, forkOut)
	}
	ev, err := g.Events()
	if err != nil || ev.OOMKills == 0 || ev.PidsMax == 0 {
		t.Fatalf("the session's counts do not hold its server's: %+v %v", ev, err)
	}
	// A sweep while the session runs leaves its server's cgroup, empty
	// now, and so its counts.
	own, _, _ := startHeld(t, "sleep 60")
	if err := g.Join(own.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sweep(testCgroupNode()); err != nil {
		t.Fatal(err)
	}
	if again, err := g.Events(); err != nil || again != ev {
		t.Fatalf("the counts after a sweep while the session runs: %+v %v, want %+v", again, err, ev)
	}

	server, _, _ := startHeld(t, "sleep 60")
	if err := srv.Join(server.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := g.Kill(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if procs, _ := srv.Procs(); !slices.Contains(procs, server.Process.Pid) {
		t.Fatalf("the session's Kill ended its server's processes: %v", procs)
	}
	if err := g.EndBelow(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(name + "/" + host.MCPCgroupName); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the server's cgroup is left: %v", err)
	}
	if err := server.Wait(); err == nil {
		t.Fatal("the server's process was not killed")
	}
	if err := g.Remove(5 * time.Second); err != nil {
		t.Fatal(err)
	}

	// Left by an earlier session whose server runs on: made again.
	g, err = c.Make(name, host.CgroupLimits{Processes: 12})
	if err != nil {
		t.Fatal(err)
	}
	if srv, err = g.Child(host.MCPCgroupName); err != nil {
		t.Fatal(err)
	}
	left, _, _ := startHeld(t, "sleep 60")
	if err := srv.Join(left.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Make(name, host.CgroupLimits{Processes: 12}); err != nil {
		t.Fatalf("made again over an earlier session's server: %v", err)
	}
	if err := left.Wait(); err == nil {
		t.Fatal("the earlier session's server was not killed")
	}

	// A sweep removes an empty cgroup with its empty child.
	if _, err := g.Child(host.MCPCgroupName); err != nil {
		t.Fatal(err)
	}
	removed, err := c.Sweep(testCgroupNode())
	if err != nil || !slices.Equal(removed, []string{name}) {
		t.Fatalf("sweep removed %q (%v), want %s", removed, err, name)
	}
}
