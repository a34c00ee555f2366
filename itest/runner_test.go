package itest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// chatModel is a stand-in for an OpenAI-compatible chat-completions server
// on 127.0.0.1: it plays its replies in order, and keeps each request's
// messages and authorization.
type chatModel struct {
	t       testing.TB
	mu      sync.Mutex
	replies []string // each a whole response body
	seen    []chatRequest
}

type chatRequest struct {
	Auth     string
	Messages []json.RawMessage
	Tools    []string
}

func (m *chatModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "not here: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	seen := chatRequest{Auth: r.Header.Get("Authorization"), Messages: req.Messages}
	for _, t := range req.Tools {
		seen.Tools = append(seen.Tools, t.Function.Name)
	}
	m.mu.Lock()
	m.seen = append(m.seen, seen)
	var reply string
	if len(m.replies) > 0 {
		reply, m.replies = m.replies[0], m.replies[1:]
	}
	m.mu.Unlock()
	if reply == "" {
		http.Error(w, "the stand-in model has no reply left", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, reply)
}

func (m *chatModel) requests() []chatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]chatRequest(nil), m.seen...)
}

// chatText is a reply of plain text; chatCall one calling a tool.
func chatText(text string) string {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"finish_reason": "stop",
		"message": map[string]any{"role": "assistant", "content": text}}}})
	return string(b)
}

func chatCall(id, tool string, args map[string]any) string {
	a, _ := json.Marshal(args)
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"finish_reason": "tool_calls",
		"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": id, "type": "function", "function": map[string]any{"name": tool, "arguments": string(a)}}}}}}})
	return string(b)
}

