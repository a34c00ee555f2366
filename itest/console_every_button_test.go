package itest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Issue 41 item 4: every button and link of the console pressed or
// followed in Debian's chromium, the record and the host checked after.
// The browser tests before it left four to HTTP alone or to nothing:
// Terminate the workspace, Roll back (TestConsoleReleasesInTheBrowser
// now presses it), the llm kind of Start a session, and "open one" on
// Workspaces and Sessions. Run patterns (D84) are pressed here too.

// TestConsoleOpenOneTerminateBrowser: "open one" followed on the
// Workspaces page and on the Sessions page, each landing on the page of
// that workspace or session, which shows what the status and the process
// table say (its session's PID alive, its record); Terminate the
// workspace pressed, box ticked and a reason given: its terminated note,
// the admin's, with the reason, on its record, its directory gone from
// the host, the status saying it is terminated. The box unticked, the
// browser does not send the form: nothing terminated.
func TestConsoleOpenOneTerminateBrowser(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := consoleNode(t)
	const other = "agent-2"
	admin := n.srv.AdminLogin
	n.must("", "hook", "install")
	n.must("", "login", "add", agent)
	n.must("", "login", "add", other)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	record2 := n.result(admin, "workspace", "add", "--login", other, "--project", "demo", "--branch", "trunk")
	n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	var sess messages.SessionStatus
	n.waitFor("agent-1's session listening", func() bool {
		s, ok := sessionOf(n.status(), agent)
		sess = s
		return ok && s.Listening
	})
	console := n.srv.URL + "ext/console/"
	b := harness.StartBrowser(t)
	browserLogin(t, b, n, admin)

	// 3. Workspaces: open one.
	b.Navigate(console+"workspaces", "#ocx-workspaces")
	b.ClickAndLoad(`[data-ocx-workspace="` + key(agent) + `"] a[href$="/workspace/` + agent + `"]`)
	b.WaitVisible("#ocx-ws-state")
	if !strings.HasSuffix(b.Location(), "/ext/console/workspace/"+agent) || !strings.Contains(b.Text("h2"), key(agent)) {
		t.Fatalf("open one on Workspaces led to %s (%q)", b.Location(), b.Text("h2"))
	}
	if href, _ := b.Attr(`a[href*="/forumpost/"]`, "href"); !strings.HasSuffix(href, "/forumpost/"+record) {
		t.Errorf("the workspace's page links its record as %q, want %s", href, record)
	}
	if got := b.Text("#ocx-ws-session"); got != "pid "+strconv.Itoa(sess.PID) || !procAlive(protocol.ProcID{PID: sess.PID, Start: sess.StartTime}) {
		t.Errorf("the workspace's page shows its session as %q; the status's is pid %d, alive %v", got, sess.PID, procAlive(protocol.ProcID{PID: sess.PID, Start: sess.StartTime}))
	}
	b.Screenshot("01-workspace-opened")

	// 4. Sessions: open one.
	b.Navigate(console+"sessions", "#ocx-sessions")
	b.ClickAndLoad(`[data-ocx-session="` + key(agent) + `"] a[href$="/session/` + agent + `"]`)
	b.WaitVisible("#ocx-session-state")
	if !strings.HasSuffix(b.Location(), "/ext/console/session/"+agent) || !strings.Contains(b.Text("h2"), key(agent)) {
		t.Fatalf("open one on Sessions led to %s (%q)", b.Location(), b.Text("h2"))
	}
	page := b.Text("#ocx")
	if st := b.Text("#ocx-session-state"); st != "idle" && st != "working" || !strings.Contains(page, "pid "+strconv.Itoa(sess.PID)) || !strings.Contains(page, "It hears: "+person) {
		t.Errorf("the session's page: state %q, and it does not show pid %d hearing %s:\n%s", st, sess.PID, person, page)
	}
	if href, _ := b.Attr(`a[href*="/forumpost/"]`, "href"); !strings.HasSuffix(href, "/forumpost/"+record) {
		t.Errorf("the session's page links its record as %q, want %s", href, record)
	}
	b.Screenshot("02-session-opened")

	// Terminate agent-2's workspace: the box unticked, chromium keeps the
	// form (the box is required), and nothing is written.
	dir := n.workspaceDir(other)
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	b.Navigate(console+"workspace/"+other, "#ocx-terminate")
	b.Fill(`#ocx-terminate input[name=reason]`, "the work is done")
	b.Click(`#ocx-terminate button`)
	var valid bool
	b.Eval(`document.getElementById('ocx-terminate').checkValidity()`, &valid)
	if valid || len(notesOn[*messages.TerminatedNote](n, record2)) != 0 {
		t.Fatalf("the terminate form without its box: valid %v, terminated notes %d", valid, len(notesOn[*messages.TerminatedNote](n, record2)))
	}
	b.Click(`#ocx-terminate input[name=confirm]`)
	b.ClickAndLoad(`#ocx-terminate button`)
	answerDone(t, b, "terminate the workspace")
	b.Screenshot("03-terminated")
	notes := notesOn[*messages.TerminatedNote](n, record2)
	if len(notes) != 1 || notes[0].P.Sender != admin || notes[0].Note.Login != other || notes[0].Note.Reason != "the work is done" {
		t.Fatalf("the terminated notes on %s's record: %+v", other, notes)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("after Terminate the workspace's directory %s is still on the host (%v)", dir, err)
	}
	for _, w := range n.status().Workspaces {
		if w.Login == other && w.State != messages.WorkspaceTerminated {
			t.Errorf("after Terminate the status says %s is %s", key(other), w.State)
		}
	}
	b.Navigate(console+"workspace/"+other, "#ocx-ws-state")
	var forms int
	b.Eval(`document.querySelectorAll('#ocx-terminate, #ocx-start-link').length`, &forms)
	if forms != 0 || !strings.Contains(b.Text("#ocx"), "terminated by") {
		t.Errorf("the terminated workspace's page offers %d of Terminate and Start, or does not say it was terminated:\n%s", forms, b.Text("#ocx"))
	}
	// agent-1's workspace and session are untouched.
	if s, ok := sessionOf(n.status(), agent); !ok || s.PID != sess.PID || !procAlive(protocol.ProcID{PID: sess.PID, Start: sess.StartTime}) {
		t.Errorf("after terminating %s, %s's session: %+v", other, agent, s)
	}
	b.NoErrors()
}

