package itest

import (
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
)

// TestJobReportsItsResult is seed 002's "report a job's result" (issue 27
// item 5, D56) through the real hook, daemon, sandboxed session and fossil
// server: a mechanical `completes` session started on a ticket (a build
// on its ticket) runs its command once; when the command's process ends,
// its result is on the ticket, replying to the request: the command's
// output and a report note, done with its last line; the session then
// exits by itself and the daemon's end note follows. A job whose command
// exits 3 reports failed on its thread, saying so. Each request gets one
// result.
func TestJobReportsItsResult(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin

	// A build on its ticket.
	const builder = "builder-1"
	n.must("", "login", "add", builder)
	n.result(admin, "workspace", "add", "--login", builder, "--project", "demo", "--branch", "trunk")
	tid := n.result(person, "ticket", "--title", "Build 1.2", "--text", "build release 1.2")
	launch := n.result(admin, "session", "start", key(builder), "--record", tid, "--kind", "mechanical", "--lifetime", "completes",
		"--hears", person, "--command", `echo "building: $(cat)"; echo 'built 3 targets'`)
	// The request: the ticket's first change, which a reply on a ticket
	// links (docs/session.md section 4).
	request := n.ticket(tid)[0].Hash
	var report *messages.ReportNote
	var ended *messages.EndNote
	n.waitFor("the job's result and the daemon's end note on the ticket", func() bool {
		report, ended = nil, nil
		for _, c := range n.ticket(tid) {
			switch note := c.Note.(type) {
			case *messages.ReportNote:
				if c.Sender == builder {
					if report != nil {
						t.Fatalf("a second report on the ticket: %s", c.Text)
					}
					report = note
					if !strings.Contains(c.Text, "building: build release 1.2") || !strings.HasPrefix(c.Text, "In reply to ["+request[:10]+"](/info/"+request+")") {
						t.Errorf("the job's answer is not the command's output replying to the ticket:\n%s", c.Text)
					}
				}
			case *messages.EndNote:
				if c.Sender == "ocx" && note.Launch == launch {
					ended = note
				}
			}
		}
		return report != nil && ended != nil
	})
	if report.Outcome != messages.ReportDone || report.Summary != "built 3 targets" {
		t.Errorf("the job's report: %+v; want done, \"built 3 targets\"", report)
	}
	if ended.Status != messages.EndExited || ended.ExitCode == nil || *ended.ExitCode != 0 {
		t.Errorf("the daemon's end note: %s; want exited 0", ended)
	}
	for _, s := range n.status().Sessions {
		if s.Login == builder {
			t.Errorf("the job's session still runs after its result: %+v", s)
		}
	}

	// A job that fails, on a thread of its own.
	const failing = "builder-2"
	n.must("", "login", "add", failing)
	n.result(admin, "workspace", "add", "--login", failing, "--project", "demo", "--branch", "trunk")
	root := n.result(person, "thread", "--title", "Build 1.3", "--text", "build release 1.3")
	launch2 := n.result(admin, "session", "start", key(failing), "--record", root, "--kind", "mechanical", "--lifetime", "completes",
		"--hears", person, "--command", `echo linking; echo 'ld: missing symbol' >&2; exit 3`)
	n.waitFor("the failed job's end note", func() bool { return len(n.endsOf(root, launch2)) == 1 })
	var reports []posted
	for _, p := range n.thread(root) {
		if _, ok := p.Note.(*messages.ReportNote); ok && p.Sender == failing {
			reports = append(reports, p)
		}
	}
	if len(reports) != 1 {
		t.Fatalf("%d reports on the failed job's thread, want 1", len(reports))
	}
	if r := reports[0].Note.(*messages.ReportNote); r.Outcome != messages.ReportFailed || r.Summary != "exit status 3: ld: missing symbol" || reports[0].InReplyTo != root {
		t.Errorf("the failed job's report: %+v, replying to %s; want failed, \"exit status 3: ld: missing symbol\", replying to %s", r, reports[0].InReplyTo, root)
	}
	if !strings.Contains(reports[0].Text, "linking") {
		t.Errorf("the failed job's answer lost its output:\n%s", reports[0].Text)
	}
}
