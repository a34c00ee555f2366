package itest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// newNodeRelease is newNode with a release root of the test's own, so that
// the test can move its current link.
func newNodeRelease(t testing.TB, root string) *testNode {
	t.Helper()
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{{Login: person, Password: personPW, Caps: "cghijnorwz234"}}})
	n := &testNode{t: t, ctx: context.Background(), srv: srv, agents: filepath.Join(t.TempDir(), "agents"),
		pw: map[string]string{srv.AdminLogin: srv.AdminPassword, person: personPW}}
	t.Cleanup(n.shutdown)
	n.must("", "init", "--project", "demo="+srv.Repo+","+srv.URL, "--release", root)
	n.must("", "hook", "install")
	return n
}

// makeRelease fills root/releases/id with the test release's programs.
func makeRelease(t testing.TB, root, id string) string {
	t.Helper()
	dir := filepath.Join(root, "releases", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ocx", "ocxd", "workspace", "ocx-runner-native"} {
		src, dst := filepath.Join(release(), name), filepath.Join(dir, name)
		if err := os.Link(src, dst); err != nil {
			copyFile(t, src, dst)
		}
	}
	return dir
}

func copyFile(t testing.TB, src, dst string) {
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// setCurrent points root/current at releases/id, replacing the link whole.
func setCurrent(t testing.TB, root, id string) {
	t.Helper()
	tmp := filepath.Join(root, "current.new")
	os.Remove(tmp)
	if err := os.Symlink(filepath.Join("releases", id), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(root, "current")); err != nil {
		t.Fatal(err)
	}
}

// TestDaemonReexecKeepsEverything is seed 002's "re-exec the daemon": with
// two sessions running, a stream of lines is written to the pipe and a
// `reexec` line in its middle, after current moved to another release. The
// daemon execs that release's ocxd in place: the same PID, the lock held,
// every line read exactly once (by one image or the other), the sessions
// still its children, and their ends reaped by the new image with their real
// exit status. Then a release whose ocxd reads another hand-off version:
// the re-exec is refused before the exec and the old image keeps running,
// still reaping.
func TestDaemonReexecKeepsEverything(t *testing.T) {
	needs(t, "ocxd", "workspace")
	root := t.TempDir()
	makeRelease(t, root, "a")
	dirB := makeRelease(t, root, "b")
	setCurrent(t, root, "a")
	n := newNodeRelease(t, root)
	admin := n.srv.AdminLogin
	d := startDaemon(t, n, filepath.Join(root, "current", "ocxd"), "--grace", "1s")

	logins := []string{"agent-1", "agent-2"}
	records := map[string]string{}
	launches := map[string]string{}
	tops := map[string]int{}
	for _, login := range logins {
		n.must("", "login", "add", login)
		records[login] = n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
		launches[login] = n.result(admin, "session", "start", login+"/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
		serve, ok := n.serving(launches[login])
		if !ok {
			t.Fatalf("no session for %s", login)
		}
		tops[login] = sessionTop(t, serve, d.pid())
	}

	// The stream, with `reexec` in its middle, one write per line.
	setCurrent(t, root, "b")
	const lines = 2000
	want := map[string]int{}
	var wg sync.WaitGroup
	wg.Add(1)
	var writeErr error
	go func() {
		defer wg.Done()
		r, err := unixhost.OpenRoot(n.agents)
		if err != nil {
			writeErr = err
			return
		}
		defer r.Close()
		w, err := unixhost.OpenLineWriter(r, filepath.Join(n.agents, "ocxd"))
		if err != nil {
			writeErr = err
			return
		}
		defer w.Close()
		for i := 0; i < lines; i++ {
			if i == lines/2 {
				if err := w.WriteLine([]byte("reexec")); err != nil {
					writeErr = err
					return
				}
			}
			if err := w.WriteLine([]byte(fmt.Sprintf("stop ghost-%d demo", i))); err != nil {
				writeErr = fmt.Errorf("line %d: %w", i, err)
				return
			}
		}
	}()
	for i := 0; i < lines; i++ {
		want[fmt.Sprintf("stop ghost-%d demo", i)] = 1
	}
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	var got map[string]int
	n.waitFor("every line read, and the new image running", func() bool {
		got = map[string]int{}
		running := false
		for _, l := range n.logLines() {
			if l.Msg == "read" && strings.HasPrefix(l.Line, "stop ghost-") {
				got[l.Line]++
			}
			running = running || l.Msg == "re-exec: running the new image" && l.OCXD == d.pid()
		}
		return running && len(got) == len(want)
	})
	for line, c := range got {
		if want[line] != c {
			t.Errorf("%q read %d times", line, c)
		}
	}
	if pid := n.daemonPID(); pid != d.pid() {
		t.Fatalf("after the re-exec the lock is held by %d, not %d", pid, d.pid())
	}
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", d.pid())); exe != filepath.Join(dirB, "ocxd") {
		t.Errorf("after the re-exec the daemon runs %s, not release b's ocxd", exe)
	}
	if d.exited() {
		t.Fatalf("the daemon exited: %s", d.stderr)
	}
	if _, err := os.Stat(filepath.Join(n.agents, "ocxd.handoff")); err == nil {
		t.Errorf("the hand-off file is left behind")
	}
	for _, login := range logins {
		if pp := ppidOf(t, tops[login]); pp != d.pid() {
			t.Errorf("after the re-exec %s's session %d has parent %d, not the daemon %d", login, tops[login], pp, d.pid())
		}
	}

	// A release whose ocxd reads another hand-off version: refused before
	// the exec; the old image goes on, lines and children alike.
	bad := filepath.Join(root, "releases", "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "ocxd"), []byte("#!/bin/sh\necho 99\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	setCurrent(t, root, "bad")
	n.send("reexec", "stop ghost-after demo")
	n.waitFor("the refused re-exec and the line after it", func() bool {
		var failed, after bool
		for _, l := range n.logLines() {
			failed = failed || strings.Contains(l.Msg, "re-exec failed") && l.OCXD == d.pid()
			after = after || l.Msg == "read" && l.Line == "stop ghost-after demo"
		}
		return failed && after
	})
	n.waitFor("the line after the refused re-exec acted on", func() bool {
		return strings.Contains(n.daemonLog(), `"workspace":"ghost-after/demo"`)
	})
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", d.pid())); exe != filepath.Join(dirB, "ocxd") || d.exited() {
		t.Errorf("after a refused re-exec the daemon runs %s (exited %v)", exe, d.exited())
	}
	setCurrent(t, root, "b")

	// The children are still reaped, with their real status: a stop makes
	// each session write its stopped note and exit 0 inside bwrap.
	for _, login := range logins {
		n.must("", "session", "stop", login+"/demo")
	}
	for _, login := range logins {
		rec, launch := records[login], launches[login]
		n.waitFor("the end note of "+login, func() bool { return len(n.endsOf(rec, launch)) > 0 })
		ends := n.endsOf(rec, launch)
		if len(ends) != 1 || ends[0].PID != tops[login] || ends[0].Status != messages.EndExited || ends[0].ExitCode == nil || *ends[0].ExitCode != 0 || ends[0].Release != "a" {
			t.Errorf("%s's end notes: %v; want one, pid %d, exited 0, release a", login, ends, tops[login])
		}
	}
}
