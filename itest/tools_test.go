package itest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// toolAgent is the agent login TestToolsAgentEndToEnd creates.
const toolAgent = "native-9"

// procArgv lists the processes whose command line satisfies match.
func procArgv(match func(argv []string) bool) map[int][]string {
	out := map[int][]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"); match(argv) {
			out[pid] = argv
		}
	}
	return out
}

// sandboxOf is the bwrap command line the daemon ran the session of
// workspace dir ws in, up to its "--" and without its status descriptor:
// the session's own sandbox, for another program to run in.
func (n *testNode) sandboxOf(ws, mcpDir string) []string {
	n.t.Helper()
	var bw []string
	n.waitFor("the session's bwrap", func() bool {
		for _, argv := range procArgv(func(a []string) bool {
			return filepath.Base(a[0]) == "bwrap" && slices.Contains(a, ws) && slices.Contains(a, mcpDir)
		}) {
			bw = nil
			for i := 0; i < len(argv); i++ {
				if argv[i] == "--json-status-fd" {
					i++
					continue
				}
				if argv[i] == "--" {
					return true
				}
				bw = append(bw, argv[i])
			}
		}
		return false
	})
	return bw
}

// inSandbox runs argv in the sandbox bw, in dir, with stdin, the
// session's MCP socket named as the session's own environment names it.
func inSandbox(bw []string, dir, stdin string, argv ...string) (string, string, error) {
	args := append(slices.Clone(bw[1:]), "--setenv", host.MCPSocketEnv, host.MCPSocketInside)
	if dir != "" {
		args = append(args, "--chdir", dir)
	}
	cmd := exec.Command("bwrap", append(append(args, "--"), argv...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// mcpCall calls a tool through `ocx mcp call` run inside the sandbox, and
// decodes its answer.
func (n *testNode) mcpCall(bw []string, tool, input string) answer {
	n.t.Helper()
	out, errs, err := inSandbox(bw, "", input, program("ocx"), "mcp", "call", tool)
	var a answer
	if jerr := json.Unmarshal([]byte(out), &a); jerr != nil {
		n.t.Fatalf("ocx mcp call %s inside the sandbox: %v (%v)\nstdout %q\nstderr %s\nthe MCP logs:\n%s\nocxd.log:\n%s", tool, jerr, err, out, errs, n.mcpLogs(), n.daemonLog())
	}
	if (err != nil) != (a.Stopped != nil) {
		n.t.Errorf("ocx mcp call %s: exit %v with stopped %v", tool, err, a.Stopped)
	}
	return a
}

// mcpLogs is every MCP server's log on the node, each under its name:
// what a failed call shows.
func (n *testNode) mcpLogs() string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(n.agents, "*", "mcp", "*.log"))
	sessions, _ := filepath.Glob(filepath.Join(n.agents, "*", "projects", "*", "session", "log"))
	logs = append(logs, sessions...)
	for _, p := range logs {
		data, _ := os.ReadFile(p)
		fmt.Fprintf(&b, "== %s\n%s", p, data)
	}
	return b.String()
}

// TestToolsAgentEndToEnd is issue 14 item 6 on a real fossil server, daemon,
// hook, bwrap and MCP: an admin creates, through `ocx tool create`, a
// record restricting no_password, branch and own_thread; its agent, through
// MCP only (`ocx mcp call` inside its sandbox), posts in its thread and is
// refused outside it, checks in on its branch and pushes, is refused a
// push of a check-in on another branch, audits another user's check-in and
// is refused on its own. Its session answers a heard person through the
// node (its clone holds no password); a stranger's post wakes nothing and
// his stop is refused; the admin's stop ends it, its response is written
// once, and its user's capabilities are withdrawn.
func TestToolsAgentEndToEnd(t *testing.T) {
	needs(t, "ocxd", "workspace", "ocx-runner-native")
	n := newNodeWith(t, harness.User{Login: stranger, Password: strangerPW, Caps: "cghijnorwz234"})
	admin := n.srv.AdminLogin
	c := newCommitter(t, n)
	base := c.commit("PLAN.md")

	input := filepath.Join(t.TempDir(), "create.json")
	rec := `{"objective": "Answer what is said here.", "user": "` + toolAgent + `", "runner": "native", "model": "standin-model", "hears": ["` + person + `"], "checkins": ["feature"],
		"restrict": {"no_password": true, "branch": "feature", "own_thread": true}, "budget": {"wall": "1h"}}`
	if err := os.WriteFile(input, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	record := n.result(admin, "tool", "create", "--input", input)
	n.waitFor("the agent's session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == toolAgent && s.Listening {
				return true
			}
		}
		return false
	})
	if st := n.status(); strings.Join(st.Restrictions, ",") != "no_password,branch,own_thread" {
		t.Errorf("the status lists the restrictions %q", st.Restrictions)
	}

	// The clone remembers no password.
	wsDir := n.workspaceDir(toolAgent)
	clonePath := filepath.Join(wsDir, "clone")
	cl, err := fossilio.OpenClone(clonePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"last-sync-pw", "parent-project-pw"} {
		if _, ok, err := cl.Config(n.ctx, name); err != nil || ok {
			t.Errorf("the clone holds %s (%v)", name, err)
		}
	}
	cl.Close()

	// A heard person's post is answered, through the node, as the agent.
	hello := n.result(person, "post", "--to", record, "--text", "hello there")
	var answered posted
	n.waitFor("the agent's answer to alice", func() bool {
		for _, p := range n.thread(record) {
			if p.InReplyTo == hello && p.Sender == toolAgent {
				answered = p
				return true
			}
		}
		return false
	})
	if !strings.Contains(answered.Text, "heard: hello there") {
		t.Errorf("the answer: %q", answered.Text)
	}

	mcpDir := filepath.Join(n.agents, toolAgent, "mcp", "demo")
	bw := n.sandboxOf(wsDir, mcpDir)

	// post, in its thread; refused outside it.
	a := n.mcpCall(bw, "post", `{"to": "`+record+`", "text": "working on it"}`)
	if a.Stopped != nil || a.Result == nil || n.senderOf(*a.Result) != toolAgent {
		t.Fatalf("post in its thread: %+v", a)
	}
	elsewhere := n.result(person, "thread", "--title", "Elsewhere", "--text", "another thread")
	a = n.mcpCall(bw, "post", `{"to": "`+elsewhere+`", "text": "may I?"}`)
	if a.Stopped == nil || !strings.Contains(*a.Stopped, "outside the thread of record "+record+" (restrict own_thread)") {
		t.Errorf("post outside its thread: %+v", a)
	}
	for _, p := range n.thread(elsewhere) {
		if p.Sender == toolAgent {
			t.Errorf("the agent posted outside its thread: %+v", p)
		}
	}

	// A check-in on its branch, pushed with the push tool.
	tree := filepath.Join(wsDir, "tree")
	fossil := func(args ...string) string {
		t.Helper()
		out, errs, err := inSandbox(bw, tree, "", append([]string{harness.FossilPath}, args...)...)
		if err != nil {
			t.Fatalf("fossil %v in the sandbox: %v\n%s%s", args, err, out, errs)
		}
		return out
	}
	commit := func(file, branch string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(tree, file), []byte(file+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fossil("add", file)
		fossil("commit", "-m", "add "+file, "--branch", branch, "--no-warnings")
	}
	commit("docs.md", "feature")
	a = n.mcpCall(bw, "push", `{}`)
	if a.Stopped != nil || a.Result == nil {
		t.Fatalf("push: %+v", a)
	}
	own := *a.Result
	r := n.repo()
	info, err := r.Info(n.ctx, own)
	r.Close()
	if err != nil || info.Kind != fossilio.KindCheckin || info.Sender != toolAgent {
		t.Fatalf("the pushed check-in %s: %+v %v", own, info, err)
	}

	// E7: another user's check-in on its branch is given to it, and
	// answered on its record; its own is not.
	byAdmin := c.commitOn("admin.md", "feature")
	n.waitFor("the agent's answer to the admin's check-in", func() bool {
		for _, p := range n.thread(record) {
			if p.Sender == toolAgent && strings.HasPrefix(p.Text, "On check-in ["+byAdmin[:10]+"](/info/"+byAdmin+"):") {
				if !strings.Contains(p.Text, "heard: Check-in "+byAdmin+" by "+admin+": add admin.md") {
					t.Errorf("the answer to the admin's check-in: %q", p.Text)
				}
				return true
			}
		}
		return false
	})
	for _, p := range n.thread(record) {
		if strings.Contains(p.Text, own[:10]) {
			t.Errorf("the agent was given its own check-in %s: %q", own[:10], p.Text)
		}
	}

	// A check-in on another branch: refused, naming it, nothing pushed.
	commit("other.md", "other")
	a = n.mcpCall(bw, "push", `{}`)
	if a.Stopped == nil || !strings.Contains(*a.Stopped, `is on branch "other", not "feature" (restrict branch of record `+record+`); nothing pushed`) {
		t.Errorf("push on another branch: %+v", a)
	}

	// An audit of another user's check-in; refused on its own.
	a = n.mcpCall(bw, "audit", `{"checkin": "`+base[:12]+`", "verdict": "pass", "reason": "the plan is there", "against": "PLAN.md"}`)
	if a.Stopped != nil || a.Result == nil {
		t.Fatalf("audit: %+v", a)
	}
	r = n.repo()
	tags, err := r.CheckinTags(n.ctx, base)
	r.Close()
	if got, ok := fossilio.LatestTag(tags, messages.AuditedTag, toolAgent); err != nil || !ok || got.Value != "pass: the plan is there (against PLAN.md)" {
		t.Errorf("the audited tag: %+v %v %v", got, ok, err)
	}
	a = n.mcpCall(bw, "audit", `{"checkin": "`+own+`", "verdict": "pass", "reason": "mine", "against": "docs.md"}`)
	if a.Stopped == nil || !strings.Contains(*a.Stopped, "nobody judges their own check-in") {
		t.Errorf("audit of its own check-in: %+v", a)
	}

	// The agent, from inside its sandbox, tries to hear everyone: the file
	// the hook reads is outside its reach, and what it writes in its
	// workspace hears nobody more.
	held := filepath.Join(n.agents, toolAgent, "held", "demo", "hears")
	if out, errs, err := inSandbox(bw, "", "", "/bin/sh", "-c", `echo '*' > "$0"`, held); err == nil {
		t.Errorf("the agent wrote the hears file the hook reads, %s: %s%s", held, out, errs)
	}
	if _, errs, err := inSandbox(bw, "", "", "/bin/sh", "-c", `echo '*' > "$0"`, filepath.Join(wsDir, "session", "hears")); err != nil {
		t.Fatalf("write in its own workspace: %v %s", err, errs)
	}
	if b, err := os.ReadFile(held); err != nil || string(b) != person+"\n" {
		t.Errorf("the hears file the hook reads holds %q (%v), want alice alone", b, err)
	}

	// A stranger's post wakes nothing (no answer, no unheard note, D27);
	// alice's after it is answered.
	fromBob := n.result(stranger, "post", "--to", record, "--text", "let me in")
	after := n.result(person, "post", "--to", record, "--text", "after bob")
	n.waitFor("the agent's answer after bob", func() bool {
		for _, p := range n.thread(record) {
			if p.InReplyTo == after && p.Sender == toolAgent {
				return true
			}
		}
		return false
	})
	for _, p := range n.thread(record) {
		if p.InReplyTo == fromBob {
			t.Errorf("bob's post, which the agent does not hear, got %+v", p)
		}
		if u, ok := p.Note.(*messages.UnheardNote); ok && slices.Contains(u.All(), fromBob) {
			t.Errorf("bob's post got an unheard note: %+v", u)
		}
	}

	// A stranger's stop is refused; the session runs on.
	sa, _ := n.answer(stranger, "tool", "stop", "--record", record)
	if sa.Stopped == nil || !strings.Contains(*sa.Stopped, "without admin (a) or setup (s)") {
		t.Errorf("bob's stop: %+v", sa)
	}
	running := false
	for _, s := range n.status().Sessions {
		running = running || (s.Login == toolAgent && s.Record == record)
	}
	if !running {
		t.Fatalf("the session ended after bob's stop")
	}

	// The admin's stop ends it: one response and one end note, both by the
	// node user (E5, D51); the agent's user keeps no capability.
	resp := n.result(admin, "tool", "stop", "--record", record)
	ends, responses := 0, 0
	for _, p := range n.thread(record) {
		if _, ok := p.Note.(*messages.EndNote); ok {
			ends++
			if p.Sender != "ocx" {
				t.Errorf("an end note %s by %q", p.Hash, p.Sender)
			}
		}
		if r, err := messages.ReadResponse([]byte(p.Text)); err == nil && r.Answers == record {
			responses++
			if p.Hash != resp || p.Sender != "ocx" || r.Outcome != messages.ResponseStopped {
				t.Errorf("a response %s by %q (%s), stop said %s", p.Hash, p.Sender, r.Outcome, resp)
			}
		}
	}
	if ends != 1 || responses != 1 {
		t.Errorf("%d end notes and %d responses, want 1 of each", ends, responses)
	}
	r = n.repo()
	u, err := r.User(n.ctx, toolAgent)
	r.Close()
	if err != nil || u.Caps != "" {
		t.Errorf("the agent's user keeps capabilities %q (%v)", u.Caps, err)
	}
	n.waitFor("the agent's MCP server to end with its session", func() bool {
		return len(procArgv(func(a []string) bool {
			return len(a) > 2 && filepath.Base(a[0]) == "ocx" && a[1] == "mcp" && a[2] == "serve" && slices.Contains(a, n.agents)
		})) == 0
	})
}
