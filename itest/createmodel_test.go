package itest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/runmsg"
)

// create's model (issue 27 item 2, D52), through the real hook, daemon,
// sandboxed session and native runner, against the stand-in model
// serving only the models it is told to, as a real server does.

// newOfferingNode is a node on the llm release whose model.json offers
// models on OpenAI's API (the native runner's), first the default, at a
// stand-in that serves those models alone.
func newOfferingNode(t *testing.T, models ...string) (*testNode, *modelStandIn) {
	t.Helper()
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	n := newNodeOn(t, llmRoot)
	m := startModelStandIn(t, nil)
	m.offer(models...)
	b, _ := json.Marshal(map[string]any{"openai": map[string]any{"base_url": m.URL(), "models": models}})
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return n, m
}

// createInput writes create's input for login on the native runner,
// hearing the person, with model when not "".
func createInput(t *testing.T, login, model string) string {
	t.Helper()
	rec := map[string]any{"objective": "Answer whoever writes.", "user": login, "runner": "native", "hears": []string{person},
		"budget": map[string]any{"wall": "1h"}}
	if model != "" {
		rec["model"] = model
	}
	b, _ := json.Marshal(rec)
	in := filepath.Join(t.TempDir(), "create-"+login+".json")
	if err := os.WriteFile(in, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestCreateTakesTheNodesModel: create naming no model writes model.json's
// first for the runner's API in the record, and the session's first
// request to the model names it, so the stand-in, which serves that model
// alone, answers; before, the session asked for "default", which no
// server has, and the stand-in answered 404.
func TestCreateTakesTheNodesModel(t *testing.T) {
	n, m := newOfferingNode(t, "standin-native", "standin-other")
	startDaemon(t, n, program("ocxd"))
	const login = "native-31"
	record := n.result(n.srv.AdminLogin, "tool", "create", "--input", createInput(t, login, ""))
	rec, err := runmsg.ReadTaskRecord([]byte(n.thread(record)[0].Text))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Model != "standin-native" {
		t.Errorf("the record's model %q, want model.json's first, standin-native", rec.Model)
	}
	n.waitFor(login+"'s session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == login && s.Listening {
				return true
			}
		}
		return false
	})
	to := n.result(person, "post", "--to", record, "--text", "hello there")
	reply := n.awaitReplyBy(login, record, to)
	reqs := m.seen()
	if len(reqs) == 0 {
		t.Fatal("the model saw no request")
	}
	t.Logf("the first request names %q; the reply: %s", reqs[0].Model, reply.Text)
	if reqs[0].Model != "standin-native" {
		t.Errorf("the session's first request names the model %q, want the node's standin-native", reqs[0].Model)
	}
	if got := strings.TrimSpace(reply.Text); !strings.HasPrefix(got, "stand-in: ") || !strings.HasSuffix(got, "hello there") {
		t.Errorf("the agent's reply %q, want the model's answer", got)
	}
}

// TestCreateRefusesAModelNotOffered: create naming a model model.json does
// not offer for the runner's API is refused, naming it and what the node
// offers, before anything is written: no record, no login.
func TestCreateRefusesAModelNotOffered(t *testing.T) {
	n, m := newOfferingNode(t, "standin-native", "standin-other")
	startDaemon(t, n, program("ocxd"))
	const login = "native-32"
	a, r := n.answer(n.srv.AdminLogin, "tool", "create", "--input", createInput(t, login, "gpt-unheard-of"))
	if a.Stopped == nil {
		t.Fatalf("create with a model the node does not offer was not refused: %s", r)
	}
	t.Logf("refused: %s", *a.Stopped)
	for _, want := range []string{`model: "gpt-unheard-of" is not a model this node offers for runner native`, `it offers "standin-native", "standin-other"`} {
		if !strings.Contains(*a.Stopped, want) {
			t.Errorf("the refusal %q does not say %q", *a.Stopped, want)
		}
	}
	if a.Result != nil {
		t.Errorf("a refused create posted %s", *a.Result)
	}
	if _, err := os.Stat(filepath.Join(n.agents, login)); !os.IsNotExist(err) {
		t.Errorf("a refused create made the login's directory: %v", err)
	}
	if len(m.seen()) != 0 {
		t.Errorf("the model was asked: %d requests", len(m.seen()))
	}
}
