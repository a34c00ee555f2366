package itest

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/wire"
)

// TestHookThroughTheDaemonsSocket is ocx-hook as Fossil runs it (D66):
// with no daemon it runs `ocx hook`, which says why in the hook's log and
// starts one; with the daemon up the daemon does the hook's work and the
// hook's log says so; and a daemon's socket that answers garbage, or
// ends mid-answer, is a fallback as well, never a lost post.
func TestHookThroughTheDaemonsSocket(t *testing.T) {
	needs(t, "ocx", "ocxd", host.HookProgram)
	n := newNodeWithoutHook(t)
	ctx := context.Background()
	c := &fossilio.Client{URL: n.srv.URL, Login: person, Password: personPW, ProjectCode: n.srv.ProjectCode}
	root, err := c.NewThread(ctx, "A question", "Is anyone there?")
	if err != nil {
		t.Fatal(err)
	}
	hookLog := func() string {
		b, _ := os.ReadFile(filepath.Join(n.agents, "hook.log"))
		return string(b)
	}
	// post writes a reply and runs ocx-hook on it as Fossil would, and
	// waits until the daemon has read it.
	post := func(text string) (string, string) {
		t.Helper()
		before := len(hookLog())
		reply, err := c.Reply(ctx, root, root, text)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(program(host.HookProgram), "--agents", n.agents, "--repo", n.srv.Repo)
		cmd.Stdin = strings.NewReader(reply + " forum-reply-to " + root[:14] + "\n")
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Fatalf("ocx-hook: %v, %q", err, out)
		}
		n.waitLogLine("the daemon to read "+text, func(l logLine) bool { return l.Msg == "read" && strings.HasSuffix(l.Line, " "+reply) })
		return reply, hookLog()[before:]
	}

	// No daemon: the hook itself, which starts one.
	if pid := n.daemonPID(); pid != 0 {
		t.Fatalf("a daemon runs before the hook: %d", pid)
	}
	_, log := post("first")
	if !strings.Contains(log, "the daemon did not do the hook's work") || !strings.Contains(log, "no daemon answers on its socket") ||
		!strings.Contains(log, "by=hook") {
		t.Fatalf("without a daemon, the hook's log:\n%s", log)
	}
	n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })

	// The daemon up: it does the work, and hands the post to its node in
	// its own process, not back through its pipe (D88).
	second, log := post("second")
	if !strings.Contains(log, "hook done") || !strings.Contains(log, "by=daemon") || strings.Contains(log, "did not do") ||
		strings.Contains(log, "level=ERROR") {
		t.Fatalf("with the daemon, the hook's log:\n%s", log)
	}
	for _, l := range n.logLines() {
		if l.Msg == "read" && strings.HasSuffix(l.Line, " "+second) && l.From != "socket" {
			t.Errorf("the daemon read the post its socket's hook handed from its pipe: %+v", l)
		}
	}

	// A stand-in on the socket in the daemon's place: garbage, then an
	// answer cut off. The daemon is stopped first; the stand-in's socket
	// keeps the next daemon from serving one (it says so), so each ask
	// meets the stand-in.
	pid := n.daemonPID()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the daemon to end", func() bool { return n.daemonPID() == 0 })
	layout, err := host.NewLayout(n.agents)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := unixhost.ListenSocketAt(layout.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	answers := make(chan string, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			// A daemon's check that the socket is served asks nothing.
			if _, err := wire.ReadLine(bufio.NewReader(conn), wire.MaxAskLen); err == nil {
				io.WriteString(conn, <-answers)
			}
			conn.Close()
		}
	}()
	for _, c := range []struct{ answer, why string }{
		{"HTTP/1.1 200 OK\n", "the daemon's reply"},
		{`{"ocx":"reply","v":1,"hook":`, "before its newline"},
	} {
		answers <- c.answer
		_, log = post("after " + c.why)
		if !strings.Contains(log, "the daemon did not do the hook's work") || !strings.Contains(log, c.why) || !strings.Contains(log, "by=hook") {
			t.Fatalf("a socket answering %q: the hook's log:\n%s", c.answer, log)
		}
	}
	ln.Close()
	<-done
	if !strings.Contains(n.daemonLog(), "the daemon's socket is not served") {
		t.Errorf("the daemon started beside the stand-in does not say it serves no socket:\n%s", n.daemonLog())
	}
}
