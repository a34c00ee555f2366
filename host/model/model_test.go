package model_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/model"
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
	h, err := model.NewProxy(&model.Config{API: model.Anthropic, BaseURL: upstream.URL + "/prefix"}, map[model.API]string{model.Anthropic: key}, "claude-haiku", nil)
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
		req, _ := http.NewRequest(method, "http://model"+path, strings.NewReader(`{"model": "claude-haiku"}`))
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
	if code, body := do("GET", model.InfoPath, nil); code != 200 || body != `{"api":"anthropic","apis":["anthropic"]}` {
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
	if _, ok, err := model.Open(l, "m", nil); ok || err != nil {
		t.Fatalf("no model.json: %v %v", ok, err)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	os.WriteFile(keyFile, []byte("sk-1\n"), 0o600)
	os.WriteFile(l.ModelJSON(), []byte(`{"api":"openai","base_url":"http://127.0.0.1:1","key_file":"`+keyFile+`"}`), 0o600)
	if h, ok, err := model.Open(l, "m", nil); !ok || err != nil || h == nil {
		t.Fatalf("%v %v", ok, err)
	}
	// A key inside a workspace is refused: its sandbox would see it.
	inWS := filepath.Join(root, "agent1", "projects", "p", "key")
	os.WriteFile(l.ModelJSON(), []byte(`{"api":"openai","base_url":"http://h","key_file":"`+inWS+`"}`), 0o600)
	h, ok, err := model.Open(l, "m", nil)
	if !ok || err == nil || !strings.Contains(err.Error(), "lies in a workspace") {
		t.Fatalf("%v %v", ok, err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", model.InfoPath, nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "lies in a workspace") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	os.WriteFile(l.ModelJSON(), []byte(`{"api":"openai","base_url":"http://h","keyfile":"/k"}`), 0o600)
	if _, _, err := model.Open(l, "m", nil); err == nil || !strings.Contains(err.Error(), `"keyfile" is not a key`) {
		t.Fatal(err)
	}
}

// TestProxyOnlyItsModel is issue 22 item 6: a session's proxy forwards a
// request only for the model its session definition names. A request
// naming another model (or none, or "model" twice, which a server might
// read either way) is refused with an answer that names it, and nothing
// reaches the API.
func TestProxyOnlyItsModel(t *testing.T) {
	var mu sync.Mutex
	var forwarded []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		forwarded = append(forwarded, string(b))
		mu.Unlock()
		io.WriteString(w, `{"choices":[]}`)
	}))
	defer upstream.Close()
	h := onlyModelProxy(t, &model.Config{API: model.OpenAI, BaseURL: upstream.URL}, "sk-key", "small-model")
	post := func(body string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body)))
		var e model.ErrorReply
		if json.Unmarshal(rec.Body.Bytes(), &e) == nil && e.Error != "" {
			return rec.Code, e.Error
		}
		return rec.Code, rec.Body.String()
	}
	for _, c := range []struct{ body, want string }{
		{`{"model": "huge-model", "messages": []}`, `"huge-model"`},
		{`{"messages": [{"role": "user", "content": "hi", "model": "small-model"}]}`, `names no model`},
		{`{"model": "small-model", "model": "huge-model"}`, `"model" twice`},
		// A server in Go (ollama) reads "MODEL" as "model", the last one
		// named: either case is the model, and twice is refused (D79).
		{`{"model": "small-model", "MODEL": "huge-model"}`, `"model" twice`},
		{`{"Model": "huge-model"}`, `"huge-model"`},
		{`{"model": 7}`, `not a string`},
		{`[{"model": "small-model"}]`, `not a JSON object`},
		{`{"model": "small-model"`, `not a JSON object`},
	} {
		code, body := post(c.body)
		if code != http.StatusForbidden && code != http.StatusBadRequest || !strings.Contains(body, c.want) || !strings.Contains(body, `small-model`) {
			t.Errorf("%s: %d %s, want a refusal naming %s and the session's model", c.body, code, body, c.want)
		}
	}
	mu.Lock()
	n := len(forwarded)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d refused requests reached the API: %q", n, forwarded)
	}
	if code, body := post(`{"messages": [], "model": "small-model"}`); code != 200 {
		t.Fatalf("the session's own model: %d %s", code, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(forwarded) != 1 || forwarded[0] != `{"messages": [], "model": "small-model"}` {
		t.Fatalf("forwarded %q, want the request as sent", forwarded)
	}
}

// onlyModelProxy is the proxy of a session whose definition names only.
func onlyModelProxy(t *testing.T, c *model.Config, key, only string) http.Handler {
	t.Helper()
	h, err := model.NewProxy(c, map[model.API]string{c.Primary(): key}, only, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The per-API form: each API its own base URL and key, never mixed with
// the one-API form.
func TestDecodeConfigPerAPI(t *testing.T) {
	c, err := model.DecodeConfig([]byte(`{"anthropic": {"base_url": "https://a.example", "key_file": "/etc/ocx/a.key"}, "openai": {"base_url": "http://127.0.0.1:1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	eps := c.Endpoints()
	if len(eps) != 2 || eps[model.Anthropic].KeyFile != "/etc/ocx/a.key" || eps[model.OpenAI].BaseURL != "http://127.0.0.1:1" || c.Primary() != model.OpenAI {
		t.Fatalf("%+v, primary %s", eps, c.Primary())
	}
	for _, bad := range []struct{ json, want string }{
		{`{"api":"openai","base_url":"http://h","anthropic":{"base_url":"http://h"}}`, `both ways`},
		{`{"anthropic":{"base_url":"http://h","model":"x"}}`, `"model" is not a key it may hold (base_url, key_file, models)`},
		{`{"anthropic":{"key_file":"/k"}}`, `"base_url" is missing`},
		{`{"anthropic":{"base_url":"http://h","key_file":""}}`, `empty`},
		{`{"openai":{"base_url":"ftp://h"}}`, `"openai": "base_url" "ftp://h" is not an http or https URL`},
		{`{"openai":"http://h"}`, `not a JSON object`},
		{`{"openai":{"base_url":"http://h"},"base_url":"http://h"}`, `one-API form`},
		{`{}`, `"api" is missing`},
	} {
		if _, err := model.DecodeConfig([]byte(bad.json)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.json, err, bad.want)
		}
	}
}

// Each API's requests go to its own base URL with its own key; OpenAI's
// Responses, which Codex speaks, beside its chat completions.
func TestProxyKeyPerAPI(t *testing.T) {
	serve := func(name string) (*httptest.Server, *[]string) {
		var seen []string
		var mu sync.Mutex
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.URL.Path+" "+r.Header.Get("X-Api-Key")+r.Header.Get("Authorization"))
			mu.Unlock()
			io.WriteString(w, `{"from":"`+name+`"}`)
		}))
		t.Cleanup(s.Close)
		return s, &seen
	}
	a, aSeen := serve("anthropic")
	o, oSeen := serve("openai")
	c := &model.Config{Anthropic: &model.Endpoint{BaseURL: a.URL}, OpenAI: &model.Endpoint{BaseURL: o.URL}}
	h, err := model.NewProxy(c, map[model.API]string{model.Anthropic: "sk-ant", model.OpenAI: "sk-oai"}, "gpt-standin", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := httptest.NewServer(h)
	defer p.Close()
	for _, path := range []string{"/v1/responses", "/v1/chat/completions", "/v1/messages"} {
		resp, err := http.Post(p.URL+path, "application/json", strings.NewReader(`{"model":"gpt-standin"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	if strings.Join(*aSeen, ",") != "/v1/messages sk-ant" || strings.Join(*oSeen, ",") != "/v1/responses Bearer sk-oai,/v1/chat/completions Bearer sk-oai" {
		t.Fatalf("anthropic saw %q, openai %q", *aSeen, *oSeen)
	}
	resp, _ := http.Get(p.URL + model.InfoPath)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `{"api":"openai","apis":["anthropic","openai"]}` {
		t.Fatalf("info %s", b)
	}
}

// Claude Code sends an alias expanded: a definition naming sonnet takes
// claude-sonnet-5-5 on Anthropic's API, and nothing else.
func TestAcceptsClaudeAliases(t *testing.T) {
	for _, c := range []struct {
		api       model.API
		only, got string
		ok        bool
	}{
		{model.Anthropic, "sonnet", "claude-sonnet-5-5", true},
		{model.Anthropic, "sonnet", "claude-3-5-sonnet-20241022", true},
		{model.Anthropic, "haiku", "claude-haiku-4-5", true},
		{model.Anthropic, "sonnet", "claude-opus-4-1", false},
		{model.Anthropic, "sonnet", "sonnet-big", false},
		{model.Anthropic, "claude-sonnet-5-5", "claude-sonnet-5-5", true},
		{model.Anthropic, "claude-sonnet-5-5", "claude-opus-5", false},
		{model.OpenAI, "sonnet", "claude-sonnet-5-5", false},
		{model.OpenAI, "gpt-5", "gpt-5", true},
	} {
		if got := model.Accepts(c.api, c.only, c.got); got != c.ok {
			t.Errorf("Accepts(%s, %q, %q) = %v", c.api, c.only, c.got, got)
		}
	}
}

// model.json names the models the node offers, per API (D52): the one-API
// form at its top, the per-API form in each API's object; the first is
// the default.
func TestDecodeConfigModels(t *testing.T) {
	c, err := model.DecodeConfig([]byte(`{"api":"openai","base_url":"http://127.0.0.1:11434","models":["llama3.2","qwen3"]}`))
	if err != nil || !slices.Equal(c.Endpoints()[model.OpenAI].Models, []string{"llama3.2", "qwen3"}) {
		t.Fatalf("one-API form: %+v %v", c, err)
	}
	c, err = model.DecodeConfig([]byte(`{"anthropic":{"base_url":"https://a.example","models":["claude-sonnet-5-5"]},"openai":{"base_url":"http://h"}}`))
	if err != nil || !slices.Equal(c.Endpoints()[model.Anthropic].Models, []string{"claude-sonnet-5-5"}) || c.Endpoints()[model.OpenAI].Models != nil {
		t.Fatalf("per-API form: %+v %v", c, err)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"api":"openai","base_url":"http://h","models":"x"}`, `"models" must be a list of model names`},
		{`{"api":"openai","base_url":"http://h","models":["x","x"]}`, `"models": "x" appears twice`},
		{`{"api":"openai","base_url":"http://h","models":[""]}`, `"models"[0] is empty`},
		{`{"api":"openai","base_url":"http://h","models":["a\nb"]}`, `"models"[0]`},
		{`{"anthropic":{"base_url":"http://h","models":[1]}}`, `"anthropic": "models" must be a list of model names`},
		{`{"anthropic":{"base_url":"http://h","model":"x"}}`, `"model" is not a key it may hold (base_url, key_file, models)`},
	} {
		if _, err := model.DecodeConfig([]byte(bad.json)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.json, err, bad.want)
		}
	}
}

// ChooseModel is create's choice of a record's model (D52): the record's,
// when the node offers it for the API its runner speaks; else that API's
// first; refused, naming the model and what the node offers, otherwise.
func TestChooseModel(t *testing.T) {
	per, err := model.DecodeConfig([]byte(`{"anthropic":{"base_url":"http://a","models":["claude-sonnet-5-5","claude-haiku-4-5"]},"openai":{"base_url":"http://o","models":["gpt-5"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	one, err := model.DecodeConfig([]byte(`{"api":"openai","base_url":"http://o","models":["llama3.2"]}`))
	if err != nil {
		t.Fatal(err)
	}
	bare, err := model.DecodeConfig([]byte(`{"api":"anthropic","base_url":"http://a"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		cfg           *model.Config
		runner, asked string
		want, refused string
	}{
		{"claude, none asked", per, "claude", "", "claude-sonnet-5-5", ""},
		{"claude, one offered", per, "claude", "claude-haiku-4-5", "claude-haiku-4-5", ""},
		{"codex, none asked", per, "codex", "", "gpt-5", ""},
		{"native speaks the primary API", per, "native", "", "gpt-5", ""},
		{"native, one-API form", one, "native", "", "llama3.2", ""},
		{"claude, one not offered", per, "claude", "default", "", `"default" is not a model this node offers for runner claude (the anthropic API): it offers "claude-sonnet-5-5", "claude-haiku-4-5"`},
		{"codex, another API's model", per, "codex", "claude-haiku-4-5", "", `"claude-haiku-4-5" is not a model this node offers for runner codex (the openai API): it offers "gpt-5"`},
		{"claude on an openai node", one, "claude", "", "", `runner claude speaks the anthropic API, which this node's model.json does not name`},
		{"no models listed, none asked", bare, "claude", "", "", `this node's model.json lists no models for the anthropic API`},
		{"no models listed, one asked", bare, "claude", "claude-x", "", `"claude-x" is not a model this node offers for runner claude (the anthropic API): its model.json lists none`},
		{"no model.json, one asked", nil, "claude", "claude-x", "claude-x", ""},
		{"no model.json, none asked", nil, "native", "", "", `this node has no model.json naming one`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := model.ChooseModel(c.cfg, c.runner, c.asked)
			if c.refused == "" {
				if err != nil || got != c.want {
					t.Fatalf("ChooseModel = %q, %v; want %q", got, err, c.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Fatalf("ChooseModel = %q, %v; want refused saying %q", got, err, c.refused)
			}
		})
	}
}

// TestDefaultNetwork: create gives a record no network where its runner
// reaches its model through the node (D79): native always, claude and
// codex where model.json names the API each speaks; the network where
// they reach their own service, on a node that serves them no model.
func TestDefaultNetwork(t *testing.T) {
	per, _ := model.DecodeConfig([]byte(`{"anthropic":{"base_url":"http://a"},"openai":{"base_url":"http://o"}}`))
	openai, _ := model.DecodeConfig([]byte(`{"api":"openai","base_url":"http://o"}`))
	for _, c := range []struct {
		cfg    *model.Config
		runner string
		want   bool
	}{
		{per, "claude", false}, {per, "codex", false}, {per, "native", false},
		{openai, "codex", false}, {openai, "native", false}, {openai, "claude", true},
		{nil, "claude", true}, {nil, "codex", true}, {nil, "native", false},
	} {
		if got := model.DefaultNetwork(c.cfg, c.runner); got != c.want {
			t.Errorf("runner %s, model.json %v: network %v, want %v", c.runner, c.cfg != nil, got, c.want)
		}
	}
}
