package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host/runner"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

func TestArgs(t *testing.T) {
	b := &runner.Bridge{Command: "/rel/ocx", Args: []string{"mcp", "connect", "--socket", "/tmp/ocx-mcp/mcp.sock"}}
	got := strings.Join(args("gpt-5", "/tree", b, "", ""), " ")
	want := `exec --json --model gpt-5 --cd /tree --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox ` +
		`-c mcp_servers.ocx.command="/rel/ocx" -c mcp_servers.ocx.args=["mcp", "connect", "--socket", "/tmp/ocx-mcp/mcp.sock"] -`
	if got != want {
		t.Fatalf("args\n got %s\nwant %s", got, want)
	}
	if got := args("m", "/t", nil, "th1", ""); strings.Join(got[len(got)-3:], " ") != "resume th1 -" || strings.Contains(" "+strings.Join(got, " ")+" ", " -c ") {
		t.Fatalf("resumed args without tools %q", got)
	}
	// The node's model: codex's provider is the relay, its key the
	// relay's, named by the variable that holds it, never on the command
	// line (D79).
	got = strings.Join(args("gpt-5", "/tree", nil, "", "http://127.0.0.1:4242"), " ")
	want = `exec --json --model gpt-5 --cd /tree --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox ` +
		`-c model_provider="ocx" -c model_providers.ocx.name="the OCX node's model" -c model_providers.ocx.base_url="http://127.0.0.1:4242/v1" -c model_providers.ocx.wire_api="responses" ` +
		`-c model_providers.ocx.env_key="OCX_MODEL_RELAY_KEY" ` +
		`-c model_providers.ocx.request_max_retries=2 -c model_providers.ocx.stream_max_retries=2 -c analytics.enabled=false -`
	if got != want {
		t.Fatalf("args with the node's model\n got %s\nwant %s", got, want)
	}
}

// A TOML basic string as tomlString writes it reads back as JSON does.
func TestTOMLString(t *testing.T) {
	for _, s := range []string{"/a b/ocx", `q"uo\te`, "tab\tnew\nline\x7f", "é/ünï"} {
		var back string
		if err := json.Unmarshal([]byte(tomlString(s)), &back); err != nil || back != s {
			t.Errorf("%q -> %s -> %q, %v", s, tomlString(s), back, err)
		}
	}
}

func TestParseEvents(t *testing.T) {
	for _, tc := range []struct {
		name, out, answer, id, note string
		exit                        int
	}{
		{"completed", `{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**thinking**"}}
{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"first"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"last"}}
{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":2}}`, "last", "t1", "", 0},
		{"0.4x item_type", `{"type":"thread.started","thread_id":"t2"}
{"type":"item.completed","item":{"id":"item_3","item_type":"assistant_message","text":"old"}}
{"type":"turn.completed","usage":{}}`, "old", "t2", "", 0},
		{"unknown events", `{"type":"thread.started","thread_id":"t3"}
{"type":"item.plan.delta","item_id":"x","delta":"y"}
{"type":"future.event","x":1}
{"type":"turn.completed"}`, "", "t3", "", 0},
		{"failed", `{"type":"thread.started","thread_id":"t1"}
{"type":"error","message":"quota"}
{"type":"turn.failed","error":{"message":"You exceeded your quota"}}`, "", "", "codex: the turn failed: You exceeded your quota", 1},
		{"failed, no message", `{"type":"turn.failed"}`, "", "", "codex: the turn failed: the turn failed", 1},
		{"error only", `{"type":"thread.started","thread_id":"t1"}
{"type":"error","message":"stream error"}`, "", "", "codex: stream error", 1},
		{"error item", `{"type":"item.completed","item":{"id":"i","type":"error","message":"bad config"}}`, "", "", "codex: bad config", 0},
		{"exit before turn", `{"type":"thread.started","thread_id":"t1"}`, "", "", "codex exited with status 1 before its turn completed (its standard error is in the session's log)", 1},
		{"ended early", ``, "", "", "codex ended without completing its turn", 0},
		{"exit after turn", `{"type":"turn.completed"}`, "", "", "codex exited with status 1 after its turn completed", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer, id, err := outcome(parseEvents([]byte(tc.out)), tc.exit)
			if tc.note != "" {
				if err == nil || err.Error() != tc.note {
					t.Fatalf("err %v, want %q", err, tc.note)
				}
				return
			}
			if err != nil || answer != tc.answer || id != tc.id {
				t.Fatalf("%q, %q, %v; want %q, %q", answer, id, err, tc.answer, tc.id)
			}
		})
	}
}

// FuzzParseEvents: any output reads as events, never a panic; a failure
// note is one line.
// TestUsageOfEvents: turn.completed's usage, summed when codex ran more
// than one turn; the cached are some of the input; what is not a whole
// number is not read.
func TestUsageOfEvents(t *testing.T) {
	ev := parseEvents([]byte(`{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":50,"output_tokens":20}}
{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":900,"output_tokens":2,"reasoning_output_tokens":1}}`))
	if want := (modelapi.Tokens{Input: 110, Output: 22, Cached: 60}); !ev.Reported || ev.Used != want {
		t.Errorf("summed: %+v %v, want %+v", ev.Used, ev.Reported, want)
	}
	for _, u := range []string{`{}`, `{"input_tokens":1.5,"output_tokens":2}`, `{"input_tokens":-1,"output_tokens":2}`, `null`, `[1]`} {
		ev := parseEvents([]byte(`{"type":"turn.completed","usage":` + u + `}`))
		if ev.Reported || !ev.Completed {
			t.Errorf("usage %s: reported %+v, completed %v", u, ev.Used, ev.Completed)
		}
	}
}

func FuzzParseEvents(f *testing.F) {
	f.Add([]byte("{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n{\"type\":\"turn.completed\"}\n"))
	f.Add([]byte("{\"type\":\"item.completed\",\"item\":{\"type\":\"agent_message\",\"text\":\"a\"}}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"x\\ny\"}}"))
	f.Add([]byte("{\"type\":\"error\",\"message\":null}\nnot json\n{\"item\":7}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev := parseEvents(b)
		if err := (&messages.RunnerReport{Tokens: ev.Used}).Validate(); err != nil {
			t.Fatalf("the usage read does not validate: %+v: %v", ev.Used, err)
		}
		for _, exit := range []int{0, 1} {
			if _, _, err := outcome(ev, exit); err != nil && strings.Contains(err.Error(), "\n") {
				t.Fatalf("note %q spans lines", err)
			}
		}
	})
}
