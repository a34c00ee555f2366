package session_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

func llm(lifetime messages.Lifetime) *messages.SessionDefinition {
	return &messages.SessionDefinition{Kind: messages.LLM, Runner: messages.RunnerNative, Model: "m1", Lifetime: lifetime}
}

func TestLLMStaysAnswersWithItsRunner(t *testing.T) {
	n := newNode(t)
	w := n.workspace("llm-1")
	r := w.record(messages.ListenThread, "Talk with us.", llm(messages.Stays), "")
	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)
	h := w.post(n.admin, r, "hello runner")
	w.wake(h)
	a := w.waitReply(r, h)
	if strings.TrimSpace(a.text) != "native(m1) heard: hello runner" {
		t.Errorf("the runner's answer:\n%s", a.text)
	}
	// The runner's standard error goes to the session's log, not the answer.
	if !strings.Contains(w.logText(), "ocx-runner-native: answering "+h) {
		t.Errorf("the runner's standard error is not in the log")
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after TERM", code)
	}
}

func TestCompletesAsksThenExitsOnItsReport(t *testing.T) {
	n := newNode(t)
	w := n.workspace("llm-2")
	r := w.record(messages.ListenThread, "Port the parser; ask me what matters first.", llm(messages.Completes), "")
	p := w.serve(r.launch, false)

	// The first turn works on the record's objective; its answer is a
	// question, so the session keeps running.
	q := w.waitReply(r, r.first)
	if !strings.Contains(q.text, "native(m1) asks:") || !strings.Contains(q.text, "Port the parser") {
		t.Fatalf("the first turn's answer:\n%s", q.text)
	}
	if len(w.notes(r, messages.KindReport)) != 0 {
		t.Fatalf("a question was taken for a report")
	}
	more := w.post(n.admin, r, "Just the tokens, and please report when done.")
	w.wake(more)
	rep := w.waitReply(r, more)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after the report, want 0:\n%s", code, w.logText())
	}
	reports := w.notes(r, messages.KindReport)
	if len(reports) != 1 || reports[0].(*messages.ReportNote).Outcome != messages.ReportDone {
		t.Fatalf("reports on the record: %v\n%s", reports, rep.text)
	}
	if !strings.Contains(w.logText(), `why="report written"`) {
		t.Errorf("the log does not say the session ended on its report")
	}
}

func TestTermDuringATurnIsPassedOnThenStopped(t *testing.T) {
	n := newNode(t)
	w := n.workspace("mech-3")
	ready := filepath.Join(w.ws.Dir, "trap-set")
	cmd := []string{"sh", "-c", `trap 'echo "got TERM"; exit 0' TERM
echo started
: > "$HOME/trap-set"
sleep 60 &
wait`}
	r := w.record(messages.ListenThread, "Work slowly.", stays(cmd...), "")
	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)
	h := w.post(n.admin, r, "go")
	w.wake(h)
	deadline := time.Now().Add(waitFor)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn never started:\n%s", w.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// While the turn runs, the session holds WS/session/turn naming the post.
	if b, err := os.ReadFile(filepath.Join(w.ws.Session, "turn")); err != nil || strings.TrimSpace(string(b)) != h {
		t.Errorf("WS/session/turn while working: %q %v", b, err)
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after TERM during a turn, want 0:\n%s", code, w.logText())
	}
	a := w.waitReply(r, h)
	if !strings.Contains(a.text, "started") || !strings.Contains(a.text, "got TERM") {
		t.Errorf("the turn did not get TERM, or its answer is lost:\n%s", a.text)
	}
	sn := w.stoppedNote(r)
	if sn.Cause != messages.StopBySignal || sn.Signal != "SIGTERM" {
		t.Errorf("stopped note %s", sn)
	}
	w.turnFileGone()
}

// TestMechanicalCompletesOnATicket is seed 002's "report a job's result"
// (D56): a mechanical completes session launched on its record (a build
// on its ticket) runs its command once, on the record's objective; the
// command's end is the job's result: its output and a report note, done
// for exit 0 with its last line, replying to the request (the ticket's
// first change), and the session exits on it.
func TestMechanicalCompletesOnATicket(t *testing.T) {
	n := newNode(t)
	w := n.workspace("mech-4")
	cmd := []string{"sh", "-c", "read -r x || true\necho \"building: $x\"\necho 'built 3 targets'"}
	def := &messages.SessionDefinition{Kind: messages.Mechanical, Command: cmd, Lifetime: messages.Completes}
	r := w.record(messages.ListenTicket, "Fix the crash on empty input.", def, "")
	p := w.serve(r.launch, false)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d, want 0 once the job's result is written:\n%s", code, w.logText())
	}
	// The objective of a ticket is its first change's comment.
	q := w.waitReply(r, r.first)
	if !strings.Contains(q.text, "building: Fix the crash on empty input.") {
		t.Fatalf("the job's answer:\n%s", q.text)
	}
	reports := w.notes(r, messages.KindReport)
	if len(reports) != 1 {
		t.Fatalf("reports on the ticket: %v", reports)
	}
	if rep := reports[0].(*messages.ReportNote); rep.Outcome != messages.ReportDone || rep.Summary != "built 3 targets" {
		t.Errorf("the job's report: %+v; want done, \"built 3 targets\"", rep)
	}
}

