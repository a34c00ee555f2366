package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/tools"
)

// The run patterns (seed 004, sections 5 and 14; D84) as the console
// offers them: /patterns lists the wiki pages run/NAME an admin or setup
// user last sent, /pattern/NAME shows one with its form, and the form's
// button is the run tool's post from that pattern as the viewer (D30),
// the run written in full, showing the one answer: a dry run by default,
// whose log holds the run in full.

type patternsData struct {
	Patterns []tools.RunPatternInfo
}

type patternData struct {
	Pattern tools.RunPatternInfo
	// Objective and Fields are the form's, filled in again after a press.
	Objective, Fields string
	// Answer is the press's answer; nil before.
	Answer *node.Answer
}

func (q *request) patternsPage() {
	ps, err := tools.Of(q.n).RunPatterns(q.Ctx, q.Project)
	q.RenderProblem("patterns", "Run patterns", "patterns", patternsData{Patterns: ps}, err)
}

// patternOf is the pattern name as the list gives it, or false with the
// page answered 404.
func (q *request) patternOf(name string) (tools.RunPatternInfo, bool) {
	ps, err := tools.Of(q.n).RunPatterns(q.Ctx, q.Project)
	if err != nil {
		q.Plain(http.StatusInternalServerError, "the console cannot read the patterns: "+err.Error())
		return tools.RunPatternInfo{}, false
	}
	for _, p := range ps {
		if p.Name == name {
			return p, true
		}
	}
	q.Plain(http.StatusNotFound, "no pattern "+name+": no user holding admin or setup wrote the wiki page run/"+name)
	return tools.RunPatternInfo{}, false
}

func (q *request) patternPage(name string) {
	p, ok := q.patternOf(name)
	if !ok {
		return
	}
	q.Render("pattern", "Run pattern "+p.Name, "patterns", patternData{Pattern: p})
}

// patternPost is a pattern's button (checkPost passed): the run tool's
// post from the pattern, as the viewer, on this repository's project; 422
// when it stopped, as every button's answer.
func (q *request) patternPost(name string, form url.Values) {
	p, ok := q.patternOf(name)
	if !ok {
		return
	}
	d := patternData{Pattern: p, Objective: form.Get("objective"), Fields: form.Get("fields")}
	in := tools.RunInput{Project: q.Project, Pattern: p.Name, Objective: strings.TrimSpace(d.Objective),
		Message: []byte(d.Fields), DryRun: form.Get("dry_run") != ""}
	a := tools.Of(q.n).RunPost(q.Ctx, in)
	d.Answer = a
	status := http.StatusOK
	if !a.OK() {
		status = http.StatusUnprocessableEntity
	}
	v := q.View("run post", "patterns")
	v.Data = d
	q.Write(status, "pattern", v)
}
