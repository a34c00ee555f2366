package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// TestModelProxyOnlyForItsModel is issue 22 item 6's first part, on the
// real daemon, hook and sandboxed sessions of a node with a model.json: a
// mechanical session has no model.sock in its sandbox (its command lists
// /tmp/ocx-mcp and answers with what is there), and an llm session's
// proxy refuses a request naming another model than its definition's,
// with an answer that names it, while the stand-in model server sees
// nothing of it; its own model is forwarded.
func TestModelProxyOnlyForItsModel(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	n := newNodeOn(t, llmRoot)
	admin := n.srv.AdminLogin
	model := &chatModel{t: t, replies: []string{chatText("the one forwarded")}}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), []byte(`{"api": "openai", "base_url": "`+srv.URL+`", "models": ["standin-chat"]}`), 0o600); err != nil {
		t.Fatal(err)
	}

	// A mechanical session: what its sandbox holds at /tmp/ocx-mcp.
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	script := `cat >/dev/null; ls -a ` + host.MCPMount + ` | tr '\n' ' '`
	n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", script)
	n.awaitListening(agent)
	post := n.result(person, "post", "--to", record, "--text", "what is there?")
	got := n.awaitReplyBy(agent, record, post)
	if !strings.Contains(got.Text, host.MCPSocketName) || strings.Contains(got.Text, host.ModelSocketName) {
		t.Errorf("a mechanical session's %s holds %q: want its MCP socket and no model socket", host.MCPMount, got.Text)
	}
	mech, err := n.layoutWorkspace(agent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(mech.ModelSocket()); err == nil {
		t.Errorf("the mechanical session has %s on the node", mech.ModelSocket())
	}

	// An llm session: its proxy serves the model its definition names
	// (create's: model.json's first, D52) and refuses any other, naming it.
	in := filepath.Join(t.TempDir(), "create.json")
	if err := os.WriteFile(in, []byte(`{"objective": "Answer.", "user": "native-2", "runner": "native", "hears": ["`+person+`"], "budget": {"wall": "1h"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	llmRecord := n.result(admin, "tool", "create", "--input", in)
	n.waitFor("the llm session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == "native-2" && s.Listening {
				return true
			}
		}
		return false
	})
	ws, err := n.layoutWorkspace("native-2")
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", ws.ModelSocket())
	}}}
	defer c.CloseIdleConnections()
	ask := func(body string) (int, string) {
		resp, err := c.Post("http://model/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("the llm session's model socket: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return resp.StatusCode, e.Error
		}
		return resp.StatusCode, string(b)
	}
	code, body := ask(`{"model": "the-expensive-one", "messages": [{"role": "user", "content": "hi"}]}`)
	if code != http.StatusForbidden || !strings.Contains(body, `"the-expensive-one"`) || !strings.Contains(body, `"standin-chat"`) {
		t.Errorf("another model through the llm session's proxy: %d %s; want 403 naming it and the definition's", code, body)
	}
	if reqs := model.requests(); len(reqs) != 0 {
		t.Fatalf("the model server saw %d requests for another model", len(reqs))
	}
	if code, body := ask(`{"model": "standin-chat", "messages": [{"role": "user", "content": "hi"}]}`); code != http.StatusOK || !strings.Contains(body, "the one forwarded") {
		t.Errorf("the definition's own model: %d %s", code, body)
	}
	if reqs := model.requests(); len(reqs) != 1 {
		t.Errorf("the model server saw %d requests, want the one for the session's model", len(reqs))
	}
	n.must(admin, "tool", "stop", "--record", llmRecord)
	n.must("", "session", "stop", key(agent))
}

// layoutWorkspace is the paths of login's workspace of project demo.
func (n *testNode) layoutWorkspace(login string) (host.Workspace, error) {
	l, err := host.NewLayout(n.agents)
	if err != nil {
		return host.Workspace{}, err
	}
	return l.Workspace(messages.WorkspaceKey{Login: login, Project: "demo"})
}

// setSessionLimits writes node.json's session_limits, before the daemon
// starts.
func (n *testNode) setSessionLimits(memory string, processes uint64) {
	n.t.Helper()
	l, _ := host.NewLayout(n.agents)
	b, err := os.ReadFile(l.NodeJSON())
	if err != nil {
		n.t.Fatal(err)
	}
	cfg, err := messages.DecodeNodeConfig(b)
	if err != nil {
		n.t.Fatal(err)
	}
	cfg.SessionLimits = &messages.NodeSessionLimits{Memory: memory, Processes: &processes}
	if b, err = cfg.Encode(); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(l.NodeJSON(), b, 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// TestSessionPastItsLimits is issue 22 item 6's second part on the real
// daemon, hook and sandboxed sessions: with node.json's session_limits of
// 64M and 32 processes, a mechanical session whose command allocates past
// the memory (dd with a 256 MiB buffer) is OOM-killed inside its cgroup
// and ended by the daemon, its end note saying budget memory; one whose
// command forks past the processes (sleeps in a loop) is ended, budget
// processes. Each cgroup is gone with its session, and nothing the
// sessions started is left. Where no cgroup can be made, the daemon says
// why at its start, and sessions run without them.
func TestSessionPastItsLimits(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	n.setSessionLimits("64M", 32)
	cg := unixhost.HostCgroups()
	l, _ := host.NewLayout(n.agents)

	cases := []struct {
		login, script, budget, words string
	}{
		{"agent-mem", `cat >/dev/null; dd if=/dev/zero of=/dev/null bs=256M count=1; echo dd $?; sleep 60`,
			messages.LimitMemory, "killed by the kernel at its memory limit of 64 MiB"},
		{"agent-fork", `cat >/dev/null; i=0; while [ $i -lt 100 ]; do sleep 60 & i=$((i+1)); done; echo forked; sleep 60`,
			messages.LimitProcesses, "refused at its processes limit of 32"},
	}
	type started struct{ record, launch string }
	var runs []started
	for _, c := range cases {
		n.must("", "login", "add", c.login)
		record := n.result(admin, "workspace", "add", "--login", c.login, "--project", "demo", "--branch", "trunk")
		launch := n.result(admin, "session", "start", key(c.login), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", c.script)
		runs = append(runs, started{record, launch})
	}
	// The status says the limits, and where they are held or why not.
	if sl := n.status().SessionLimits; sl == nil || sl.Memory != 64<<20 || sl.Processes != 32 ||
		cg.Why() == "" && !strings.Contains(sl.Cgroups, l.CgroupNode()) || cg.Why() != "" && sl.NotApplied != cg.Why() {
		t.Errorf("the status's session limits: %+v", sl)
	}
	if why := cg.Why(); why != "" {
		n.waitLogLine("the daemon says sessions run without cgroups", func(l logLine) bool {
			return strings.Contains(l.Msg, "sessions run without cgroups") && l.Why == why
		})
		for _, c := range cases {
			n.must("", "session", "stop", key(c.login))
		}
		return
	}
	for i, c := range cases {
		name := l.SessionCgroup(messages.WorkspaceKey{Login: c.login, Project: "demo"})
		n.waitFor(c.login+"'s cgroup", func() bool {
			g, err := cg.Open(name)
			if err != nil {
				return false
			}
			procs, _ := g.Procs()
			return len(procs) > 0 && g.Limits() == host.CgroupLimits{Memory: 64 << 20, Processes: 32}
		})
		n.result(person, "post", "--to", runs[i].record, "--text", "go past it")
	}
	for i, c := range cases {
		n.waitFor(c.login+"'s end note", func() bool { return len(n.endsOf(runs[i].record, runs[i].launch)) > 0 })
		e := n.endsOf(runs[i].record, runs[i].launch)[0]
		if e.Budget != c.budget || !strings.Contains(e.Note, c.words) || !strings.Contains(e.Note, "the daemon ended it past its "+c.budget+" limit") {
			t.Errorf("%s's end note: %s; want budget %s and a note saying %q", c.login, e, c.budget, c.words)
		}
		name := l.SessionCgroup(messages.WorkspaceKey{Login: c.login, Project: "demo"})
		n.waitFor(c.login+"'s cgroup to be removed", func() bool {
			_, err := cg.Open(name)
			return err != nil
		})
	}
	for _, d := range cg.Hierarchies().Dirs() {
		if _, err := os.Lstat(filepath.Join(d, l.CgroupNode())); err == nil {
			t.Errorf("the node's cgroups are left in %s", d)
		}
	}
}

// TestRunPastItsMemory is issue 22 item 6 for a run (seed 004, table 7):
// a run with limits.memory is started, not refused, where a cgroup can
// be made; its command allocates past the limit, the kernel kills it
// inside the run's cgroup, the sandbox is ended whole (the shell would
// sleep on), and ended says budget, naming memory; the cgroup is gone.
// Where none can be made, the run is refused, the note naming the reason.
func TestRunPastItsMemory(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Go past the memory.",
"sandbox": {"uid": 1000, "gid": 1000, "capabilities": [], "network": false, "own_session": true, "ends_with_node": false,
  "read_only": ["/usr", "/bin", "/lib", "/lib64"], "read_write": [], "homes": [], "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/tmp"},
"limits": {"memory": "32M"},
"process": {"user": "builder", "command": ["/bin/sh", "-c", "dd if=/dev/zero of=/dev/null bs=256M count=1; echo dd $?; sleep 60; echo survived"],
  "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`, node)
	start := time.Now()
	root := n.result(admin, "thread", "--title", "Past its memory", "--text", block(run))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	e := n.endedOf(root)
	for _, p := range n.runThread(root) {
		t.Logf("%s by %s:\n%s", p.Hash, p.Sender, p.Text)
	}
	if why := unixhost.HostCgroups().Why(); why != "" {
		if e.Outcome != runmsg.RunRefused || !strings.Contains(e.Note, "limits.memory") || !strings.Contains(e.Note, why) {
			t.Fatalf("a run asking memory on a host without cgroups: %+v, want refused naming %q", e, why)
		}
		return
	}
	if n.startedOf(root) == nil || e.Outcome != runmsg.RunBudget || !strings.HasPrefix(e.Note, "memory: ") || !strings.Contains(e.Note, "32 MiB") {
		t.Fatalf("ended %+v; want started, then budget naming memory", e)
	}
	if time.Since(start) > 50*time.Second {
		t.Errorf("the run went on past its memory limit: ended after %s", time.Since(start))
	}
	for _, p := range n.runThread(root) {
		if p.Hash != root && strings.Contains(p.Text, "survived") {
			t.Errorf("the sandbox ran on past the OOM kill:\n%s", p.Text)
		}
	}
	l, _ := host.NewLayout(n.agents)
	if _, err := unixhost.HostCgroups().Open(l.RunCgroup(root)); err == nil {
		t.Errorf("the run's cgroup %s is left", l.RunCgroup(root))
	}
}

// TestSessionLimitsAcrossRestarts: a session's cgroup is found again by
// its name, so its limits hold across the daemon's end. Two sessions
// under a 64M limit; the daemon is killed outright and started again,
// and the session it finds (not its child) goes past its memory: ended,
// budget memory, status unknown; then the new daemon re-execs, and the
// other session, its child no more either, goes past its memory: ended
// the same way by the new image.
func TestSessionLimitsAcrossRestarts(t *testing.T) {
	needs(t, "ocxd", "workspace")
	cg := unixhost.HostCgroups()
	if cg.Why() != "" {
		// TestSessionPastItsLimits tests the refusal; nothing here to find.
		t.Logf("no cgroup here: %s", cg.Why())
		return
	}
	n := newNode(t)
	admin := n.srv.AdminLogin
	n.setSessionLimits("64M", 64)
	d := startDaemon(t, n, program("ocxd"), "--grace", "2s")
	script := `cat >/dev/null; dd if=/dev/zero of=/dev/null bs=256M count=1; echo dd $?; sleep 60`
	type started struct{ login, record, launch string }
	var ss []started
	for _, login := range []string{"agent-restart", "agent-reexec"} {
		n.must("", "login", "add", login)
		record := n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
		launch := n.result(admin, "session", "start", key(login), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", script)
		if _, ok := n.serving(launch); !ok {
			t.Fatalf("no session for %s", launch)
		}
		ss = append(ss, started{login, record, launch})
	}
	past := func(s started) {
		t.Helper()
		n.result(person, "post", "--to", s.record, "--text", "go past it")
		n.waitFor(s.login+"'s end note", func() bool { return len(n.endsOf(s.record, s.launch)) > 0 })
		e := n.endsOf(s.record, s.launch)[0]
		if e.Budget != messages.LimitMemory || e.Status != messages.EndUnknown || !strings.Contains(e.Note, "the daemon ended it past its memory limit") {
			t.Errorf("%s's end note: %s; want budget memory, unknown", s.login, e)
		}
		l, _ := host.NewLayout(n.agents)
		n.waitFor(s.login+"'s cgroup to be removed", func() bool {
			_, err := cg.Open(l.SessionCgroup(messages.WorkspaceKey{Login: s.login, Project: "demo"}))
			return err != nil
		})
	}
	d.kill9()
	startDaemon(t, n, program("ocxd"), "--grace", "2s")
	past(ss[0])
	n.send("reexec")
	n.waitFor("the daemon's re-exec", func() bool {
		d := n.status().Daemon
		return d != nil && d.Reexec != nil && d.Reexec.OK
	})
	past(ss[1])
}
