package model_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ocx-go/ocx/host/model"
)

// TestProxyForwardsAllowedHeadersOnly is issue 39 item 7's proxy part: a
// hostile request through the real proxy and its meter, carrying
// credentials, another account's organization and project, betas that
// reach past the request, forwarding headers and a query. The API gets
// the allowed headers alone (Content-Type, Accept, Anthropic-Version, the
// allowed betas; the node's key), at the endpoint's path without the
// query; the sandbox gets the reply's allowed headers alone, the key
// redacted in them, and an X-Ocx-Proxy of the API's own does not make
// the reply the proxy's (it is counted).
func TestProxyForwardsAllowedHeadersOnly(t *testing.T) {
	const key = "sk-ant-node-KEY"
	var mu sync.Mutex
	var got *http.Request
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = r.Clone(r.Context())
		mu.Unlock()
		for h, v := range map[string]string{
			"Set-Cookie": "session=node-account", "Openai-Organization": "org-node", "Anthropic-Organization-Id": "node-org",
			"X-Ocx-Proxy": "1", "X-Request-Id": "req-" + key, "Retry-After": "3", "Anthropic-Ratelimit-Tokens-Remaining": "9000",
			"Via": "api", "X-Echo": key, "Content-Type": "application/json",
		} {
			w.Header().Set(h, v)
		}
		io.WriteString(w, `{"type": "message", "content": [], "usage": {"input_tokens": 3, "output_tokens": 4}}`)
	}))
	defer up.Close()
	h, err := model.NewProxy(&model.Config{API: model.Anthropic, BaseURL: up.URL}, map[model.API]string{model.Anthropic: key}, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := model.NewMeter(0, nil, nil)
	srv := httptest.NewServer(m.Handler(h))
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages?beta=true&api_key=sk-mine#frag", strings.NewReader(`{"model": "m", "max_tokens": 10}`))
	for h, v := range map[string]string{
		"Content-Type": "application/json", "Accept": "application/json", "Anthropic-Version": "2023-06-01",
		"Anthropic-Beta": "interleaved-thinking-2025-05-14,files-api-2025-04-14, mcp-client-2025-04-04,claude-code-20250219,context-management-2025-06-27,skills-2025-10-02,interleaved-thinking",
		"Authorization":  "Bearer sk-mine", "X-Api-Key": "sk-mine", "Cookie": "a=b", "Proxy-Authorization": "Basic eDp5",
		"Openai-Organization": "org-other", "Openai-Project": "proj-other", "X-Forwarded-For": "10.0.0.1", "Forwarded": "for=10.0.0.1",
		"X-Stainless-Os": "Linux", "Anthropic-Dangerous-Direct-Browser-Access": "true", "Accept-Encoding": "br",
	} {
		req.Header.Set(h, v)
	}
	req.Header.Add("Anthropic-Beta", "effort-2025-11-24")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	mu.Lock()
	r := got
	mu.Unlock()
	if r.URL.Path != "/v1/messages" || r.URL.RawQuery != "" {
		t.Errorf("the API was asked %s", r.URL)
	}
	want := map[string]string{
		"Content-Type": "application/json", "Accept": "application/json", "Anthropic-Version": "2023-06-01",
		"Anthropic-Beta": "interleaved-thinking-2025-05-14,claude-code-20250219,context-management-2025-06-27,effort-2025-11-24",
		"X-Api-Key":      key,
		// Go's own: the transport asks gzip and undoes it; the length.
		"Accept-Encoding": "gzip", "Content-Length": "32",
	}
	for h := range r.Header {
		if _, ok := want[h]; !ok && h != "User-Agent" {
			t.Errorf("the API got %s: %q", h, r.Header.Values(h))
		}
	}
	for h, v := range want {
		if g := strings.Join(r.Header.Values(h), ","); g != v {
			t.Errorf("the API got %s %q, want %q", h, g, v)
		}
	}
	for h := range resp.Header {
		switch h {
		case "Content-Type", "Retry-After", "X-Request-Id", "Date", "Content-Length":
		default:
			t.Errorf("the sandbox got %s: %q", h, resp.Header.Values(h))
		}
	}
	if resp.Header.Get("X-Request-Id") != "req-[key]" || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("the reply's headers: %v", resp.Header)
	}
	if c, _ := m.Count(); c.Requests != 1 || c.Output != 4 {
		t.Errorf("the reply, its X-Ocx-Proxy the API's, was not counted: %+v", c)
	}
}
