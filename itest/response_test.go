package itest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// createResponder writes a create input for login and creates its record
// through `ocx tool create` as the admin, then waits for its session to
// listen; it returns the record.
func (n *testNode) createResponder(login, wall string) string {
	n.t.Helper()
	in := filepath.Join(n.t.TempDir(), login+".json")
	body := `{"objective": "Answer what is said here.", "user": "` + login + `", "runner": "native", "model": "standin", "hears": ["` + person + `"], "budget": {"wall": "` + wall + `"}}`
	if err := os.WriteFile(in, []byte(body), 0o600); err != nil {
		n.t.Fatal(err)
	}
	rec := n.result(n.srv.AdminLogin, "tool", "create", "--input", in)
	n.waitFor(login+"'s session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == login && s.Listening {
				return true
			}
		}
		return false
	})
	return rec
}

// responses lists the response blocks on a record's thread answering it,
// whoever sent them.
func (n *testNode) responses(rec string) []posted {
	n.t.Helper()
	var out []posted
	for _, p := range n.thread(rec) {
		if r, err := messages.ReadResponse([]byte(p.Text)); err == nil && r.Answers == rec {
			out = append(out, p)
		}
	}
	return out
}

// theResponse checks that the record holds exactly one response, sent by
// the node user with the outcome want and a note holding note, and that the status
// shows it on login's workspace; it returns the response.
func (n *testNode) theResponse(rec, login string, want messages.ResponseOutcome, note string) *messages.Response {
	n.t.Helper()
	rs := n.responses(rec)
	if len(rs) != 1 {
		n.t.Fatalf("record %s holds %d responses, want exactly 1: %+v", rec, len(rs), rs)
	}
	r, _ := messages.ReadResponse([]byte(rs[0].Text))
	if rs[0].Sender != "ocx" || rs[0].InReplyTo != rec || r.Outcome != want || !strings.Contains(r.Note, note) {
		n.t.Errorf("the response %s: by %q replying to %s, %+v; want by the node user replying to the record, %s, a note holding %q",
			rs[0].Hash, rs[0].Sender, rs[0].InReplyTo, r, want, note)
	}
	ends := 0
	for _, p := range n.thread(rec) {
		if _, ok := p.Note.(*messages.EndNote); ok && p.Sender == "ocx" {
			ends++
		}
	}
	if ends != 1 {
		n.t.Errorf("record %s holds %d end notes by the node user, want 1", rec, ends)
	}
	shown := false
	for _, w := range n.status().Workspaces {
		if w.Login == login && w.Response != nil {
			shown = w.Response.Hash == rs[0].Hash && w.Response.Record == rec && w.Response.Outcome == want && w.Response.Note == r.Note
			if !shown {
				n.t.Errorf("the status shows %s's response %+v; want %s", login, *w.Response, rs[0].Hash)
			}
		}
	}
	if !shown {
		n.t.Errorf("the status shows no response on %s's workspace", login)
	}
	return r
}

// TestResponseByTheNodeUser is issue 27 item 1 (seed 001 E5, D51) on a
// real fossil server, daemon, hook and sandboxed sessions: records made
// with `ocx tool create` whose runs end by a stop after the agent's
// report, past their wall, and after a restart and a re-exec of the daemon
// each get exactly one response block, by the node user, replying to the
// record, beside the daemon's one end note, and the status shows it; a
// daemon started again writes no second.
func TestResponseByTheNodeUser(t *testing.T) {
	needs(t, "ocxd", "workspace", "ocx-runner-native")
	n := newNode(t)
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")

	// A stop, after the agent's report.
	stopped := n.createResponder("resp-stop", "1h")
	ask := n.result(person, "post", "--to", stopped, "--text", "Sum it up, please report.")
	if got := n.awaitReplyBy("resp-stop", stopped, ask); !strings.Contains(got.Text, `"report"`) {
		t.Fatalf("the agent's answer holds no report: %q", got.Text)
	}
	a, _ := n.answer(n.srv.AdminLogin, "tool", "stop", "--record", stopped)
	if a.Stopped != nil || a.Result == nil {
		t.Fatalf("stop: %+v", a)
	}
	r := n.theResponse(stopped, "resp-stop", messages.ResponseStopped, "its agent's last report: done")
	if rs := n.responses(stopped); *a.Result != rs[0].Hash {
		t.Errorf("stop's result is %s, not the response %s", *a.Result, rs[0].Hash)
	}
	t.Logf("stopped: %+v", r)

	// Past its wall.
	walled := n.createResponder("resp-wall", "3s")
	n.waitFor("resp-wall's response", func() bool { return len(n.responses(walled)) > 0 })
	n.waitFor("resp-wall's end note", func() bool {
		for _, p := range n.thread(walled) {
			if _, ok := p.Note.(*messages.EndNote); ok {
				return true
			}
		}
		return false
	})
	n.theResponse(walled, "resp-wall", messages.ResponseBudget, "past its wall limit")

	// A session the daemon adopted after a restart, then carried across a
	// re-exec (HUP), and stopped: one response, and a daemon started again
	// writes none of the three a second time.
	restarted := n.createResponder("resp-restart", "1h")
	d.stop()
	d = startDaemon(t, n, program("ocxd"), "--grace", "1s")
	since := time.Now()
	if err := syscall.Kill(d.pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the daemon's re-exec", func() bool {
		st := n.status()
		return st.Daemon != nil && st.Daemon.Reexec != nil && st.Daemon.Reexec.At.After(since) && st.Daemon.Reexec.Error == ""
	})
	n.must(n.srv.AdminLogin, "tool", "stop", "--record", restarted)
	n.theResponse(restarted, "resp-restart", messages.ResponseStopped, "")
	d.stop()
	startDaemon(t, n, program("ocxd"), "--grace", "1s")
	n.must("", "status")
	for _, c := range []struct{ rec, login string }{{stopped, "resp-stop"}, {walled, "resp-wall"}, {restarted, "resp-restart"}} {
		if rs := n.responses(c.rec); len(rs) != 1 {
			t.Errorf("after a restart, %s's record holds %d responses", c.login, len(rs))
		}
	}
	// The agents' users hold nothing once their responses are written.
	for _, l := range n.status().Logins {
		for _, acc := range l.Accounts {
			if strings.HasPrefix(l.Login, "resp-") && acc.Capabilities != "" {
				t.Errorf("%s keeps %q on %s", l.Login, acc.Capabilities, acc.Project)
			}
		}
	}
}
