package itest

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

// chatUsage is reply, a chat completion, with the usage OpenAI's API
// says: in tokens read, out written.
func chatUsage(reply string, in, out int) string {
	return strings.TrimSuffix(reply, "}") + `,"usage":{"prompt_tokens":` + strconv.Itoa(in) + `,"completion_tokens":` + strconv.Itoa(out) +
		`,"total_tokens":` + strconv.Itoa(in+out) + `}}`
}

// usageSession is an llm session of login on the native runner, made by
// create with a budget, on a node whose model.json names a chat stand-in
// on 127.0.0.1.
type usageSession struct {
	n      *testNode
	model  *chatModel
	login  string
	record string
}

// newUsageSession makes the node on release root, the stand-in model, and
// the session, listening; budget is create's budget, as JSON.
func newUsageSession(t *testing.T, root, login, budget string) *usageSession {
	t.Helper()
	n := newNodeOn(t, root)
	return usageSessionOn(n, chatModelOn(n), login, budget)
}

// chatModelOn starts the chat stand-in and names it in n's model.json.
func chatModelOn(n *testNode) *chatModel {
	t := n.t
	t.Helper()
	model := &chatModel{t: t}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), []byte(`{"api": "openai", "base_url": "`+srv.URL+`", "models": ["standin-chat"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return model
}

// usageSessionOn is newUsageSession's session on node n, whose model is
// model (chatModelOn).
func usageSessionOn(n *testNode, model *chatModel, login, budget string) *usageSession {
	t := n.t
	t.Helper()
	in := filepath.Join(t.TempDir(), "create.json")
	rec := `{"objective": "Answer, and count.", "user": "` + login + `", "runner": "native", "hears": ["` + person + `"], "budget": ` + budget + `}`
	if err := os.WriteFile(in, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &usageSession{n: n, model: model, login: login}
	s.record = n.result(n.srv.AdminLogin, "tool", "create", "--input", in)
	n.waitFor("the agent's session to listen", func() bool { return s.status() != nil })
	return s
}

// status is the session on the status, nil when it does not listen.
func (s *usageSession) status() *messages.SessionStatus {
	for _, p := range s.n.status().Sessions {
		if p.Login == s.login && p.Listening {
			return &p
		}
	}
	return nil
}

// ask gives the model its replies, posts text as the person on the
// record, and waits for the agent's answer to it.
func (s *usageSession) ask(text string, replies ...string) posted {
	s.n.t.Helper()
	s.model.mu.Lock()
	s.model.replies = replies
	s.model.mu.Unlock()
	p := s.n.result(person, "post", "--to", s.record, "--text", text)
	return s.n.awaitReplyBy(s.login, s.record, p)
}

// usageAfter waits until the status shows turns turns and the node's
// count of requests requests, and returns the session's usage. The proxy
// counts a reply once it has passed whole, which may be a moment after
// the runner read its end and the turn ended: both are waited for.
func (s *usageSession) usageAfter(turns, requests uint64) *messages.SessionUsage {
	s.n.t.Helper()
	var u *messages.SessionUsage
	s.n.waitFor("the turns and their requests counted on the status", func() bool {
		if p := s.status(); p != nil && p.Usage != nil {
			u = p.Usage
		}
		return u != nil && u.Turns == turns && u.Model != nil && u.Model.Requests >= requests
	})
	return u
}

// end waits for the end note of the record's one launch.
func (s *usageSession) end() *messages.EndNote {
	s.n.t.Helper()
	launches := notesOn[*messages.LaunchNote](s.n, s.record)
	if len(launches) != 1 {
		s.n.t.Fatalf("%d launch notes on the record, want 1", len(launches))
	}
	var end *messages.EndNote
	s.n.waitFor("the session's end note", func() bool {
		if ends := s.n.endsOf(s.record, launches[0].P.Hash); len(ends) > 0 {
			end = ends[0]
		}
		return end != nil
	})
	return end
}

// TestSessionUsageOnStatusAndEndNote is issue 23 item 4 on the real
// daemon, hook, sandbox and MCP: an llm session on the native runner,
// whose stand-in model says its usage in each reply, shows on `ocx
// status` the node's count of its model (its proxy's, outside the
// sandbox: two replies, 250 tokens read and 30 written), its turn as the
// session measured it, and what its runner reported; its end note carries
// the same.
func TestSessionUsageOnStatusAndEndNote(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	s := newUsageSession(t, llmRoot, "native-u1", `{"wall": "1h"}`)
	got := s.ask("count me",
		chatUsage(chatCall("call-1", "post", map[string]any{"to": s.record, "text": "a note"}), 100, 20),
		chatUsage(chatText("counted"), 150, 10))
	if strings.TrimSpace(got.Text) != "counted" {
		t.Fatalf("the answer: %q", got.Text)
	}
	u := s.usageAfter(1, 2)
	want := messages.ModelCount{Requests: 2, Tokens: modelapi.Tokens{Input: 250, Output: 30}}
	if u.Model == nil || *u.Model != want {
		t.Errorf("the node's count on the status: %+v, want %+v", u.Model, want)
	}
	if u.WallMS == 0 || u.Runner == nil || u.Runner.Tokens != want.Tokens || u.Limit != 0 {
		t.Errorf("the session's turns on the status: %+v (runner %+v)", u, u.Runner)
	}
	if out := s.n.must("", "status").stdout; !strings.Contains(out, "requests=2 tokens_in=250 tokens_out=30") || !strings.Contains(out, "turns=1") {
		t.Errorf("ocx status does not show the usage:\n%s", out)
	}
	s.n.must(s.n.srv.AdminLogin, "tool", "stop", "--record", s.record)
	end := s.end()
	if end.Usage == nil || end.Usage.Model == nil || *end.Usage.Model != want || end.Usage.Turns != 1 || end.Budget != "" {
		t.Fatalf("the end note's usage: %+v (budget %q)", end.Usage, end.Budget)
	}
	if !strings.Contains(end.Note, "its model: 2 requests, 250 in, 30 out") || !strings.Contains(end.Note, "1 turn") {
		t.Errorf("the end note's words: %s", end.Note)
	}
}

// TestTokensBudgetEndsTheSession: a session whose record's budget says
// tokens 100 gets a reply of 110 (a tool call): the reply reaches the
// runner whole and the tool runs, but its next request is refused by the
// node's proxy, naming the limit, and never reaches the model; the turn
// ends on that refusal, on the record, and the daemon then ends the
// session with budget: tokens in its end note.
func TestTokensBudgetEndsTheSession(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	s := newUsageSession(t, llmRoot, "native-u2", `{"wall": "1h", "tokens": 100}`)
	if u := s.usageAfter(0, 0); u.Limit != 100 || u.Model == nil || u.Model.Requests != 0 {
		t.Fatalf("before any turn: %+v", u)
	}
	got := s.ask("spend it",
		chatUsage(chatCall("call-1", "post", map[string]any{"to": s.record, "text": "the tool ran"}), 90, 20),
		chatText("never sent"))
	if !strings.Contains(got.Text, "403 Forbidden") || !strings.Contains(got.Text, "tokens are spent") || !strings.Contains(got.Text, "limits.tokens of 100") {
		t.Errorf("the turn's answer does not say its request was refused past the budget:\n%s", got.Text)
	}
	byTool := false
	for _, p := range s.n.thread(s.record) {
		byTool = byTool || (p.Sender == s.login && strings.TrimSpace(p.Text) == "the tool ran")
	}
	if !byTool {
		t.Errorf("the reply that spent the budget did not reach the runner whole: its tool call was not run")
	}
	end := s.end()
	if end.Budget != messages.LimitTokens || end.Usage == nil || end.Usage.Model == nil {
		t.Fatalf("the end note: budget %q, usage %+v: %s", end.Budget, end.Usage, end.Note)
	}
	if m := end.Usage.Model; m.Requests != 1 || m.Total() != 110 || m.Refused != 1 || end.Usage.Limit != 100 {
		t.Errorf("the end note's count: %+v, limit %d", m, end.Usage.Limit)
	}
	if !strings.Contains(end.Note, "past its tokens limit") || !strings.Contains(end.Note, "110 tokens") {
		t.Errorf("the end note's words: %s", end.Note)
	}
	if reqs := s.model.requests(); len(reqs) != 1 {
		t.Errorf("the model saw %d requests, want the one that spent the budget", len(reqs))
	}
	stopped := notesOn[*messages.StoppedNote](s.n, s.record)
	if len(stopped) != 1 || stopped[0].Note.Cause != messages.StopBySignal {
		t.Errorf("the session's stopped notes: %+v", stopped)
	}
}

// TestRunnerUnderReportingChangesNothing: a runner that reports fewer
// tokens than it used (a wrapper round the real runner that writes 1 in,
// 1 out as its report) changes only what is shown as its own word: the
// node's count, at its proxy, is what the replies said, and it is what
// ends the session past its budget.
func TestRunnerUnderReportingChangesNothing(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	root := lyingRelease(t)
	s := newUsageSession(t, root, "native-u3", `{"wall": "1h", "tokens": 200}`)
	s.ask("first", chatUsage(chatText("one"), 80, 40))
	u := s.usageAfter(1, 1)
	if u.Runner == nil || u.Runner.Input != 1 || u.Runner.Output != 1 {
		t.Fatalf("the lying runner's report: %+v", u.Runner)
	}
	if u.Model == nil || u.Model.Input != 80 || u.Model.Output != 40 {
		t.Fatalf("the node's count followed the runner: %+v", u.Model)
	}
	s.ask("second", chatUsage(chatText("two"), 70, 30))
	end := s.end()
	if end.Budget != messages.LimitTokens || end.Usage == nil || end.Usage.Model == nil || end.Usage.Model.Total() != 220 {
		t.Fatalf("the end note: budget %q, usage %+v: %s", end.Budget, end.Usage, end.Note)
	}
	if r := end.Usage.Runner; r == nil || r.Input != 2 || r.Output != 2 {
		t.Errorf("the runner's own word in the end note: %+v", r)
	}
}

// lyingRelease is a release root like llmRoot whose ocx-runner-native runs
// the real runner, then overwrites its report with 1 token in and 1 out.
func lyingRelease(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	rel := filepath.Join(dir, "releases", "liar")
	if err := os.MkdirAll(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(llmRoot, "releases", "llm")
	for _, name := range []string{"ocx", "ocxd", "workspace"} {
		if err := os.Link(filepath.Join(src, name), filepath.Join(rel, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(src, "ocx-runner-native"), filepath.Join(rel, "ocx-runner-native.real")); err != nil {
		t.Fatal(err)
	}
	liar := "#!/bin/sh\n\"$(dirname \"$0\")/ocx-runner-native.real\" \"$@\"\ncode=$?\n" +
		"[ -n \"$OCX_TURN_USAGE\" ] && printf '{\"ocx\": \"runner-usage\", \"input\": 1, \"output\": 1}\\n' >\"$OCX_TURN_USAGE\"\nexit $code\n"
	if err := os.WriteFile(filepath.Join(rel, "ocx-runner-native"), []byte(liar), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("releases", "liar"), filepath.Join(dir, "current")); err != nil {
		t.Fatal(err)
	}
	return dir
}