// TestJobResultFailedAndItsOwn: a job whose command exits 3 reports
// failed, saying how it ended and its last line; one whose command printed
// a report of its own keeps that one, and no second.
func TestJobResultFailedAndItsOwn(t *testing.T) {
	n := newNode(t)
	for _, tc := range []struct {
		login, script string
		want          messages.ReportNote
	}{
		{"mech-5", "echo 'linking'; echo 'ld: missing symbol' >&2; exit 3",
			messages.ReportNote{Outcome: messages.ReportFailed, Summary: "exit status 3: ld: missing symbol"}},
		{"mech-6", "printf 'Half of it.\\n\\n```json\\n{\"ocx\": \"report\", \"outcome\": \"failed\", \"summary\": \"my own\"}\\n```\\n'",
			messages.ReportNote{Outcome: messages.ReportFailed, Summary: "my own"}},
	} {
		w := n.workspace(tc.login)
		def := &messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"sh", "-c", tc.script}, Lifetime: messages.Completes}
		r := w.record(messages.ListenThread, "Build it.", def, "")
		p := w.serve(r.launch, false)
		if code := p.wait(); code != 0 {
			t.Fatalf("%s: exit %d, want 0:\n%s", tc.login, code, w.logText())
		}
		reports := w.notes(r, messages.KindReport)
		if len(reports) != 1 {
			t.Fatalf("%s: reports: %v", tc.login, reports)
		}
		if rep := reports[0].(*messages.ReportNote); rep.Outcome != tc.want.Outcome || rep.Summary != tc.want.Summary {
			t.Errorf("%s: the report %+v, want %+v", tc.login, rep, tc.want)
		}
	}
}

func TestARunnerNotOnPathFailsAtStart(t *testing.T) {
	n := newNode(t)
	w := n.workspace("llm-3")
	def := &messages.SessionDefinition{Kind: messages.LLM, Runner: messages.RunnerCodex, Model: "m1", Lifetime: messages.Stays}
	r := w.record(messages.ListenThread, "Nobody can answer this.", def, "")
	p := w.serve(r.launch, false)
	if code := p.wait(); code != 1 {
		t.Fatalf("exit %d for a runner that is not there, want 1", code)
	}
	if !strings.Contains(w.logText(), "the session's runner ocx-runner-codex is not on PATH") {
		t.Errorf("the log does not say why:\n%s", w.logText())
	}
}

// TestV1RecordObjective: a session on a protocol v1 record works on
// "Record HASH: OBJECTIVE" (E4), the record's own field, not the post's
// whole text with its JSON block.
func TestV1RecordObjective(t *testing.T) {
	n := newNode(t)
	w := n.workspace("llm-9")
	rec := &runmsg.TaskRecord{User: "llm-9", Node: "ocx", Runner: messages.RunnerNative, Objective: "Port the parser; ask me what matters first.",
		Checkins: []string{}, Hears: []string{}, Sandbox: runmsg.DefaultRecordSandbox(true), Budget: runmsg.Budget{Wall: "1h"}}
	block, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r := w.record(messages.ListenThread, "Record of agent `llm-9`.\n\n"+string(block), llm(messages.Completes), "")
	p := w.serve(r.launch, false)
	q := w.waitReply(r, r.first)
	if !strings.Contains(q.text, "Record "+r.first+": Port the parser") || strings.Contains(q.text, "kind") {
		t.Errorf("the first turn's answer:\n%s", q.text)
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after TERM", code)
	}
}

