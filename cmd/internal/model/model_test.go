package model_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/model"
	"github.com/ocx-go/ocx/host"
)

func TestDecodeConfig(t *testing.T) {
	c, err := model.DecodeConfig([]byte(`{"api":"openai","base_url":"http://127.0.0.1:11434"}`))
	if err != nil || c.API != model.OpenAI || c.KeyFile != "" {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"api":"openai","base_url":"http://h","model":"x"}`, `"model" is not a key it may hold`},
		{`{"api":"openai","api":"anthropic","base_url":"http://h"}`, `"api" appears twice`},
		{`{"api":"gemini","base_url":"http://h"}`, `not openai or anthropic`},
		{`{"api":"openai"}`, `"base_url" is missing`},
		{`{"api":"openai","base_url":"ftp://h"}`, `not an http or https URL`},
		{`{"api":"openai","base_url":"http://u:p@h"}`, `user or password`},
		{`{"api":"openai","base_url":"http://h","key_file":"rel/key"}`, `clean absolute path`},
		{`{"api":"openai","base_url":"http://h","key_file":""}`, `empty`},
		{`{"api":"openai","base_url":"http://h"} {}`, `more after`},
		{`{"api":1,"base_url":"http://h"}`, `must be a string`},
	} {
		if _, err := model.DecodeConfig([]byte(bad.json)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.json, err, bad.want)
		}
	}
}

// The proxy drops the client's credentials, adds the key, forwards only
// the API's endpoint, and keeps the key out of the reply.
func TestProxy(t *testing.T) {
	const key = "sk-live-KEY"
	var mu sync.Mutex
	var got []http.Header
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		if r.URL.Path != "/prefix/v1/messages" {
			http.Error(w, "path "+r.URL.Path, 400)
			return
		}
		io.WriteString(w, `{"error":{"message":"bad key `+key+`"}}`)
	}))
	defer upstream.Close()
	h, err := model.NewProxy(&model.Config{API: model.Anthropic, BaseURL: upstream.URL + "/prefix"}, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "model.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { model.Serve(ctx, ln, h, nil, nil) })
	defer func() { cancel(); wg.Wait() }()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer c.CloseIdleConnections()
	do := func(method, path string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest(method, "http://model"+path, strings.NewReader(`{}`))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do("GET", model.InfoPath, nil); code != 200 || body != `{"api":"anthropic"}` {
		t.Fatalf("info: %d %s", code, body)
	}
	code, body := do("POST", "/v1/messages", map[string]string{"Authorization": "Bearer mine", "X-Api-Key": "mine", "Cookie": "c=1", "Anthropic-Version": "2023-06-01"})
	if code != 200 || strings.Contains(body, key) || !strings.Contains(body, "bad key [key]") {
		t.Fatalf("post: %d %s", code, body)
	}
	mu.Lock()
	hd := got[0]
	mu.Unlock()
	if hd.Get("X-Api-Key") != key || hd.Get("Authorization") != "" || hd.Get("Cookie") != "" || hd.Get("Anthropic-Version") != "2023-06-01" {
		t.Fatalf("upstream headers %v", hd)
	}
	for _, p := range []struct{ method, path string }{{"POST", "/v1/chat/completions"}, {"GET", "/v1/models"}, {"GET", "/v1/messages"}} {
		if code, _ := do(p.method, p.path, nil); code != 404 && code != 405 {
			t.Errorf("%s %s: %d, not refused", p.method, p.path, code)
		}
	}
	mu.Lock()
	n := len(got)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d requests forwarded", n)
	}
}

func TestOpen(t *testing.T) {
	root := t.TempDir()
	l, _ := host.NewLayout(root)
	if _, ok, err := model.Open(l, nil); ok || err != nil {
		t.Fatalf("no model.json: %v %v", ok, err)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	os.WriteFile(keyFile, []byte("sk-1\n"), 0o600)
	os.WriteFile(l.ModelJSON(), []byte(`{"api":"openai","base_url":"http://127.0.0.1:1","key_file":"`+keyFile+`"}`), 0o600)
	if h, ok, err := model.Open(l, nil); !ok || err != nil || h == nil {
		t.Fatalf("%v %v", ok, err)
	}
	// A key inside a workspace is refused: its sandbox would see it.
	inWS := filepath.Join(root, "agent1", "projects", "p", "key")
	os.WriteFile(l.ModelJSON(), []byte(`{"api":"openai","base_url":"http://h","key_file":"`+inWS+`"}`), 0o600)
	h, ok, err := model.Open(l, nil)
	if !ok || err == nil || !strings.Contains(err.Error(), "lies in a workspace") {
		t.Fatalf("%v %v", ok, err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", model.InfoPath, nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "lies in a workspace") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	os.WriteFile(l.ModelJSON(), []byte(`{"api":"openai","base_url":"http://h","keyfile":"/k"}`), 0o600)
	if _, _, err := model.Open(l, nil); err == nil || !strings.Contains(err.Error(), `"keyfile" is not a key`) {
		t.Fatal(err)
	}
}
