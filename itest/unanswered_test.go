package itest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ocx-go/ocx/messages"
)

// TestSessionKilledMidTurnNotesItsPost (D77): a session killed outright
// in a turn leaves the post it was answering noted, once, as its agent
// login, why ended, when the daemon records its end; a post it answered
// before is not noted, and neither is one a later session answers; the
// node's ledger of posts woken holds nothing of the ended session after.
// Before, the post it held was neither answered nor noted: TestChaos found
// it.
func TestSessionKilledMidTurnNotesItsPost(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	startDaemon(t, n, program("ocxd"))
	admin := n.srv.AdminLogin
	key := agent + "/demo"
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	launch := n.result(admin, "session", "start", key, "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", echoScript)
	n.awaitListening(agent)
	hello := n.result(person, "post", "--to", record, "--text", "hello")
	n.awaitReply(record, hello)
	// The slow turn waits for a file that never comes: the session is
	// killed in it.
	slow := n.result(person, "post", "--to", record, "--text", "slow")
	n.waitFor("the session to work on the slow post", func() bool {
		for _, s := range n.status().Sessions {
			if s.Launch == launch && s.State == messages.SessionWorking {
				return true
			}
		}
		return false
	})
	pid, ok := n.serving(launch)
	if !ok {
		t.Fatal("no `workspace serve` of the launch")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the session's end note", func() bool { return len(n.endsOf(record, launch)) > 0 })
	noted := func(post string) (count int) {
		for _, u := range notesOn[*messages.UnheardNote](n, record) {
			for _, h := range u.Note.All() {
				if h == post && u.P.Sender == agent && u.Note.Why == messages.UnheardEnded {
					count++
				}
			}
		}
		return count
	}
	if c := noted(slow); c != 1 {
		t.Errorf("the slow post is noted ended %d times, want once\nocxd.log:\n%s", c, n.daemonLog())
	}
	if c := noted(hello); c != 0 {
		t.Errorf("the answered post is noted ended %d times", c)
	}
	// A later session answers its posts; its end notes none of them.
	launch2 := n.result(admin, "session", "start", key, "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", echoScript)
	n.awaitListening(agent)
	again := n.result(person, "post", "--to", record, "--text", "again")
	n.awaitReply(record, again)
	n.must("", "session", "stop", key)
	n.waitFor("the later session's end note", func() bool { return len(n.endsOf(record, launch2)) > 0 })
	if c := noted(again); c != 0 {
		t.Errorf("a post the later session answered is noted ended %d times", c)
	}
	if c := noted(slow); c != 1 {
		t.Errorf("after the later session the slow post is noted %d times, want once", c)
	}
	if b, err := os.ReadFile(filepath.Join(n.agents, agent, "held", "demo", "woken")); err == nil && strings.TrimSpace(string(b)) != "" {
		t.Errorf("the ledger of posts woken still holds, after both sessions ended:\n%s", b)
	}
}
