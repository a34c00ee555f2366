package tools

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/ocx-go/ocx/messages/toolio"
)

// toolField is one friendly field of a tool's input: a string a front end
// asks for by name (a flag of `ocx tool NAME`, a field of the console's
// form) and sets over the JSON input, at Path.
type toolField struct {
	Name string
	// Path is where the value goes in the input: the field itself, or for
	// wall, budget.wall (set in the budget object, its other keys kept).
	Path []string
	// Help says what it is, for a flag's usage and a form's label.
	Help string
}

var toolFields = map[string][]toolField{
	toolio.ToolCreate: {
		{Name: "objective", Path: []string{"objective"}, Help: "what the agent is for"},
		{Name: "runner", Path: []string{"runner"}, Help: "claude, codex or native (default claude)"},
		{Name: "wall", Path: []string{"budget", "wall"}, Help: "budget.wall: the longest the agent runs, as 2h"},
	},
	toolio.ToolPost: {
		{Name: "to", Path: []string{"to"}, Help: "the post replied to: its hash, or 10 or more of its first digits"},
		{Name: "text", Path: []string{"text"}, Help: "the reply, in Markdown"},
	},
	toolio.ToolAudit: {
		{Name: "checkin", Path: []string{"checkin"}, Help: "the check-in judged"},
		{Name: "verdict", Path: []string{"verdict"}, Help: "pass or fail"},
		{Name: "reason", Path: []string{"reason"}, Help: "why, on one line"},
		{Name: "against", Path: []string{"against"}, Help: "a record's hash, or a path such as PLAN.md"},
	},
	toolio.ToolPush: {},
	toolio.ToolStop: {
		{Name: "record", Path: []string{"record"}, Help: "the record whose agent is ended"},
	},
}

// ToolFields are the friendly fields of the tool name, the same in every
// front end that offers them; nil for a name that is no tool.
func ToolFields(name string) []toolField { return slices.Clone(toolFields[name]) }

// WithFields sets the friendly fields given (by name) and, when dry is not
// nil, dry_run, over the JSON input raw, and returns the input to call the
// tool with. With nothing to set, raw is returned as it came, for the
// tool's strict reader. An input that is not one JSON object, or that
// holds a key twice, is returned as it came too: the tool refuses it,
// naming what is wrong, and nothing is written. Keys that are not set
// keep their bytes.
func WithFields(tool string, raw []byte, set map[string]string, dry *bool) []byte {
	if len(set) == 0 && dry == nil {
		return raw
	}
	obj, ok := topLevel(raw)
	if !ok {
		return raw
	}
	for _, f := range toolFields[tool] {
		v, given := set[f.Name]
		if !given {
			continue
		}
		s, _ := json.Marshal(v)
		if len(f.Path) == 1 {
			obj[f.Path[0]] = s
			continue
		}
		// Set inside the object the input gave, keeping its other keys: a
		// budget's tokens given beside a wall field is a limit, never
		// dropped (D50). Anything but one object there is replaced.
		in, ok := topLevel(obj[f.Path[0]])
		if !ok || len(bytes.TrimSpace(obj[f.Path[0]])) == 0 {
			in = map[string]json.RawMessage{}
		}
		in[f.Path[1]] = s
		inner, _ := json.Marshal(in)
		obj[f.Path[0]] = inner
	}
	if dry != nil {
		obj["dry_run"], _ = json.Marshal(*dry)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return out
}

// topLevel reads raw's top-level keys, each value's bytes as they are;
// blank input is {}. ok is false for anything but one JSON object
// without a key twice.
func topLevel(raw []byte) (map[string]json.RawMessage, bool) {
	obj := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return obj, true
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		if err != nil || !isKey {
			return nil, false
		}
		if _, twice := obj[key]; twice {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		obj[key] = v
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false // something after the object
	}
	return obj, true
}
