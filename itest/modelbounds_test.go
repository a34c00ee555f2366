package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// holdOn makes the stand-in hold every request whose prompt says "hold
// on" until the test lets it go (at the latest when the test ends); held
// hears the first.
func holdOn(t *testing.T, m *modelStandIn) (held <-chan struct{}, letGo func()) {
	h := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	letGo = func() { once.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	m.setReply(func(q *modelRequest) modelReply {
		if strings.Contains(q.User, "hold on") {
			select {
			case h <- struct{}{}:
			default:
			}
			<-release
		}
		return modelReply{Text: "done"}
	})
	return h, letGo
}

// relayOf finds, in the processes of login's sandbox, the turn's relay to
// the node's model and its key: claude's ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY, codex's provider base_url (its command line) and
// OCX_MODEL_RELAY_KEY.
func (c *cliNode) relayOf(login string) (url, key string) {
	c.t.Helper()
	urlRE := regexp.MustCompile(`(?:ANTHROPIC_BASE_URL=|model_providers\.ocx\.base_url="?)(http://127\.0\.0\.1:[0-9]+)`)
	keyRE := regexp.MustCompile(`^(?:ANTHROPIC_API_KEY|OCX_MODEL_RELAY_KEY)=([0-9a-f]+)$`)
	for _, pid := range c.sandboxProcs(login) {
		for _, f := range []string{"environ", "cmdline"} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
			for _, kv := range strings.Split(string(b), "\x00") {
				if m := urlRE.FindStringSubmatch(kv); m != nil {
					url = m[1]
				}
				if m := keyRE.FindStringSubmatch(kv); m != nil && f == "environ" {
					key = m[1]
				}
			}
		}
	}
	if url == "" {
		c.t.Fatalf("no relay to the model in %s's sandbox", login)
	}
	if len(key) != 64 {
		c.t.Errorf("the CLI in %s's sandbox holds no key of its relay (%d characters)", login, len(key))
	}
	return url, key
}

// TestAgentRelayKeyed is issue 39 item 2: the real Claude Code and Codex
// in a sandbox sharing the host's network ("network": true), whose relay
// to the node's model therefore listens on the host's own 127.0.0.1.
// While a turn is under way, curl run as another user of the host
// (nobody, uid 65534) without the relay's key, and a client with the
// placeholder the CLIs were given before (D48), are refused 401 naming
// why, and the model hears nothing of them: the relay carries only what
// holds the key made for the turn, which only the CLI holds. The CLI's
// own turn goes on and is answered. And create, asked no sandbox on this
// node (model.json names both APIs), gives the record no network (D79).
func TestAgentRelayKeyed(t *testing.T) {
	for _, r := range cliRunners {
		t.Run(r.runner, func(t *testing.T) {
			c := newCLINode(t)
			login := r.runner + "-k"
			held, letGo := holdOn(t, c.model)
			record := c.createAgentWith(login, r.runner, r.model, `{}`, `{"network": true, "read_only": [], "read_write": []}`, `{"wall": "1h"}`)
			to := c.result(person, "post", "--to", record, "--text", "hold on")
			select {
			case <-held:
			case <-time.After(time.Minute):
				t.Fatal("the model heard nothing of the turn in a minute")
			}
			before := len(c.model.seen())
			url, _ := c.relayOf(login)

			body := fmt.Sprintf(`{"model": %q, "max_tokens": 10, "stream": false, "messages": [{"role": "user", "content": "spend it"}], "input": "spend it"}`, r.model)
			path := "/v1/messages"
			if r.api == "responses" {
				path = "/v1/responses"
			}
			curl := exec.Command("curl", "-s", "-w", "\n%{http_code}", "-X", "POST", "-H", "content-type: application/json", "-d", body, url+path)
			curl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := curl.Output()
			if err != nil {
				t.Fatalf("curl as nobody: %v", err)
			}
			if !strings.HasSuffix(string(out), "\n401") || !strings.Contains(string(out), "it carries no key") {
				t.Errorf("curl as nobody, without the key, to %s got:\n%s", url, out)
			}
			for _, wrong := range []string{"ocx-the-node-holds-the-key", strings.Repeat("0", 64)} {
				req, _ := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
				req.Header.Set("X-Api-Key", wrong)
				req.Header.Set("Authorization", "Bearer "+wrong)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "its key is not this turn's") || strings.Contains(string(b), r.model) {
					t.Errorf("with the key %q: %d %s", wrong, resp.StatusCode, b)
				}
			}
			if got := len(c.model.seen()); got != before {
				t.Fatalf("the model heard %d requests from outside the turn", got-before)
			}

			letGo()
			if got := c.awaitReplyBy(login, record, to); strings.TrimSpace(got.Text) != "done" {
				t.Fatalf("the held turn's answer: %q", got.Text)
			}
			c.must(c.srv.AdminLogin, "tool", "stop", "--record", record)

			// create's default here: no network (D79).
			a, _ := c.answer(c.srv.AdminLogin, "tool", "create", "--input", c.createInput(login+"d", r.runner, r.model, `{}`, "", `{"wall": "1h"}`, true))
			log := strings.Join(a.Log, "\n")
			rec, err := runmsg.ReadTaskRecord([]byte(log[max(strings.Index(log, "```json"), 0):]))
			if err != nil || rec.Sandbox.Network {
				t.Errorf("create's default sandbox for %s on a node serving its model: %+v, %v", r.runner, rec, err)
			}
		})
	}
}