// Issue 15 items 2 and 8: a `stays` llm session on the real ocx-runner-native,
// against a stand-in model server on 127.0.0.1 reached through the node's
// model proxy, answers a person's post, calls OCX's post tool through MCP
// from inside its sandbox, and continues the same conversation on the next
// post, across a re-exec of the daemon and a start on the same record that
// is refused (D76: the record's agent runs once): the server sees the
// earlier turns' history. The key is the proxy's
// alone: it reaches the server and nothing the session wrote.
func TestNativeSessionEndToEnd(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	n := newNodeOn(t, llmRoot)
	admin := n.srv.AdminLogin

	const key = "sk-itest-0123456789"
	model := &chatModel{t: t}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	keyFile := filepath.Join(t.TempDir(), "model.key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := `{"api": "openai", "base_url": "` + srv.URL + `", "key_file": "` + keyFile + `", "models": ["standin-chat"]}`
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	input := filepath.Join(t.TempDir(), "create.json")
	rec := `{"objective": "Greet whoever writes.", "user": "native-7", "runner": "native", "hears": ["` + person + `"], "budget": {"wall": "1h"}}`
	if err := os.WriteFile(input, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	record := n.result(admin, "tool", "create", "--input", input)
	n.waitFor("the agent's session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == "native-7" && s.Listening {
				return true
			}
		}
		return false
	})

	// Turn 1: a tool call, then the answer.
	model.mu.Lock()
	model.replies = []string{
		chatCall("call-1", "post", map[string]any{"to": record, "text": "a note from the tool"}),
		chatText("native answer one"),
		chatText("native answer two"),
		chatText("native answer three"),
	}
	model.mu.Unlock()
	hello := n.result(person, "post", "--to", record, "--text", "hello there")
	first := n.awaitReplyBy("native-7", record, hello)
	if first.Sender != "native-7" || strings.TrimSpace(first.Text) != "native answer one" {
		t.Fatalf("the answer to hello: %+v", first)
	}
	byTool := false
	for _, p := range n.thread(record) {
		byTool = byTool || (p.Sender == "native-7" && strings.TrimSpace(p.Text) == "a note from the tool")
	}
	if !byTool {
		t.Errorf("the post tool's post is not in the record's thread, by the agent")
	}

	// Turn 2 continues the conversation, across a re-exec of the daemon.
	n.send("reexec")
	n.waitFor("the daemon's re-exec", func() bool {
		d := n.status().Daemon
		return d != nil && d.Reexec != nil && d.Reexec.OK
	})
	again := n.result(person, "post", "--to", record, "--text", "and again")
	second := n.awaitReplyBy("native-7", record, again)
	if strings.TrimSpace(second.Text) != "native answer two" {
		t.Fatalf("the answer to the second post: %+v", second)
	}
	// A start of the session on the same record is refused: a create
	// record's agent runs once (D76), and the running one is left alone.
	launched := len(notesOn[*messages.LaunchNote](n, record))
	if a, _ := n.answer(admin, "session", "start", "native-7/demo", "--record", record, "--kind", "llm", "--runner", "native",
		"--model", "standin-chat", "--lifetime", "stays", "--hears", person); a.Stopped == nil || !strings.Contains(*a.Stopped, "has had its run") {
		t.Errorf("a second start on the record: %+v; want refused (D76)", a)
	}
	if got := len(notesOn[*messages.LaunchNote](n, record)); got != launched {
		t.Errorf("the refused start wrote %d launch notes", got-launched)
	}
	// Turn 3: the conversation goes on.
	third := n.result(person, "post", "--to", record, "--text", "a third time")
	if got := n.awaitReplyBy("native-7", record, third); strings.TrimSpace(got.Text) != "native answer three" {
		t.Fatalf("the answer to the third post: %+v", got)
	}
	reqs := model.requests()
	if len(reqs) != 4 {
		t.Fatalf("the model saw %d requests, want 4", len(reqs))
	}
	joined := func(r chatRequest) string {
		var b strings.Builder
		for _, m := range r.Messages {
			b.Write(m)
			b.WriteByte('\n')
		}
		return b.String()
	}
	if j := joined(reqs[0]); !strings.Contains(j, "Record "+record) || !strings.Contains(j, "Greet whoever writes.") || !strings.Contains(j, "hello there") {
		t.Errorf("the first request does not give the record, its objective and the post (E4):\n%s", j)
	}
	if !strings.Contains(strings.Join(reqs[0].Tools, ","), "post") {
		t.Errorf("the model was offered the tools %q, not post", reqs[0].Tools)
	}
	if j := joined(reqs[1]); !strings.Contains(j, "a note from the tool") || !strings.Contains(j, "call-1") {
		t.Errorf("the second request does not carry the tool's answer:\n%s", j)
	}
	if j := joined(reqs[2]); !strings.Contains(j, "hello there") || !strings.Contains(j, "native answer one") || !strings.Contains(j, "and again") {
		t.Errorf("turn 2, after the re-exec, does not continue turn 1's conversation:\n%s", j)
	}
	if j := joined(reqs[3]); !strings.Contains(j, "hello there") || !strings.Contains(j, "native answer two") || !strings.Contains(j, "a third time") {
		t.Errorf("turn 3 does not continue the conversation:\n%s", j)
	}
	for i, r := range reqs {
		if r.Auth != "Bearer "+key {
			t.Errorf("request %d carried authorization %q, want the node's key", i, r.Auth)
		}
	}
	// The key is nowhere the agent or the record can read.
	logData, _ := os.ReadFile(filepath.Join(n.workspaceDir("native-7"), "session", "log"))
	if strings.Contains(string(logData), key) {
		t.Errorf("the session's log holds the key")
	}
	for _, p := range n.thread(record) {
		if strings.Contains(p.Text, key) {
			t.Errorf("a post holds the key: %s", p.Hash)
		}
	}
	_ = filepath.WalkDir(n.workspaceDir("native-7"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), key) {
				t.Errorf("%s, in the workspace, holds the key", path)
			}
		}
		return nil
	})
	n.must(admin, "tool", "stop", "--record", record)
}

