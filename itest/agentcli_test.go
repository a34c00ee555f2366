package itest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// agentCLIs is where make deps installed Claude Code and the Codex CLI
// from the npm registry: the directory their commands are in, for a
// sandbox's PATH, and the install, which a sandbox sees read-only.
func agentCLIs(t testing.TB) (bin, install string) {
	t.Helper()
	bin = os.Getenv("OCX_AGENT_CLIS")
	if bin == "" {
		t.Fatal("OCX_AGENT_CLIS is not set: make deps installs Claude Code and the Codex CLI, and make test names where")
	}
	for name, v := range map[string]string{"claude": os.Getenv("OCX_CLAUDE_CODE_VERSION"), "codex": os.Getenv("OCX_CODEX_VERSION")} {
		out, err := exec.Command(filepath.Join(bin, name), "--version").Output()
		if err != nil || (v != "" && !strings.Contains(string(out), v)) {
			t.Fatalf("%s --version in %s: %q, %v; want version %s (make deps installs it)", name, bin, out, err, v)
		}
	}
	return bin, filepath.Dir(filepath.Dir(bin)) // .../node_modules/.bin
}

// cliNode is a node on the llm release whose sandboxes see the agent CLIs,
// and whose model.json names the stand-in model for both APIs, each with
// its own key, which the node alone holds.
type cliNode struct {
	*testNode
	model *modelStandIn
	keys  map[string]string // by API: anthropic, openai
}

func newCLINode(t testing.TB) *cliNode {
	t.Helper()
	needs(t, "ocxd", "workspace", "llm ocx-runner-claude", "llm ocx-runner-codex")
	return cliNodeOf(t, newNodeOn(t, llmRoot))
}