// TestAgentRequestsCarryAllowedHeaders is issue 39 item 7's proxy part
// with the real CLIs: every request Claude Code and Codex sent reached the
// model with the allowed headers alone (no X-Stainless-*, no X-Codex-*,
// no session ids; Anthropic's betas those the node allows) and no query
// (claude asks /v1/messages?beta=true), and the turn was answered.
func TestAgentRequestsCarryAllowedHeaders(t *testing.T) {
	allowed := map[string]bool{"Content-Type": true, "Accept": true, "Anthropic-Version": true, "Anthropic-Beta": true,
		"X-Api-Key": true, "Authorization": true, "Accept-Encoding": true, "Content-Length": true, "User-Agent": true}
	for _, r := range cliRunners {
		t.Run(r.runner, func(t *testing.T) {
			c := newCLINode(t)
			login := r.runner + "-h"
			record := c.createAgent(login, r.runner, r.model, `{}`)
			if got := c.turn(login, record, "hello there"); !strings.Contains(got, "hello there") {
				t.Fatalf("the turn's answer: %q", got)
			}
			reqs := c.model.seen()
			if len(reqs) == 0 {
				t.Fatal("the model heard nothing")
			}
			for i, q := range reqs {
				if q.Query != "" {
					t.Errorf("request %d reached the model with the query %q", i, q.Query)
				}
				for h := range q.Header {
					if !allowed[h] {
						t.Errorf("request %d reached the model with %s: %q", i, h, q.Header.Values(h))
					}
				}
				for b := range strings.SplitSeq(q.Header.Get("Anthropic-Beta"), ",") {
					if strings.HasPrefix(b, "files-api") || strings.HasPrefix(b, "mcp-client") {
						t.Errorf("request %d asks the beta %s", i, b)
					}
				}
			}
			if r.api == "anthropic" && reqs[0].Header.Get("Anthropic-Beta") == "" {
				t.Errorf("claude's betas were all left out: %v", reqs[0].Header)
			}
			c.must(c.srv.AdminLogin, "tool", "stop", "--record", record)
		})
	}
}

