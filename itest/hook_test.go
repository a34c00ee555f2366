package itest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
)

// TestHookAsFossilRunsIt runs the `ocx hook` binary the way Fossil's
// backoffice may: an environment left by a CGI request (fossil-2.21.md 4.4)
// and a standard output nobody should write to. The hook writes nothing
// there, exits 0, hands the post to the daemon it starts, and that daemon
// has the clean environment, none of the request's.
func TestHookAsFossilRunsIt(t *testing.T) {
	needs(t, "ocx", "ocxd")
	n := newNodeWithoutHook(t)
	ctx := context.Background()
	c := &fossilio.Client{URL: n.srv.URL, Login: person, Password: personPW, ProjectCode: n.srv.ProjectCode}
	root, err := c.NewThread(ctx, "A question", "Is anyone there?")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := c.Reply(ctx, root, root, "Hello?")
	if err != nil {
		t.Fatal(err)
	}
	if pid := n.daemonPID(); pid != 0 {
		t.Fatalf("a daemon runs before the hook: %d", pid)
	}

	cmd := exec.Command(program("ocx"), "hook", "--agents", n.agents, "--repo", n.srv.Repo)
	cmd.Env = []string{"GATEWAY_INTERFACE=CGI/1.0", "REQUEST_METHOD=POST", "FOSSIL_USER=" + person,
		"HTTP_COOKIE=fossil-x=secret", "PATH_INFO=/forume2", "SCRIPT_NAME=", "HOME=/nonexistent"}
	cmd.Stdin = strings.NewReader(reply + " forum-reply-to " + root[:14] + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Dir = "/"
	if err := cmd.Run(); err != nil {
		t.Fatalf("the hook: %v\n%s", err, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("the hook wrote %d bytes to its standard output: %q", stdout.Len(), stdout.String())
	}

	n.waitLogLine("the daemon to read the post", func(l logLine) bool { return l.Msg == "read" && strings.HasSuffix(l.Line, " "+reply) })
	pid := n.daemonPID()
	if pid == 0 {
		t.Fatal("no daemon holds the lock after the hook")
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	slices.Sort(env)
	// PWD is the starting shell's own (daemonclient.Ensure starts the daemon
	// detached through /bin/sh, in /).
	want := []string{"HOME=" + n.agents, "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin", "PWD=/"}
	if !slices.Equal(env, want) {
		t.Errorf("the daemon the hook started has the environment %q, want %q", env, want)
	}
	log, err := os.ReadFile(filepath.Join(n.agents, "hook.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "hook done") || strings.Contains(string(log), "level=ERROR") {
		t.Errorf("the hook's log:\n%s", log)
	}
}

// TestHookWatchRunsAHookHeldBack: a tag pushed on a check-in the server
// lacks leaves it a phantom, which it asks every later push for; each such
// push embargoes Fossil's hooks for another 60 s (fossil-2.21.md 4.3), so
// on a busy node they never run. The daemon sees the repository written,
// finds the hook's mark behind the newest receipt with no run of the hook
// holding it or launched by Fossil, and runs the installed hook itself, so
// a person's post still reaches it. Once the hook is removed, the daemon
// runs nothing.
func TestHookWatchRunsAHookHeldBack(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	startDaemon(t, n, program("ocxd"), "--hook-watch", "300ms")
	r := n.repo()
	code, err := r.ProjectCode(n.ctx)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	missing := strings.Repeat("ab", 32)
	admin := &fossilio.Client{URL: n.srv.URL, Login: n.srv.AdminLogin, Password: n.srv.AdminPassword, ProjectCode: code}
	if _, err := admin.Tag(n.ctx, missing, "ci", "x"); !errors.Is(err, fossilio.ErrPhantom) {
		t.Fatalf("a tag on a check-in the server lacks: %v; want the phantom named", err)
	}
	// While a run of the hook holds its mark, the daemon runs no other.
	mark, err := os.OpenFile(filepath.Join(n.agents, "hook.mark.demo"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mark.Close()
	if err := syscall.Flock(int(mark.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// The daemon may have run the hook for the tag's own receipt before
	// the mark was held (its first look after the push): only what it
	// logs from now on counts.
	before := len(n.daemonLog())
	held := n.result(person, "thread", "--title", "Held back", "--text", "a post Fossil's hook does not see while its phantom lasts")
	time.Sleep(1500 * time.Millisecond) // 30 looks, one every 50 ms while the mark is held
	if log := n.daemonLog()[before:]; strings.Contains(log, "running it") || strings.Contains(log, held) {
		t.Fatalf("the daemon ran the hook while a run held its mark:\n%s", log)
	}
	if err := syscall.Flock(int(mark.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the daemon to run the hook for the held-back post", func() bool {
		return strings.Contains(n.daemonLog(), "post "+n.srv.Repo+" "+held)
	})
	if out, _ := n.srv.Fossil("sql", "-R", n.srv.Repo, "SELECT value+0>now() FROM config WHERE name='hook-embargo'"); strings.TrimSpace(out) != "1" {
		t.Fatalf("no embargo holds Fossil's hook back (%q), so the test proves nothing", out)
	}
	if log := n.daemonLog(); !strings.Contains(log, "the wake hook left receipts unhandled; running it") {
		t.Errorf("the daemon read the post without saying it ran the hook:\n%s", log)
	}
	if hook, _ := os.ReadFile(filepath.Join(n.agents, "hook.log")); !strings.Contains(string(hook), "hook done") {
		t.Errorf("the hook's log says no run:\n%s", hook)
	}
	// The status shows Fossil's embargo, and the hook caught up all the same.
	n.waitFor("the status to show the hook caught up under the embargo", func() bool {
		h := n.status().Hooks[0]
		return h.HeldUntil != nil && h.Mark != nil && *h.Mark == h.Newest
	})

	// Without OCX's hook, the daemon leaves the repository alone.
	n.must("", "hook", "remove")
	ignored := n.result(person, "thread", "--title", "No hook", "--text", "nobody listens for this")
	runs := strings.Count(n.daemonLog(), "running it")
	time.Sleep(2 * time.Second) // more than 6 looks
	if log := n.daemonLog(); strings.Contains(log, ignored) || strings.Count(log, "running it") != runs {
		t.Errorf("the daemon ran a hook that is not installed:\n%s", log)
	}
	// The phantom goes, and with it the embargo (shutdown checks both).
	if _, err := n.srv.Fossil("sql", "-R", n.srv.Repo, "DELETE FROM phantom; DELETE FROM config WHERE name='hook-embargo'"); err != nil {
		t.Fatal(err)
	}
}