// cliNodeOf makes n, a node on the llm release, a cliNode; its sandboxes
// also see readOnly.
func cliNodeOf(t testing.TB, n *testNode, readOnly ...string) *cliNode {
	t.Helper()
	bin, install := agentCLIs(t)
	args := []string{"init", "--sandbox-read-only", install, "--sandbox-path", bin}
	for _, p := range readOnly {
		args = append(args, "--sandbox-read-only", p)
	}
	n.must("", args...)
	c := &cliNode{testNode: n, model: startModelStandIn(t, nil),
		keys: map[string]string{"anthropic": "sk-ant-itest-4455667788", "openai": "sk-oai-itest-1122334455"}}
	cfg := map[string]any{}
	for api, key := range c.keys {
		f := filepath.Join(t.TempDir(), api+".key")
		if err := os.WriteFile(f, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg[api] = map[string]any{"base_url": c.model.URL(), "key_file": f, "models": cliModels[api]}
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(n.seen(filepath.Join(n.agents, "model.json")), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// createAgent creates a record for login on runner and model with the
// restrictions restrict (a JSON object), hearing the person, and waits for
// its session to listen.
func (c *cliNode) createAgent(login, runner, model, restrict string) string {
	c.t.Helper()
	return c.createAgentWithBudget(login, runner, model, restrict, `{"wall": "1h"}`)
}

// createAgentWithBudget is createAgent with create's budget (JSON).
func (c *cliNode) createAgentWithBudget(login, runner, model, restrict, budget string) string {
	c.t.Helper()
	return c.createAgentWith(login, runner, model, restrict, `{"network": false, "read_only": [], "read_write": []}`, budget)
}

// createAgentWith is createAgent with create's sandbox and budget (JSON).
func (c *cliNode) createAgentWith(login, runner, model, restrict, sandbox, budget string) string {
	c.t.Helper()
	record := c.result(c.srv.AdminLogin, "tool", "create", "--input", c.createInput(login, runner, model, restrict, sandbox, budget, false))
	c.awaitListening(login)
	return record
}

// createInput writes create's input for login, and returns its file;
// sandbox "" leaves the record's sandbox to create.
func (c *cliNode) createInput(login, runner, model, restrict, sandbox, budget string, dry bool) string {
	c.t.Helper()
	if sandbox != "" {
		sandbox = `"sandbox": ` + sandbox + `,`
	}
	rec := fmt.Sprintf(`{"objective": "Answer whoever writes.", "user": %q, "runner": %q, "model": %q, "hears": [%q],
		"restrict": %s, %s "budget": %s, "dry_run": %v}`, login, runner, model, person, restrict, sandbox, budget, dry)
	input := filepath.Join(c.t.TempDir(), "create.json")
	if err := os.WriteFile(input, []byte(rec), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return input
}

func (c *cliNode) awaitListening(login string) {
	c.t.Helper()
	c.waitFor(login+"'s session to listen", func() bool {
		for _, s := range c.status().Sessions {
			if s.Login == login && s.Listening {
				return true
			}
		}
		return false
	})
}

// turn posts text as the person on record and returns the agent's answer.
func (c *cliNode) turn(login, record, text string) string {
	c.t.Helper()
	to := c.result(person, "post", "--to", record, "--text", text)
	return strings.TrimSpace(c.awaitReplyBy(login, record, to).Text)
}

// cliRunner is one agent CLI as its runner drives it: the name its
// session definition gives, the model, the API it speaks, and the name
// the node's post tool reaches the model by.
type cliRunner struct {
	runner, model, api, postTool string
}

// cliModels are the models cliNode's model.json offers, by API (D52):
// those of cliRunners, and the native runner's (on openai, the primary).
var cliModels = map[string][]string{"anthropic": {"sonnet"}, "openai": {"gpt-standin", "standin"}}

var cliRunners = []cliRunner{
	{"claude", "sonnet", "anthropic", "mcp__ocx__post"},
	{"codex", "gpt-standin", "responses", "mcp__ocx.post"},
}

// TestAgentCLIs is issue 23 item 1: the real Claude Code and Codex CLIs,
// from the npm registry, each as the runner of a real session (a record
// create starts, restricted to its own thread) in a real sandbox without
// the network (item 3), under the
// real hook and daemon, answering against the stand-in model through the
// node's proxy: a plain turn; a turn whose reply calls OCX's post tool,
// the post on the record as the agent's and the tool's answer back to the
// model; a refused call (outside own_thread), its refusal back to the
// model; the conversation going on across a re-exec of the daemon and a
// second start on the record, refused (D76); and a model that answers 500, 429 or a stream
// that breaks, each turn posted as the runner's one failure line. Every
// request reached the model with the node's key, and the node's tools
// were in front of the model.
func TestAgentCLIs(t *testing.T) {
	for _, r := range cliRunners {
		t.Run(r.runner, func(t *testing.T) {
			c := newCLINode(t)
			login := r.runner + "-7"
			elsewhere := c.result(person, "thread", "--title", "Elsewhere", "--text", "not the agent's thread")
			record := c.createAgent(login, r.runner, r.model, `{"no_password": true, "own_thread": true}`)
			// A prompt that asks for a tool gets one call, whose id is the
			// prompt's; once its answer comes back, the model says what it
			// was.
			toolFor := map[string]string{
				"use the tool":   fmt.Sprintf(`{"to": %q, "text": "posted by the tool"}`, record),
				"post elsewhere": fmt.Sprintf(`{"to": %q, "text": "out of bounds"}`, elsewhere),
			}
			c.model.setReply(func(q *modelRequest) modelReply {
				for prompt, args := range toolFor {
					if !strings.HasSuffix(q.User, prompt) {
						continue
					}
					id := strings.ReplaceAll(prompt, " ", "_")
					if res, ok := q.Results[id]; ok {
						return modelReply{Text: "the tool answered: " + strings.Join(strings.Fields(res), " ")}
					}
					return modelReply{Tool: r.postTool, Args: args, ID: id}
				}
				switch {
				case strings.Contains(q.User, "fail 500"):
					return modelReply{Status: 500}
				case strings.Contains(q.User, "fail 429"):
					return modelReply{Status: 429}
				case strings.Contains(q.User, "fail broken"):
					return modelReply{Broken: true}
				}
				return modelReply{Text: "stand-in heard: " + q.User}
			})
			since := 0
			requests := func() []*modelRequest { all := c.model.seen(); out := all[since:]; since = len(all); return out }

			if got := c.turn(login, record, "hello there"); !strings.Contains(got, "stand-in heard:") || !strings.Contains(got, "hello there") {
				t.Fatalf("the plain turn's answer: %q", got)
			}
			reqs := requests()
			if len(reqs) == 0 || reqs[0].API != r.api {
				t.Fatalf("the plain turn's requests: %+v", reqs)
			}
			if !strings.Contains(strings.Join(reqs[0].Tools, " "), r.postTool) {
				t.Errorf("the model was offered %q, not the node's %s (in front of the model, not behind a tool search)", reqs[0].Tools, r.postTool)
			}

			got := c.turn(login, record, "use the tool")
			byTool := false
			for _, p := range c.thread(record) {
				byTool = byTool || (p.Sender == login && strings.TrimSpace(p.Text) == "posted by the tool")
			}
			if !byTool {
				t.Errorf("the post tool's post is not on the record as %s's", login)
			}
			if !strings.Contains(got, "the tool answered:") || !strings.Contains(got, `"tool": "post"`) && !strings.Contains(got, `"tool":"post"`) {
				t.Errorf("the tool's answer did not go back to the model: %q", got)
			}
			requests()

			got = c.turn(login, record, "post elsewhere")
			if !strings.Contains(got, "own_thread") {
				t.Errorf("the refusal did not go back to the model, naming own_thread: %q", got)
			}
			for _, p := range c.thread(elsewhere) {
				if p.Sender == login {
					t.Errorf("the agent posted outside its own thread: %+v", p)
				}
			}
			requests()

			// The same conversation, across a re-exec of the daemon ...
			c.send("reexec")
			c.waitFor("the daemon's re-exec", func() bool {
				d := c.status().Daemon
				return d != nil && d.Reexec != nil && d.Reexec.OK
			})
			c.turn(login, record, "after the re-exec")
			if reqs := requests(); len(reqs) == 0 || !strings.Contains(string(reqs[0].Body), "hello there") {
				t.Errorf("after the re-exec the model was not given the conversation so far")
			}
			// ... and a start on its record, refused: a create record's
			// agent runs once (D76), and the running one goes on.
			launched := len(notesOn[*messages.LaunchNote](c.testNode, record))
			if a, _ := c.answer(c.srv.AdminLogin, "session", "start", login+"/demo", "--record", record, "--kind", "llm", "--runner", r.runner,
				"--model", r.model, "--lifetime", "stays", "--hears", person); a.Stopped == nil || !strings.Contains(*a.Stopped, "has had its run") {
				t.Errorf("a second start on the record: %+v; want refused (D76)", a)
			}
			if got := len(notesOn[*messages.LaunchNote](c.testNode, record)); got != launched {
				t.Errorf("the refused start wrote %d launch notes", got-launched)
			}
			c.turn(login, record, "after the refused start")
			if reqs := requests(); len(reqs) == 0 || !strings.Contains(string(reqs[0].Body), "hello there") || !strings.Contains(string(reqs[0].Body), "after the re-exec") {
				t.Errorf("after the refused start the model was not given the conversation so far")
			}

			for _, fail := range []string{"fail 500", "fail 429", "fail broken"} {
				got := c.turn(login, record, fail)
				first, _, _ := strings.Cut(got, "\n")
				if !strings.HasPrefix(first, "The runner ocx-runner-"+r.runner+" failed") || strings.Count(got, "\n") > 2 {
					t.Errorf("%s: the answer is not the runner's one failure line:\n%s", fail, got)
				}
			}

			// Every request reached the model with the node's key, never
			// the CLI's placeholder: the proxy adds it outside the sandbox.
			key := c.keys["openai"]
			if r.api == "anthropic" {
				key = c.keys["anthropic"]
			}
			for i, q := range c.model.seen() {
				got := q.Header.Get("X-Api-Key")
				if r.api != "anthropic" {
					got = strings.TrimPrefix(q.Header.Get("Authorization"), "Bearer ")
				}
				if got != key {
					t.Errorf("request %d (%s) carried %q, want the node's key", i, q.Path, got)
				}
			}
			if o := c.model.others(); len(o) > 0 {
				t.Errorf("the CLI asked the model for more than the API: %q", o)
			}
			c.must(c.srv.AdminLogin, "tool", "stop", "--record", record)
		})
	}
}

// TestAgentCLIUsage is issue 23 item 4 with the real CLIs: a session on
// claude or codex whose model (the stand-in) says each reply's usage
// shows on the status the node's count of it (counted at the proxy,
// outside the sandbox), its turn's wall and CPU time, and what the CLI
// itself reported (claude's result usage and cost, codex's turn.completed
// usage); a turn that spends past create's budget of tokens ends the
// session with budget: tokens, its end note carrying the same count.
func TestAgentCLIUsage(t *testing.T) {
	for _, r := range cliRunners {
		t.Run(r.runner, func(t *testing.T) {
			c := newCLINode(t)
			login := r.runner + "-u"
			c.model.setReply(func(q *modelRequest) modelReply {
				if strings.Contains(q.User, "spend it") {
					return modelReply{Text: "spent", Input: 5000, Output: 70}
				}
				return modelReply{Text: "counted", Input: 300, Output: 40}
			})
			record := c.createAgentWithBudget(login, r.runner, r.model, `{"no_password": true}`, `{"wall": "1h", "tokens": 4000}`)
			if got := c.turn(login, record, "first"); got != "counted" {
				t.Fatalf("the first turn's answer: %q", got)
			}
			n := uint64(len(c.model.seen()))
			// The proxy counts a reply once it has passed whole, which may
			// be a moment after the CLI read its last event and the turn
			// ended: wait for the count of the turn's requests, then check
			// it.
			var u *messages.SessionUsage
			c.waitFor("the turn and its requests counted on the status", func() bool {
				for _, s := range c.status().Sessions {
					if s.Login == login && s.Usage != nil {
						u = s.Usage
					}
				}
				return u != nil && u.Turns == 1 && u.Model != nil && u.Model.Requests >= n
			})
			if m := u.Model; m == nil || m.Requests != n || m.Input != 300*n || m.Output != 40*n || u.Limit != 4000 {
				t.Fatalf("the node's count after %d requests of 300 in, 40 out: %+v, limit %d", n, m, u.Limit)
			}
			if u.WallMS == 0 || u.CPUMS == 0 {
				t.Errorf("the turn's wall and CPU time: %d ms, %d ms", u.WallMS, u.CPUMS)
			}
			if rep := u.Runner; rep == nil || rep.Input == 0 || rep.Output == 0 || r.runner == "claude" && rep.Cost == "" {
				t.Errorf("what %s reported of its turn: %+v", r.runner, rep)
			}
			t.Logf("%s: node's count %v; %s's own word %v", r.runner, u.Model, r.runner, u.Runner)

			c.turn(login, record, "spend it")
			launches := notesOn[*messages.LaunchNote](c.testNode, record)
			var end *messages.EndNote
			c.waitFor("the end note past the budget", func() bool {
				if ends := c.endsOf(record, launches[len(launches)-1].P.Hash); len(ends) > 0 {
					end = ends[0]
				}
				return end != nil
			})
			all := uint64(len(c.model.seen()))
			if end.Budget != messages.LimitTokens || end.Usage == nil || end.Usage.Model == nil {
				t.Fatalf("the end note: budget %q, usage %+v: %s", end.Budget, end.Usage, end.Note)
			}
			if m := end.Usage.Model; m.Requests != all || m.Total() < 4000 || m.Total() != 340*n+5070*(all-n) {
				t.Errorf("the end note's count after %d requests: %+v", all, m)
			}
		})
	}
}

// sandboxProcs lists the processes in the sandbox of login's session:
// its bwrap's descendants.
func (n *testNode) sandboxProcs(login string) []int {
	n.t.Helper()
	var top int
	for _, s := range n.status().Sessions {
		if s.Login == login {
			top = s.PID
		}
	}
	if top == 0 {
		n.t.Fatalf("no session of %s runs", login)
	}
	// The status names workspace serve; its parents up to the daemon's
	// child are the sandbox's too.
	for {
		pp := ppidOf(n.t, top)
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pp) + "/cmdline")
		if !strings.Contains(string(b), "bwrap") {
			break
		}
		top = pp
	}
	// Each thread's children: a Go program (workspace serve, the runner)
	// starts its children from any of its threads.
	out := []int{top}
	for i := 0; i < len(out); i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", out[i]))
		for _, t := range tasks {
			b, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					out = append(out, pid)
				}
			}
		}
	}
	return out
}

