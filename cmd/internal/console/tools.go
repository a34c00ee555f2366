package console

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/consolepage"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/tools"
)

// The protocol v1 tools (seed 001 E8; docs/tools.md) as the console offers
// them: /tools lists the registry's tools, /tool/NAME is a tool's form,
// and its button calls the registry's CallIn as the viewer (D30, D36),
// showing the one answer. POST /tool/NAME.json answers with the answer's
// JSON alone, byte for byte as `ocx tool NAME` prints it. It is a path,
// not an Accept header: Fossil 2.21 does not pass Accept to its CGI
// extensions (HTTP_ACCEPT is absent from their environment, measured). The list comes from tools.Tools(): the
// console offers no tool the registry does not.

// toolByName is the registry's tool called name.
func toolByName(name string) (tools.Tool, bool) {
	for _, t := range tools.Tools() {
		if t.Name == name {
			return t, true
		}
	}
	return tools.Tool{}, false
}

// toolPath reads a tool's path below /tool/: NAME or NAME.json.
func toolPath(s string) (name string, asJSON bool) {
	if n, ok := strings.CutSuffix(s, ".json"); ok {
		return n, true
	}
	return s, false
}

// formField is one friendly field on a tool's form.
type formField struct {
	Name, Help, Value string
	Long              bool // a textarea
}

type toolData struct {
	Tool   tools.Tool
	Fields []formField
	// Input is the raw JSON textarea's content.
	Input string
	// Answer is the press's answer, and AnswerJSON its JSON; nil before.
	Answer     *node.Answer
	AnswerJSON string
}

func (q *request) toolsPage() {
	q.Render("tools", "Tools", "tools", struct{ Tools []tools.Tool }{tools.Tools()})
}

// toolData is a tool's form, filled in from form (nil: empty).
func toolFormData(t tools.Tool, form url.Values) toolData {
	d := toolData{Tool: t, Input: form.Get("input")}
	for _, f := range tools.ToolFields(t.Name) {
		d.Fields = append(d.Fields, formField{Name: f.Name, Help: f.Help, Value: form.Get(f.Name), Long: f.Name == "text" || f.Name == "objective"})
	}
	return d
}

func (q *request) toolPage(name string) {
	t, ok := toolByName(name)
	if !ok {
		q.Plain(http.StatusNotFound, fmt.Sprintf("%q is not a tool of this node (%s)", name, toolNames()))
		return
	}
	q.Render("tool", t.Name, "tools", toolFormData(t, nil))
}

func toolNames() string {
	var names []string
	for _, t := range tools.Tools() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// toolInput is the input a tool's form gives: the raw JSON, with each
// friendly field that is filled in set over it, and dry_run set as the
// box says when the form carries the box (dry_run_box). A form with
// neither sends the raw JSON to the tool exactly as given.
func toolInput(name string, form url.Values) []byte {
	set := map[string]string{}
	for _, f := range tools.ToolFields(name) {
		if v := form.Get(f.Name); strings.TrimSpace(v) != "" {
			set[f.Name] = v
		}
	}
	var dry *bool
	if form.Get("dry_run_box") != "" {
		ticked := form.Get("dry_run") != ""
		dry = &ticked
	}
	return tools.WithFields(name, []byte(form.Get("input")), set, dry)
}

// toolCall is a tool's button (checkPost passed): the registry's call as
// the viewer, on this repository's project, and its one answer: 422 when
// it stopped, as every button's answer.
func (q *request) toolCall(name string, asJSON bool) {
	t, ok := toolByName(name)
	if !ok {
		q.Refuse(&consolepage.Refusal{Status: http.StatusNotFound, Reason: fmt.Sprintf("%q is not a tool of this node (%s): nothing written", name, toolNames())})
		return
	}
	form := q.R.PostForm
	a := tools.Of(q.n).CallIn(q.Ctx, q.Project, q.n.Caller, t.Name, toolInput(t.Name, form))
	var b bytes.Buffer
	if err := a.WriteJSON(&b); err != nil {
		q.Plain(http.StatusInternalServerError, "the answer does not encode: "+err.Error())
		return
	}
	status := http.StatusOK
	if !a.OK() {
		status = http.StatusUnprocessableEntity
	}
	if asJSON {
		q.W.Header().Set("Content-Type", "application/json")
		q.W.WriteHeader(status)
		q.W.Write(b.Bytes())
		return
	}
	d := toolFormData(t, form)
	d.Answer, d.AnswerJSON = a, b.String()
	v := q.View(t.Name, "tools")
	v.Data = d
	q.Write(status, "tool", v)
}
