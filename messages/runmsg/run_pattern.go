package runmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// Run patterns (seed 004, sections 5 and 14; D84): "A pattern, by
// convention the wiki page run/NAME, holds such fields once; create
// writes them into each run in full." A pattern holds a run's layers
// (workspace, sandbox, limits, process), any of them, whole or in part;
// the caller gives the envelope's node (by default the node the tool runs
// on) and the objective, and may give any field of the layers over the
// pattern's. The caller's fields are a JSON merge patch (RFC 7396) on the
// pattern: objects are merged key by key at every depth, lists and every
// other value are replaced whole, and null removes the pattern's. The
// result is read by the run's own strict decoder, so a run made from a
// pattern is refused exactly as one written in full would be, and it is
// written in full: the run on the record never depends on the page.

// RunPatternPrefix is the wiki page prefix of the run patterns: the
// pattern NAME is the page run/NAME.
const RunPatternPrefix = "run/"

// runPatternLayers are the fields a pattern may hold: table 1's layers.
var runPatternLayers = []string{"workspace", "sandbox", "limits", "process"}

// runOverKeys are the fields a caller gives over a pattern: a run's.
var runOverKeys = []string{"ocx", "kind", "node", "objective", "workspace", "sandbox", "limits", "process"}

// RunPattern is a pattern read from its page: the layers it holds, each
// of the type its layer is (workspace a list, the others objects).
type RunPattern struct {
	Name   string
	layers map[string]any
}

