package runner

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestWithEnv(t *testing.T) {
	got := WithEnv([]string{"PATH=/bin", "ANTHROPIC_API_KEY=sk-real", "ANTHROPIC_BASE_URL=https://x", "HOME=/h", "KEEP=1"},
		[]string{"ANTHROPIC_*", "HOME"}, "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "KEEP=2")
	want := []string{"PATH=/bin", "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "KEEP=2"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// The relay reaches the model socket beside the MCP socket, for requests
// holding its key (D79); without a socket there is none, and the reason
// says so.
func TestModelRelay(t *testing.T) {
	dir := t.TempDir()
	env := Env{MCPSocket: filepath.Join(dir, "mcp.sock")}
	if r, err := ModelRelay(env, io.Discard); r != nil || err == nil || !strings.Contains(err.Error(), "serves no model") {
		t.Fatalf("no socket: %v, %v", r, err)
	}
	if _, err := ModelRelay(Env{}, io.Discard); err == nil {
		t.Fatal("no MCP socket, yet a relay")
	}
	ln, err := net.Listen("unix", env.ModelSocket())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "model "+r.URL.Path) })}
	go srv.Serve(ln)
	defer srv.Close()
	r, err := ModelRelay(env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !strings.HasPrefix(r.URL(), "http://127.0.0.1:") {
		t.Fatalf("relay at %s", r.URL())
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, key := range []string{r.Key(), ""} {
		req, _ := http.NewRequest(http.MethodGet, r.URL()+"/v1/messages", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if through := string(b) == "model /v1/messages"; through != (key != "") {
			t.Fatalf("through the relay with key %q: %d %q", key, resp.StatusCode, b)
		}
	}
}