// TestConsoleLLMStartInTheBrowser: Start a session with the
// llm kind chosen in chromium, the native runner and the model the node
// offers (the stand-in model, as model.json names it): the session
// definition on the record is the admin's, llm, native, that model; the
// session runs and listens; a person's post is answered by the model
// through it.
func TestConsoleLLMStartInTheBrowser(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	n := consoleNodeOn(t, llmRoot)
	m := startModelStandIn(t, nil)
	m.offer("standin-native")
	mj, _ := json.Marshal(map[string]any{"openai": map[string]any{"base_url": m.URL(), "models": []string{"standin-native"}}})
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), mj, 0o600); err != nil {
		t.Fatal(err)
	}
	admin := n.srv.AdminLogin
	n.must("", "hook", "install")
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")

	console := n.srv.URL + "ext/console/"
	b := harness.StartBrowser(t)
	browserLogin(t, b, n, admin)
	b.Navigate(console+"workspace/"+agent, "#ocx-start-link")
	b.ClickAndLoad("#ocx-start-link")
	b.WaitVisible("#ocx-session-submit")
	b.Click("#ocx-kind-llm")
	b.Fill("#ocx-runner", "native")
	b.Fill("#ocx-model", "standin-native")
	b.Fill("#ocx-hears", person)
	var kind string
	b.Eval(`document.querySelector('input[name=kind]:checked').value`, &kind)
	if kind != "llm" {
		t.Fatalf("the kind chosen is %q", kind)
	}
	b.Screenshot("01-start-an-llm-session")
	b.ClickAndLoad("#ocx-session-submit")
	answerDone(t, b, "start the llm session")
	b.Screenshot("02-llm-session-started")

	var defs []*messages.SessionDefinition
	for _, d := range notesOn[*messages.SessionDefinition](n, record) {
		if d.P.Sender != admin {
			t.Errorf("a session definition on the record sent by %q", d.P.Sender)
		}
		defs = append(defs, d.Note)
	}
	if len(defs) != 1 || defs[0].Kind != messages.LLM || defs[0].Runner != messages.RunnerNative || defs[0].Model != "standin-native" || strings.Join(defs[0].Hears, ",") != person {
		t.Fatalf("the session definitions on the record: %+v", defs)
	}
	var sess messages.SessionStatus
	n.waitFor("the llm session listening", func() bool {
		s, ok := sessionOf(n.status(), agent)
		sess = s
		return ok && s.Listening
	})
	if !procAlive(protocol.ProcID{PID: sess.PID, Start: sess.StartTime}) {
		t.Fatalf("the status's session %+v is not a live process", sess)
	}
	b.Navigate(console+"sessions", "#ocx-sessions")
	waitText(t, b, `[data-ocx-session="`+key(agent)+`"] [data-ocx-field="state"]`, "the llm session idle", func(s string) bool { return s == "idle" })
	to := n.result(person, "post", "--to", record, "--text", "hello model")
	reply := n.awaitReplyBy(agent, record, to)
	if got := strings.TrimSpace(reply.Text); !strings.HasPrefix(got, "stand-in: ") || !strings.HasSuffix(got, "hello model") {
		t.Errorf("the llm session's reply %q, want the stand-in model's answer", got)
	}
	if reqs := m.seen(); len(reqs) == 0 || reqs[0].Model != "standin-native" {
		t.Errorf("the model's requests: %d, the first naming %q", len(reqs), func() string {
			if len(reqs) == 0 {
				return ""
			}
			return reqs[0].Model
		}())
	}
	b.NoErrors()
}

// wikiPage writes a wiki page on the node's repository as its admin, with
// the fossil command line, as the demo writes its own.
func (n *testNode) wikiPage(name, text string) {
	n.t.Helper()
	f := filepath.Join(n.t.TempDir(), "page")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		n.t.Fatal(err)
	}
	if out, err := n.srv.Fossil("wiki", "create", name, f, "--mimetype", "text/x-markdown", "-R", n.srv.Repo); err != nil {
		n.t.Fatalf("fossil wiki create %s: %v\n%s", name, err, out)
	}
}