// TestAgentKeysOutsideTheSandbox is issue 23 item 2's test, for all three
// runners, in sandboxes without the network: while a turn is under way (the stand-in holds its answer), the
// node's key is in no process of the session's sandbox (environment,
// command line), in no file of its workspace or of the node's directory it
// sees (the MCP socket's), and in nothing the session wrote; and the model
// got it on every request.
func TestAgentKeysOutsideTheSandbox(t *testing.T) {
	runners := append([]cliRunner{{"native", "standin", "chat", "post"}}, cliRunners...)
	for _, r := range runners {
		t.Run(r.runner, func(t *testing.T) {
			c := newCLINode(t)
			login := r.runner + "-9"
			// held hears the first held request, whether or not the test
			// waits yet; release lets every held request go, at the
			// latest when the test ends (before the stand-in's Close,
			// which waits for its handlers).
			held := make(chan struct{}, 1)
			release := make(chan struct{})
			var releaseOnce sync.Once
			letGo := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(letGo)
			c.model.setReply(func(q *modelRequest) modelReply {
				if strings.Contains(q.User, "hold on") {
					select {
					case held <- struct{}{}:
					default:
					}
					<-release
				}
				return modelReply{Text: "done"}
			})
			record := c.createAgent(login, r.runner, r.model, `{}`)
			to := c.result(person, "post", "--to", record, "--text", "hold on")
			select {
			case <-held:
			case <-time.After(time.Minute):
				t.Fatalf("the model heard nothing of the turn in a minute: its requests reach it only through the node's proxy")
			}
			procs := c.sandboxProcs(login)
			if len(procs) < 3 {
				t.Fatalf("the sandbox holds %d processes, want the runner's and its CLI's among them", len(procs))
			}
			// The sandbox has no network of the host's: the model was
			// reached through the node.
			self, _ := os.Readlink("/proc/self/ns/net")
			for _, pid := range procs[1:] {
				if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && ns == self {
					t.Errorf("process %d of the sandbox shares the host's network", pid)
				}
			}
			for _, key := range c.keys {
				for _, pid := range procs {
					for _, f := range []string{"environ", "cmdline"} {
						b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
						if strings.Contains(string(b), key) {
							t.Errorf("process %d of the sandbox holds the node's key in its %s", pid, f)
						}
					}
				}
				for _, dir := range []string{c.workspaceDir(login), filepath.Join(c.agents, login, "mcp", "demo")} {
					filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
						if err == nil && d.Type().IsRegular() {
							if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), key) {
								t.Errorf("%s, which the sandbox sees, holds the node's key", p)
							}
						}
						return nil
					})
				}
			}
			letGo()
			if got := c.awaitReplyBy(login, record, to); strings.TrimSpace(got.Text) != "done" {
				t.Fatalf("the held turn's answer: %q", got.Text)
			}
			for _, p := range c.thread(record) {
				for _, key := range c.keys {
					if strings.Contains(p.Text, key) {
						t.Errorf("a post holds the node's key: %s", p.Hash)
					}
				}
			}
			for i, q := range c.model.seen() {
				auth := q.Header.Get("X-Api-Key") + strings.TrimPrefix(q.Header.Get("Authorization"), "Bearer ")
				if auth != c.keys["anthropic"] && auth != c.keys["openai"] {
					t.Errorf("request %d carried %q, not the node's key", i, auth)
				}
			}
			c.must(c.srv.AdminLogin, "tool", "stop", "--record", record)
		})
	}
}