// TestLLMFailedTurnsAreSaidAndAStaysSessionGoesOn: a runner that exits 1
// (printing a stack trace and its failure note), one that a signal ends,
// and one no longer on PATH when a turn comes (issue 15, item 5) are each
// answered with a short note saying what failed, quoting at most the last
// line the runner printed, never its trace; a stays session keeps answering.
func TestLLMFailedTurnsAreSaidAndAStaysSessionGoesOn(t *testing.T) {
	n := newNode(t)
	w := n.workspace("llm-fail")
	// The runner is a copy in a directory of its own on PATH, so that the
	// test can take it away while the session runs.
	dir := t.TempDir()
	prog := filepath.Join(dir, "ocx-runner-codex")
	src, err := os.ReadFile(filepath.Join(release, "ocx-runner-native"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, src, 0o755); err != nil {
		t.Fatal(err)
	}
	w.sandbox.Path = append([]string{dir}, w.sandbox.Path...)
	def := &messages.SessionDefinition{Kind: messages.LLM, Runner: messages.RunnerCodex, Model: "m1", Lifetime: messages.Stays}
	r := w.record(messages.ListenThread, "Talk with us.", def, "")
	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)

	for _, c := range []struct{ text, want string }{
		{"please fail", "The runner ocx-runner-codex failed: exit 1.\n\n> The runner failed: model m1 is not there."},
		{"please die", "The runner ocx-runner-codex failed: ended by SIGKILL.\n\n> native(m1) starts to answer"},
		{"hello after failures", "native(m1) heard: hello after failures"},
	} {
		h := w.post(n.admin, r, c.text)
		w.wake(h)
		if a := w.waitReply(r, h); strings.TrimSpace(a.text) != c.want {
			t.Errorf("%q answered:\n%s\nwant:\n%s", c.text, a.text, c.want)
		}
	}
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	h := w.post(n.admin, r, "hello to nobody")
	w.wake(h)
	a := w.waitReply(r, h)
	if !strings.HasPrefix(a.text, "The runner ocx-runner-codex failed: it could not be started: ") || !strings.Contains(a.text, "not found") {
		t.Errorf("a runner gone from PATH answered:\n%s", a.text)
	}
	if got := w.notes(r, messages.KindReport); len(got) != 0 {
		t.Errorf("a stays session wrote reports: %v", got)
	}
	if !p.running() {
		t.Fatalf("the stays session ended after failed turns:\n%s", w.logText())
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after TERM", code)
	}
}

// TestLLMCompletesEndsOnAFailedTurn: a completes session whose runner fails
// ends as on a report, with a failed report naming what failed.
func TestLLMCompletesEndsOnAFailedTurn(t *testing.T) {
	n := newNode(t)
	w := n.workspace("llm-fail-2")
	r := w.record(messages.ListenThread, "Port the parser, and please fail.", llm(messages.Completes), "")
	p := w.serve(r.launch, false)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after a failed turn, want 0:\n%s", code, w.logText())
	}
	reports := w.notes(r, messages.KindReport)
	if len(reports) != 1 {
		t.Fatalf("reports on the record: %v", reports)
	}
	if rep := reports[0].(*messages.ReportNote); rep.Outcome != messages.ReportFailed || rep.Summary != "The runner ocx-runner-native failed: exit 1." {
		t.Errorf("the report: %s", rep)
	}
	a := w.waitReply(r, r.first)
	if strings.Contains(a.text, "goroutine") || !strings.Contains(a.text, "> The runner failed: model m1 is not there.") {
		t.Errorf("the answer:\n%s", a.text)
	}
	if !strings.Contains(w.logText(), `why="report written"`) {
		t.Errorf("the log does not say the session ended on its report")
	}
}

// TestTurnUsageKept is issue 23 item 4 on the session's side (D50): each
// turn's wall time, measured around its process, its CPU time and what its
// runner reported of itself are kept in session/usage.json for its launch,
// summed; a runner's report is taken with its turn, so a turn that reports
// nothing shows none.
func TestTurnUsageKept(t *testing.T) {
	n := newNode(t)
	w := n.workspace("llm-u")
	r := w.record(messages.ListenThread, "Count what you use.", llm(messages.Stays), "")
	p := w.serve(r.launch, false)
	w.waitLog("event=ready", 1)
	h1 := w.post(n.admin, r, "please report usage")
	w.wake(h1)
	w.waitReply(r, h1)
	h2 := w.post(n.admin, r, "and now nothing")
	w.wake(h2)
	w.waitReply(r, h2)
	w.waitLog("event=usage", 2)
	b, err := os.ReadFile(w.ws.TurnsFile())
	if err != nil {
		t.Fatal(err)
	}
	st, err := messages.DecodeSessionTurns(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if st.Launch != r.launch || len(st.Turns) != 2 || st.Total.Turns != 2 {
		t.Fatalf("turns %s", b)
	}
	first, second := st.Turns[0], st.Turns[1]
	if first.Post != h1 || second.Post != h2 {
		t.Errorf("the turns answer %s and %s, want %s and %s", first.Post, second.Post, h1, h2)
	}
	if first.Runner == nil || first.Runner.Input != 7 || first.Runner.Output != 3 || second.Runner != nil {
		t.Errorf("the runners' reports: %+v, %+v", first.Runner, second.Runner)
	}
	if first.CPUMS == 0 || first.WallMS < first.CPUMS/2 || st.Total.WallMS != first.WallMS+second.WallMS || st.Total.CPUMS != first.CPUMS+second.CPUMS {
		t.Errorf("times: %+v, total %+v", st.Turns, st.Total)
	}
	if _, err := os.Stat(w.ws.RunnerUsage()); !os.IsNotExist(err) {
		t.Errorf("the runner's report is left after its turn: %v", err)
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d after TERM", code)
	}
}