// TestTokensBudgetHoldsAtOnce is issue 39 item 3 on the real daemon and
// proxy: an llm session under limits.tokens of 2000 whose model socket
// gets 24 requests at once (each on its own connection: the socket
// serves 32 at once, D80; TestMeterHoldsTheBudgetAtOnce sends 100 to the
// proxy), each asking 4096 tokens, from a model that
// writes all it is allowed. What reached the model was bounded to what
// the limit left (together within 2000), the rest refused with 403 in the
// API's error shape naming the budget; the daemon ended the session with
// budget: tokens, and its end note says what was spent against what was
// allowed.
func TestTokensBudgetHoldsAtOnce(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	n := newNodeOn(t, llmRoot)
	m := startModelStandIn(t, func(q *modelRequest) modelReply {
		out := q.MaxTokens // all it is allowed
		if out == 0 {
			out = 4096
		}
		return modelReply{Text: "all I may", Input: 20, Output: out}
	})
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), []byte(`{"api": "openai", "base_url": "`+m.URL()+`", "models": ["standin"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "create.json")
	if err := os.WriteFile(in, []byte(`{"objective": "Spend.", "user": "native-b", "runner": "native", "hears": ["`+person+`"], "budget": {"wall": "1h", "tokens": 2000}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	record := n.result(n.srv.AdminLogin, "tool", "create", "--input", in)
	n.waitFor("the session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == "native-b" && s.Listening {
				return true
			}
		}
		return false
	})
	ws, err := n.layoutWorkspace("native-b")
	if err != nil {
		t.Fatal(err)
	}
	// The model socket serves at most 32 connections at once (D80,
	// model.MaxConns): all the requests are under way before the budget
	// is spent and the session ends with its socket, each on its own
	// connection, a few places left.
	const at = 24
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", ws.ModelSocket())
	}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	codes := make([]int, at)
	bodies := make([]string, at)
	var wg sync.WaitGroup
	for i := range at {
		wg.Go(func() {
			resp, err := c.Post("http://model/v1/chat/completions", "application/json",
				strings.NewReader(`{"model": "standin", "max_tokens": 4096, "messages": [{"role": "user", "content": "all you may"}]}`))
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			codes[i], bodies[i] = resp.StatusCode, string(b)
		})
	}
	wg.Wait()
	var bounds []int
	written := 0
	for _, q := range m.seen() {
		bounds = append(bounds, q.MaxTokens)
		written += q.MaxTokens
	}
	forwarded, refused := 0, 0
	for i, code := range codes {
		switch code {
		case http.StatusOK:
			forwarded++
		case http.StatusForbidden:
			refused++
			var e struct {
				Error struct{ Message string }
			}
			if json.Unmarshal([]byte(bodies[i]), &e) != nil || !strings.Contains(e.Error.Message, "limits.tokens of 2000") {
				t.Errorf("a refusal not in the API's shape naming the budget: %s", bodies[i])
			}
		default:
			t.Errorf("request %d: %d %s", i, code, bodies[i])
		}
	}
	t.Logf("forwarded %d, bounded to %v; refused %d", forwarded, bounds, refused)
	if written > 2000 || len(bounds) != forwarded || forwarded == 0 || forwarded+refused != at {
		t.Errorf("the model was allowed %d tokens by %d requests (%v), %d refused", written, len(bounds), bounds, refused)
	}

	launches := notesOn[*messages.LaunchNote](n, record)
	var end *messages.EndNote
	n.waitFor("the end note past the budget", func() bool {
		if ends := n.endsOf(record, launches[len(launches)-1].P.Hash); len(ends) > 0 {
			end = ends[0]
		}
		return end != nil
	})
	if end.Budget != messages.LimitTokens || end.Usage == nil || end.Usage.Model == nil {
		t.Fatalf("the end note: budget %q, usage %+v: %s", end.Budget, end.Usage, end.Note)
	}
	u := end.Usage.Model
	if u.Output > 2000 || u.Requests != uint64(forwarded) || u.Refused != uint64(refused) || end.Usage.Limit != 2000 {
		t.Errorf("the end note's count: %+v, limit %d", u, end.Usage.Limit)
	}
	if want := fmt.Sprintf("%d of its 2000 tokens", u.Total()); !strings.Contains(end.Note, want) || !strings.Contains(end.Note, "past its tokens limit") {
		t.Errorf("the end note does not say %q:\n%s", want, end.Note)
	}
}
