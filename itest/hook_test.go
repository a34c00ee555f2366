package itest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

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
	// PWD is the starting shell's own (node.EnsureDaemon starts the daemon
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