// Layers names the layers the pattern holds, in table 1's order.
func (p *RunPattern) Layers() []string {
	var out []string
	for _, k := range runPatternLayers {
		if _, ok := p.layers[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

// CheckRunPatternName refuses a name that is not a pattern's: letters,
// digits, '.', '_' and '-', at most 64 bytes, starting with neither '.'
// nor '-' (as a login, or a console template, is named).
func CheckRunPatternName(name string) error {
	const ok = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
	if name == "" || len(name) > messages.MaxNameLen || strings.Trim(name, ok) != "" || name[0] == '.' || name[0] == '-' {
		return strictjson.FieldErr("pattern", strictjson.ErrInvalid, fmt.Sprintf("%s is not a pattern's name: letters, digits, '.', '_' and '-', at most %d, the wiki page %sNAME", strictjson.QuoteShort(name), messages.MaxNameLen, RunPatternPrefix))
	}
	return nil
}

// DecodeRunPattern reads the text of the pattern's wiki page run/NAME: one
// fenced JSON block (as a console template holds, and a post its note)
// holding an object of a run's layers. Anything else is refused, naming
// the field: a node (the caller's run names it), an objective (each run
// says what it is for), the envelope (a pattern is not a message) or a key
// that is not a layer.
func DecodeRunPattern(name string, text []byte) (*RunPattern, error) {
	if err := CheckRunPatternName(name); err != nil {
		return nil, err
	}
	where := "pattern " + RunPatternPrefix + name
	blocks, err := messages.Blocks(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(blocks) != 1 {
		return nil, &strictjson.FieldError{Where: where, Problem: fmt.Sprintf("holds %d fenced JSON blocks; a pattern holds one (a line ```json, an object of a run's layers, a line ```)", len(blocks)), Err: strictjson.ErrSyntax}
	}
	v, err := strictjson.Parse(blocks[0].JSON, strictjson.MaxNoteLen)
	if err != nil {
		return nil, strictjson.At(where, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &strictjson.FieldError{Where: where, Problem: "is " + strictjson.JSONType(v) + "; a pattern is a JSON object of a run's layers (" + strictjson.ListWords(runPatternLayers) + ")", Err: strictjson.ErrInvalid}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var problem string
		switch {
		case slices.Contains(runPatternLayers, k):
			continue
		case k == "node":
			problem = "a pattern names no node: the run made from it does (by default the node the tool runs on)"
		case k == "objective":
			problem = "a pattern says not what a run is for: each run's caller gives its objective"
		case k == "ocx" || k == "kind":
			problem = "a pattern is not a message: it holds a run's layers alone (" + strictjson.ListWords(runPatternLayers) + ")"
		default:
			problem = "is not a layer of a run (" + strictjson.ListWords(runPatternLayers) + ")"
		}
		return nil, &strictjson.FieldError{Where: where, Field: strictjson.JoinField("", k), Problem: problem, Err: strictjson.ErrUnknownKey}
	}
	o := strictjson.Obj{Map: m}
	if _, err := o.Objects("workspace", false, ""); err != nil {
		return nil, strictjson.At(where, err)
	}
	for _, k := range []string{"sandbox", "limits", "process"} {
		if _, _, err := o.Object(k, false, ""); err != nil {
			return nil, strictjson.At(where, err)
		}
	}
	return &RunPattern{Name: name, layers: m}, nil
}

// Apply makes the run a caller's fields make of the pattern: fields is a
// JSON object of a run's fields (ocx and kind may be left out, and must be
// 1 and run when given; node defaults to node), merged over the pattern's
// layers as a JSON merge patch, then read by the run's strict decoder.
// objective, when not empty, is set over the fields' (a front end's own
// field for it). A refusal names the field; one the pattern gave says so.
func (p *RunPattern) Apply(fields []byte, node, objective string) (*Run, error) {
	const where = "message"
	patch := map[string]any{}
	if len(bytes.TrimSpace(fields)) > 0 {
		v, err := strictjson.Parse(fields, strictjson.MaxNoteLen)
		if err != nil {
			return nil, strictjson.At(where, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, &strictjson.FieldError{Where: where, Problem: "is " + strictjson.JSONType(v) + "; give a run's fields over the pattern as a JSON object ({\"objective\": ...})", Err: strictjson.ErrInvalid}
		}
		patch = m
	}
	o := strictjson.Obj{Map: patch}
	if err := closed(o, "a run's fields over a pattern", runOverKeys...); err != nil {
		return nil, strictjson.At(where, err)
	}
	if v, ok := patch["ocx"]; ok {
		if n, isNum := v.(json.Number); !isNum || n.String() != "1" {
			return nil, &strictjson.FieldError{Where: where, Field: "ocx", Problem: "is " + strictjson.JSONType(v) + "; a run over a pattern is version 1 (leave ocx out, or give 1)", Err: strictjson.ErrUnknownVersion}
		}
	}
	if v, ok := patch["kind"]; ok && v != string(MsgRun) {
		return nil, &strictjson.FieldError{Where: where, Field: "kind", Problem: "a pattern makes a run (leave kind out, or give \"run\")", Err: strictjson.ErrInvalid}
	}
	run := map[string]any{}
	for k, v := range p.layers {
		run[k] = v
	}
	for _, k := range runPatternLayers {
		if v, ok := patch[k]; ok {
			if merged := mergePatch(run[k], v); merged == nil {
				delete(run, k)
			} else {
				run[k] = merged
			}
		}
	}
	run["ocx"], run["kind"] = json.Number("1"), string(MsgRun)
	if node != "" {
		run["node"] = node
	}
	for _, k := range []string{"node", "objective"} {
		if v, ok := patch[k]; ok {
			run[k] = v
		}
	}
	if objective != "" {
		run["objective"] = objective
	}
	b, err := json.Marshal(run)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	msg, err := DecodeMessage(b)
	if err != nil {
		var fe *strictjson.FieldError
		if errors.As(err, &fe) && p.gave(patch, fe.Field) {
			fe.Problem += " (the pattern " + RunPatternPrefix + p.Name + " gives it)"
		}
		return nil, err
	}
	r, ok := msg.(*Run)
	if !ok {
		return nil, fmt.Errorf("%s: a pattern made a %s, not a run", where, msg.Kind())
	}
	return r, nil
}

// Over names the fields of a caller's that the run takes over the
// pattern's, as they appear at the top of each layer (process.command,
// sandbox), for the tool's log; nil when fields do not read.
func (p *RunPattern) Over(fields []byte) []string {
	v, err := strictjson.Parse(fields, strictjson.MaxNoteLen)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return nil
	}
	var out []string
	for _, k := range runPatternLayers {
		v, ok := m[k]
		if !ok {
			continue
		}
		sub, isObj := v.(map[string]any)
		if _, had := p.layers[k].(map[string]any); !isObj || !had {
			out = append(out, k)
			continue
		}
		keys := make([]string, 0, len(sub))
		for sk := range sub {
			keys = append(keys, strictjson.JoinField(k, sk))
		}
		sort.Strings(keys)
		out = append(out, keys...)
	}
	return out
}

// gave says whether the field a refusal names came from the pattern: its
// layer, or the layer's key, is the pattern's and not the caller's.
func (p *RunPattern) gave(patch map[string]any, field string) bool {
	layer, rest, _ := strings.Cut(field, ".")
	layer, _, _ = strings.Cut(layer, "[")
	key, _, _ := strings.Cut(rest, ".")
	key, _, _ = strings.Cut(key, "[")
	pv, inPattern := p.layers[layer]
	if !inPattern {
		return false
	}
	cv, inPatch := patch[layer]
	pm, pObj := pv.(map[string]any)
	if key == "" || !pObj {
		return !inPatch
	}
	if _, ok := pm[key]; !ok {
		return false
	}
	if !inPatch {
		return true
	}
	cm, cObj := cv.(map[string]any)
	if !cObj {
		return false
	}
	_, caller := cm[key]
	return !caller
}

// mergePatch applies patch to target as RFC 7396 says: an object patch is
// merged key by key (null removing the key), anything else replaces the
// target whole. Neither argument is changed. nil means absent.
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	out := map[string]any{}
	if tm, ok := target.(map[string]any); ok {
		for k, v := range tm {
			out[k] = v
		}
	}
	for k, v := range pm {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}