// BenchmarkAgentTurn is issue 23 item 5: a post to its answer on the
// record, for a session on each runner (the native one, Claude Code,
// Codex) against the stand-in model answering at once, each in its
// sandbox under the real daemon and hook; p50 and p99. Beside it, each
// CLI's own start (`--version`) outside a sandbox and inside the sandbox
// its session runs in (host.BwrapArgs of its definition, as the launcher
// builds it).
func BenchmarkAgentTurn(b *testing.B) {
	c := newCLINode(b)
	c.model.setReply(func(q *modelRequest) modelReply { return modelReply{Text: "heard"} })
	r := c.repo()
	defer r.Close()
	bin, _ := agentCLIs(b)
	for _, run := range append([]cliRunner{{"native", "standin", "chat", "post"}}, cliRunners...) {
		login := run.runner + "-b"
		record := c.createAgent(login, run.runner, run.model, `{}`)
		b.Run("turn/"+run.runner, func(b *testing.B) {
			adm := &fossilio.Admin{Repository: c.srv.Repo, Fossil: &fossilio.Fossil{Home: c.agents, User: "ocx", Dir: c.agents}}
			cl := &fossilio.Client{URL: c.srv.URL, Login: person, Password: personPW, ProjectCode: c.srv.ProjectCode, Backoffice: adm.Backoffice}
			var times []time.Duration
			i := 0
			for b.Loop() {
				i++
				t0 := time.Now()
				p, err := cl.Reply(c.ctx, record, record, fmt.Sprintf("ping %d", i))
				if err != nil {
					b.Fatal(err)
				}
				for deadline := time.Now().Add(60 * time.Second); !repliedBy(b, r, login, record, p); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						b.Fatalf("no answer by %s to %s in 60 s", login, p)
					}
				}
				times = append(times, time.Since(t0))
			}
			reportTimes(b, "turn", times)
			b.ReportMetric(float64(percentile(times, 99).Microseconds())/1000, "turn-p99-ms")
		})
		if run.runner == "native" {
			continue
		}
		cli := filepath.Join(bin, run.runner)
		b.Run("versus/"+run.runner, func(b *testing.B) { c.turnVersusDirect(b, r, run, login, record, cli) })
		b.Run("start/"+run.runner+"/outside", func(b *testing.B) {
			for b.Loop() {
				if out, err := exec.Command(cli, "--version").CombinedOutput(); err != nil {
					b.Fatalf("%s --version: %v\n%s", cli, err, out)
				}
			}
		})
		b.Run("start/"+run.runner+"/sandbox", func(b *testing.B) {
			bd, err := readBindingOf(c.testNode, login)
			if err != nil {
				b.Fatal(err)
			}
			var def *messages.WorkspaceDefinition
			for _, p := range c.thread(bd.Home) {
				if d, ok := p.Note.(*messages.WorkspaceDefinition); ok {
					def = d
				}
			}
			if def == nil {
				b.Fatalf("no workspace definition of %s", login)
			}
			args, err := host.BwrapArgs(host.SandboxSpec{Sandbox: def.Sandbox, Workspace: c.workspaceDir(login)}, -1, "", []string{cli, "--version"})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				cmd := exec.Command("bwrap", args[1:]...)
				cmd.Env = []string{"HOME=" + c.workspaceDir(login), "PATH=" + strings.Join(def.Sandbox.Path, ":")}
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s --version in the sandbox: %v\n%s", cli, err, out)
				}
			}
		})
	}
	for _, run := range append([]cliRunner{{"native", "", "", ""}}, cliRunners...) {
		c.must("", "session", "stop", run.runner+"-b/demo")
	}
}

