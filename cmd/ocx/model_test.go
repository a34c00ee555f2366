package main

import (
	"context"
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
)

// TestModelProxyBesideTheMCPSocket: with AGENTS/model.json, the MCP server
// the daemon starts beside a session also serves the model proxy on
// model.sock (bound by mcp start, descriptor 4): it is in the session's
// sandbox at /tmp/ocx-mcp, says its API, and forwards a request for the
// session's own model (its record's, standin-model) with the key, which the
// sandbox never holds; a request for another model is refused, naming it.
func TestModelProxyBesideTheMCPSocket(t *testing.T) {
	const key = "sk-model-proxy-test-key"
	gotKey := make(chan string, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case gotKey <- r.Header.Get("Authorization"):
		default:
		}
		io.WriteString(w, `{"choices":[]}`)
	}))
	defer upstream.Close()
	tn := newToolNode(t)
	keyFile := filepath.Join(t.TempDir(), "model.key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, _ := host.NewLayout(tn.agents)
	cfg := `{"api": "openai", "base_url": "` + upstream.URL + `", "key_file": "` + keyFile + `", "models": ["standin-model"]}`
	if err := os.WriteFile(l.ModelJSON(), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, ws := createAgent(t, tn, "native-1", "")
	defer endsServers(t, tn)
	var st os.FileInfo
	var err error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if st, err = os.Lstat(ws.ModelSocket()); err == nil {
			break
		}
	}
	if err != nil || st.Mode() != os.ModeSocket|0o600 {
		t.Fatalf("%s: %v %v", ws.ModelSocket(), st, err)
	}
	bw := sessionBwrap(t, ws)
	if _, errs, err := inSandbox(t, bw, "", "/bin/sh", "-c", "test -S "+host.MCPMount+"/"+host.ModelSocketName); err != nil {
		t.Fatalf("no model socket in the sandbox: %v %s", err, errs)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", ws.ModelSocket())
	}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://model/ocx/model")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != `{"api":"openai","apis":["openai"]}` {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	resp, err = c.Post("http://model/v1/chat/completions", "application/json", strings.NewReader(`{"model": "another"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `another`) {
		t.Fatalf("another model: %d %s", resp.StatusCode, b)
	}
	resp, err = c.Post("http://model/v1/chat/completions", "application/json", strings.NewReader(`{"model": "standin-model"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-gotKey; got != "Bearer "+key {
		t.Fatalf("the model got Authorization %q", got)
	}
}