// TestConsolePatternsInTheBrowser (D84): the admin opens Run patterns
// from the console's index in chromium: echo listed with its layers, a
// broken page listed with why it makes no run; opens echo, gives the
// objective, presses with the dry run ticked (the run in full in the
// answer, nothing written), then unticked: the run, written in full, is
// the admin's new thread, and the daemon runs it (started, the kept logs
// holding hello, ended exited 0). A reader sees the pages and no button.
func TestConsolePatternsInTheBrowser(t *testing.T) {
	needs(t, "ocxd")
	n := consoleNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	n.must("", "hook", "install")
	n.wikiPage("run/echo", "Section 14's echo.\n\n```json\n"+`{"process": {"user": "builder", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`+"\n```\n")
	n.wikiPage("run/broken", "```json\n"+`{"node": "lab-1"}`+"\n```\n")

	console := n.srv.URL + "ext/console/"
	b := harness.StartBrowser(t)
	browserLogin(t, b, n, admin)
	b.Navigate(console, "#ocx-patterns-link")
	b.ClickAndLoad("#ocx-patterns-link")
	b.WaitVisible("#ocx-patterns")
	if got := b.Text(`[data-ocx-pattern="echo"] [data-ocx-field="layers"]`); got != "process" {
		t.Errorf("the patterns page says %q of echo's layers", got)
	}
	if got := b.Text(`[data-ocx-pattern="broken"] [data-ocx-field="layers"]`); !strings.Contains(got, "makes no run") || !strings.Contains(got, "a pattern names no node") {
		t.Errorf("the patterns page says %q of the broken pattern", got)
	}
	b.Screenshot("01-patterns")
	b.ClickAndLoad(`[data-ocx-pattern="echo"] a[href$="/pattern/echo"]`)
	b.WaitVisible("#ocx-pattern-form")
	if !strings.Contains(b.Text("#ocx-pattern-text"), `"echo", "hello"`) {
		t.Fatalf("the pattern's page shows %q", b.Text("#ocx-pattern-text"))
	}
	posts := func() int {
		r := n.repo()
		defer r.Close()
		hashes, _, err := r.Received(n.ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(hashes)
	}
	received := posts()
	b.Fill("#ocx-pattern-objective", "Say hello.")
	b.ClickAndLoad("#ocx-pattern-submit")
	b.WaitVisible("#ocx-pattern-answer")
	if b.Text("#ocx-done") == "" {
		t.Fatalf("the dry run stopped: %s", b.Text("#ocx-pattern-answer"))
	}
	log := b.Text("#ocx-log")
	for _, want := range []string{"run/echo", `"node": "` + node + `"`, `"objective": "Say hello."`, `"echo",`, `"hello"`, "would"} {
		if !strings.Contains(log, want) {
			t.Errorf("the dry run's answer does not show %q:\n%s", want, log)
		}
	}
	if got := posts(); got != received {
		t.Fatalf("the dry run wrote: %d artifacts received, were %d", got, received)
	}
	b.Screenshot("02-dry-run")
	var objective string
	b.Eval(`document.getElementById('ocx-pattern-objective').value`, &objective)
	if objective != "Say hello." {
		t.Errorf("the form after the dry run holds the objective %q", objective)
	}
	b.Click("#ocx-pattern-dry")
	b.ClickAndLoad("#ocx-pattern-submit")
	root := answerDone(t, b, "post the run from the pattern")
	if len(root) != 64 {
		t.Fatalf("the run's hash: %q", root)
	}
	b.Screenshot("03-posted")
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	thread := n.runThread(root)
	run, ok := thread[0].Msg.(*runmsg.Run)
	if !ok || thread[0].Sender != admin || run.Node != node || run.Objective != "Say hello." || strings.Join(run.Process.Command, " ") != "echo hello" || !strings.Contains(thread[0].Text, "`run/echo`") {
		t.Fatalf("the run on the record, by %s: %+v\n%s", thread[0].Sender, run, thread[0].Text)
	}
	if e := n.endedOf(root); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("the run ended %+v", e)
	}
	if out := n.keptStdouts(root); len(out) != 1 || out[0] != "hello\n" {
		t.Errorf("the kept logs: %q", out)
	}
	b.ClickAndLoad("#ocx-result a")
	if !strings.Contains(b.Location(), "/forumpost/"+root) {
		t.Errorf("the answer's result leads to %s", b.Location())
	}
	b.NoErrors()

	r := harness.StartBrowser(t)
	browserLogin(t, r, n, person)
	for _, page := range []string{"patterns", "pattern/echo"} {
		r.Navigate(console+page, "#ocx")
		var forms int
		r.Eval(`document.querySelectorAll('form[method="POST"]').length`, &forms)
		if forms != 0 || !strings.Contains(r.Text("#ocx-readonly"), "neither admin nor setup") {
			t.Errorf("%s shows a reader %d buttons", page, forms)
		}
	}
	r.NoErrors()
}