// BenchmarkTurn is issue 15 item 10: a turn's cost from the wake to the
// reply on the record, for a `stays` llm session on the real
// ocx-runner-native whose stand-in model answers at once, beside the same
// turn of a mechanical session (a shell answering what it heard), each in
// its sandbox under the real daemon. A person's post is written over sync
// and the node's backoffice runs the hook (D11); the time is until the
// agent's reply is on the node. Reported: each's p50 and mean, and the
// ratio of the p50s (native/mechanical; the aim is at most 1.5).
func BenchmarkTurn(b *testing.B) {
	needs(b, "ocxd", "workspace", "llm ocx-runner-native")
	n := newNodeOn(b, llmRoot)
	admin := n.srv.AdminLogin
	model := &chatModel{t: b}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		model.mu.Lock()
		model.replies = append(model.replies, chatText("native heard it"))
		model.mu.Unlock()
		model.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), []byte(`{"api": "openai", "base_url": "`+srv.URL+`"}`), 0o600); err != nil {
		b.Fatal(err)
	}
	start := func(login string, args ...string) string {
		n.must("", "login", "add", login)
		record := n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
		n.result(admin, append([]string{"session", "start", key(login), "--hears", person, "--lifetime", "stays"}, args...)...)
		n.waitFor(login+"'s session to listen", func() bool {
			for _, s := range n.status().Sessions {
				if s.Login == login && s.Listening {
					return true
				}
			}
			return false
		})
		return record
	}
	mech := start("mech-1", "--kind", "mechanical", "--", "/bin/sh", "-c", `printf 'heard: '; cat`)
	native := start("native-1", "--kind", "llm", "--runner", "native", "--model", "stand-in")
	adm := &fossilio.Admin{Repository: n.srv.Repo, Fossil: &fossilio.Fossil{Home: n.agents, User: "ocx", Dir: n.agents}}
	c := &fossilio.Client{URL: n.srv.URL, Login: person, Password: personPW, ProjectCode: n.srv.ProjectCode, Backoffice: adm.Backoffice}
	r := n.repo()
	defer r.Close()
	p50 := map[string]time.Duration{}
	turn := func(b *testing.B, login, record string) {
		var times []time.Duration
		i := 0
		for b.Loop() {
			i++
			t0 := time.Now()
			p, err := c.Reply(n.ctx, record, record, fmt.Sprintf("ping %d", i))
			if err != nil {
				b.Fatal(err)
			}
			for deadline := time.Now().Add(60 * time.Second); !repliedBy(b, r, login, record, p); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatalf("no reply by %s to %s in 60 s", login, p)
				}
			}
			times = append(times, time.Since(t0))
		}
		p50[login], _ = reportTimes(b, "turn", times)
		if m := p50["mech-1"]; login != "mech-1" && m > 0 {
			b.ReportMetric(float64(p50[login])/float64(m), "vs-mechanical-p50")
		}
	}
	b.Run("mechanical", func(b *testing.B) { turn(b, "mech-1", mech) })
	b.Run("native", func(b *testing.B) { turn(b, "native-1", native) })
	n.must("", "session", "stop", key("mech-1"))
	n.must("", "session", "stop", key("native-1"))
}

func repliedBy(b *testing.B, r *fossilio.Repo, login, root, to string) bool {
	posts, err := r.Thread(b.Context(), root)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range posts {
		if p.InReplyTo == to && p.Sender == login {
			return true
		}
	}
	return false
}

