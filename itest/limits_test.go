package itest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
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
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), []byte(`{"api": "openai", "base_url": "`+srv.URL+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	// A mechanical session: what its sandbox holds at /tmp/ocx-mcp.
	n.must("", "login", "add", agent)
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	script := `cat >/dev/null; ls -a ` + host.MCPMount + ` | tr '\n' ' '`
	n.result(admin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", script)
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
	// (create's, "default") and refuses any other, naming it.
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
	if code != http.StatusForbidden || !strings.Contains(body, `"the-expensive-one"`) || !strings.Contains(body, `"default"`) {
		t.Errorf("another model through the llm session's proxy: %d %s; want 403 naming it and the definition's", code, body)
	}
	if reqs := model.requests(); len(reqs) != 0 {
		t.Fatalf("the model server saw %d requests for another model", len(reqs))
	}
	if code, body := ask(`{"model": "default", "messages": [{"role": "user", "content": "hi"}]}`); code != http.StatusOK || !strings.Contains(body, "the one forwarded") {
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