// turnVersusDirect is issue 42 item 5: a turn of the CLI through OCX (a
// post on the record to the session's answer on it) against the same
// CLI run directly, outside the node, with the arguments and environment
// its runner gives it, against the same model stand-in with the real key,
// the session's own MCP server attached (`ocx mcp connect` to its
// socket): interleaved, one of each per iteration. The ratio of the
// medians is OCX's cost per turn (aim: at most 1.10). Each goes on with
// its own conversation, as its runner resumes the session's.
func (c *cliNode) turnVersusDirect(b *testing.B, r *fossilio.Repo, run cliRunner, login, record, cli string) {
	adm := &fossilio.Admin{Repository: c.srv.Repo, Fossil: &fossilio.Fossil{Home: c.agents, User: "ocx", Dir: c.agents}}
	cl := &fossilio.Client{URL: c.srv.URL, Login: person, Password: personPW, ProjectCode: c.srv.ProjectCode, Backoffice: adm.Backoffice}
	ws, err := c.layoutWorkspace(login)
	if err != nil {
		b.Fatal(err)
	}
	bridge := []string{program("ocx"), "mcp", "connect", "--socket", c.seen(ws.MCPSocket())}
	home, resume := b.TempDir(), ""
	id := regexp.MustCompile(`"(?:session_id|thread_id)":\s*"([^"]+)"`)
	var viaOCX, direct []time.Duration
	// Each turn's stages, by the stand-in's clock: the post's push (the
	// hook run with it), the push to the CLI's first request to the model
	// (the wake, the runner, the sandbox, the CLI's start), the model's
	// requests, and the last one to the answer on the record (the reply's
	// push); run directly, the start to the first request and the last to
	// the exit.
	stages := map[string][]time.Duration{}
	i := 0
	for b.Loop() {
		i++
		t0 := time.Now()
		p, err := cl.Reply(c.ctx, record, record, fmt.Sprintf("versus %d", i))
		if err != nil {
			b.Fatal(err)
		}
		pushed := time.Now()
		for deadline := time.Now().Add(60 * time.Second); !repliedBy(b, r, login, record, p); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("no answer by %s to %s in 60 s", login, p)
			}
		}
		end := time.Now()
		viaOCX = append(viaOCX, end.Sub(t0))
		first, last := c.model.turnSpan(b, t0, end)
		stages["ocx-push"] = append(stages["ocx-push"], pushed.Sub(t0))
		stages["ocx-to-model"] = append(stages["ocx-to-model"], first.Sub(pushed))
		stages["ocx-model"] = append(stages["ocx-model"], last.Sub(first))
		stages["ocx-after-model"] = append(stages["ocx-after-model"], end.Sub(last))
		cmd := c.directTurn(b, run, cli, bridge, home, resume, fmt.Sprintf("direct %d", i))
		t0 = time.Now()
		out, err := cmd.Output()
		end = time.Now()
		direct = append(direct, end.Sub(t0))
		first, last = c.model.turnSpan(b, t0, end)
		stages["direct-to-model"] = append(stages["direct-to-model"], first.Sub(t0))
		stages["direct-model"] = append(stages["direct-model"], last.Sub(first))
		stages["direct-after-model"] = append(stages["direct-after-model"], end.Sub(last))
		if err != nil || !strings.Contains(string(out), "heard") {
			b.Fatalf("%s run directly: %v\n%s", run.runner, err, out)
		}
		if m := id.FindSubmatch(out); m != nil {
			resume = string(m[1])
		} else {
			b.Fatalf("%s run directly said no conversation to resume:\n%s", run.runner, out)
		}
	}
	ocx50, _ := reportTimes(b, "ocx", viaOCX)
	direct50, _ := reportTimes(b, "direct", direct)
	b.ReportMetric(float64(ocx50)/float64(direct50), "ocx/direct-p50")
	for _, name := range slices.Sorted(maps.Keys(stages)) {
		s := stages[name]
		slices.Sort(s)
		b.ReportMetric(float64(percentile(s, 50).Microseconds())/1000, name+"-p50-ms")
	}
}