// Issue 15 item 8: a `completes` llm session on the real ocx-runner-native
// whose own record is a ticket takes a first turn on the ticket, and ends
// once the model's answer holds a report: the report is a comment on the
// ticket, by the agent, and the daemon's end note says the session exited 0.
func TestNativeCompletesOnATicket(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	n := newNodeOn(t, llmRoot)
	admin := n.srv.AdminLogin
	report := "Done: the crash is understood.\n\n```json\n{\"ocx\": \"report\", \"outcome\": \"done\", \"summary\": \"the crash is understood\"}\n```"
	model := &chatModel{t: t, replies: []string{chatText(report)}}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), []byte(`{"api": "openai", "base_url": "`+srv.URL+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n.must("", "login", "add", "native-3")
	n.result(admin, "workspace", "add", "--login", "native-3", "--project", "demo", "--branch", "trunk")
	tid := n.result(person, "ticket", "--title", "It crashes", "--text", "It crashes on start; find out why.")
	launch := n.result(admin, "session", "start", key("native-3"), "--record", tid, "--kind", "llm", "--runner", "native",
		"--model", "stand-in", "--lifetime", "completes", "--hears", person)
	var reported posted
	n.waitFor("the agent's report on the ticket", func() bool {
		for _, c := range n.ticket(tid) {
			if c.Sender == "native-3" && strings.Contains(c.Text, `"ocx": "report"`) {
				reported = c
				return true
			}
		}
		return false
	})
	if !strings.Contains(reported.Text, "the crash is understood") {
		t.Errorf("the report: %q", reported.Text)
	}
	n.waitFor("the session to end on its report", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == "native-3" {
				return false
			}
		}
		return true
	})
	var ends []*messages.EndNote
	n.waitFor("the end note", func() bool {
		ends = nil
		for _, c := range n.ticket(tid) {
			if e, ok := c.Note.(*messages.EndNote); ok && e.Launch == launch {
				ends = append(ends, e)
			}
		}
		return len(ends) > 0
	})
	if len(ends) != 1 || ends[0].Status != messages.EndExited || ends[0].ExitCode == nil || *ends[0].ExitCode != 0 {
		t.Errorf("the end notes of the launch: %+v", ends)
	}
	if reqs := model.requests(); len(reqs) != 1 || !strings.Contains(string(reqs[0].Messages[len(reqs[0].Messages)-1]), "It crashes on start") {
		t.Errorf("the model's one request does not hold the ticket's first comment: %d requests", len(reqs))
	}
}

// E9 (D41): a launch note written by hand, for an llm session on a runner
// the release does not hold, is refused by the daemon before anything
// starts, the refusal naming the runner; no process names the workspace.
func TestDaemonRefusesARunnerNotOffered(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	data, err := os.ReadFile(filepath.Join(n.workspaceDir(agent), "binding.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := messages.DecodeBinding(data)
	if err != nil {
		t.Fatal(err)
	}
	c := &fossilio.Client{URL: n.srv.URL, Login: admin, Password: n.srv.AdminPassword, ProjectCode: n.srv.ProjectCode}
	def := &messages.SessionDefinition{Kind: messages.LLM, Runner: messages.RunnerCodex, Model: "m", Lifetime: messages.Stays, Hears: []string{person}}
	dblock, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	sdef, err := c.Reply(n.ctx, record, record, "Session, by hand.\n\n"+string(dblock))
	if err != nil {
		t.Fatal(err)
	}
	ln := &messages.LaunchNote{Login: agent, Project: "demo", Workspace: b.Workspace, Session: sdef, Release: messages.ReleaseCurrent}
	lblock, err := ln.Encode()
	if err != nil {
		t.Fatal(err)
	}
	launch, err := c.Reply(n.ctx, record, record, "Launch, by hand.\n\n"+string(lblock))
	if err != nil {
		t.Fatal(err)
	}
	n.send(pipe.PostLine{Repository: n.srv.Repo, Hash: launch}.String())
	n.waitFor("the refusal of the launch", func() bool { return len(n.refusalsOf(record, launch)) > 0 })
	if r := n.refusalsOf(record, launch); len(r) != 1 || !strings.Contains(r[0].Reason, `runner "codex" is not offered by this node`) || !strings.Contains(r[0].Reason, "ocx-runner-codex") {
		t.Errorf("the refusals: %+v", r)
	}
	for _, s := range n.status().Sessions {
		t.Errorf("a session runs after the refusal: %+v", s)
	}
}