// turnSpan is when the first and the last request of a turn between from
// and to reached the stand-in; a turn that made none fails.
func (m *modelStandIn) turnSpan(b *testing.B, from, to time.Time) (first, last time.Time) {
	for _, q := range m.seen() {
		if q.At.Before(from) || q.At.After(to) {
			continue
		}
		if first.IsZero() {
			first = q.At
		}
		last = q.At
	}
	if first.IsZero() {
		b.Fatalf("a turn made no request to the model")
	}
	return first, last
}

// directTurn is the command of one turn of cli run directly, as its
// runner runs it in the sandbox (cmd/ocx-runner-claude's args and
// modelEnv, cmd/ocx-runner-codex's args), but against the stand-in itself
// with the real key, the prompt on its standard input, in home, resuming
// the conversation resume ("": a new one).
func (c *cliNode) directTurn(b *testing.B, run cliRunner, cli string, bridge []string, home, resume, prompt string) *exec.Cmd {
	env := []string{"HOME=" + home, "PATH=" + filepath.Dir(cli) + ":/usr/bin:/bin"}
	var args []string
	switch run.runner {
	case "claude":
		config, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"ocx": map[string]any{"type": "stdio", "command": bridge[0], "args": bridge[1:]}}})
		f := filepath.Join(home, "mcp.json")
		if err := os.WriteFile(f, config, 0o600); err != nil {
			b.Fatal(err)
		}
		args = []string{"-p", "--output-format", "json", "--model", run.model, "--mcp-config", f, "--strict-mcp-config",
			"--allowedTools", "mcp__ocx", "--permission-mode", "bypassPermissions"}
		if resume != "" {
			args = append(args, "--resume", resume)
		}
		env = append(env, "IS_SANDBOX=1", "ENABLE_TOOL_SEARCH=false", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=2",
			"ANTHROPIC_BASE_URL="+c.model.URL(), "ANTHROPIC_API_KEY="+c.keys["anthropic"], "ANTHROPIC_SMALL_FAST_MODEL="+run.model)
	case "codex":
		quoted := make([]string, len(bridge[1:]))
		for i, a := range bridge[1:] {
			quoted[i] = strconv.Quote(a)
		}
		args = []string{"exec", "--json", "--model", run.model, "--cd", home, "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
			"-c", `model_provider="standin"`, "-c", `model_providers.standin.name="the stand-in"`,
			"-c", "model_providers.standin.base_url=" + strconv.Quote(c.model.URL()+"/v1"), "-c", `model_providers.standin.wire_api="responses"`,
			"-c", `model_providers.standin.env_key="STANDIN_KEY"`, "-c", "analytics.enabled=false",
			"-c", "mcp_servers.ocx.command=" + strconv.Quote(bridge[0]), "-c", "mcp_servers.ocx.args=[" + strings.Join(quoted, ",") + "]"}
		if resume != "" {
			args = append(args, "resume", resume)
		}
		args = append(args, "-")
		env = append(env, "CODEX_HOME="+home, "STANDIN_KEY="+c.keys["openai"])
	default:
		b.Fatalf("no direct turn for runner %s", run.runner)
	}
	cmd := exec.Command(cli, args...)
	cmd.Env, cmd.Dir, cmd.Stdin = env, home, strings.NewReader(prompt)
	return cmd
}
