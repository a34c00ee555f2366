package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/messages"
)

// The buttons that start and restart sessions.

// splitList is a comma-separated list of names.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (q *request) sessionStart(login string, form url.Values) (*node.Answer, string) {
	in := workspaces.SessionStartInput{Workspace: q.KeyOf(login), Kind: form.Get("kind"), Lifetime: form.Get("lifetime")}
	switch in.Kind {
	case string(messages.Mechanical):
		// As `ocx session start --command`: run by /bin/sh -c.
		if c := strings.TrimSpace(form.Get("command")); c != "" {
			in.Command = []string{"/bin/sh", "-c", c}
		}
	case string(messages.LLM):
		in.Runner, in.Model = strings.TrimSpace(form.Get("runner")), strings.TrimSpace(form.Get("model"))
	}
	if h := strings.TrimSpace(form.Get("hears")); h != "" {
		in.Hears = splitList(h)
	}
	return workspaces.Of(q.n).SessionStart(q.Ctx, in), "/session/" + login
}

// restartData is the list a press of "Restart stopped sessions" shows: the
// dry run's answer, and the picks its Confirm button carries.
type restartData struct {
	Release string
	Answer  *node.Answer
	Picks   []string // LOGIN/PROJECT@START, as RestartPick.String
}

// restartList is the first press of "Restart stopped sessions" (seed 002,
// "restart stopped sessions"): a dry run on the chosen release, showing
// which sessions would restart and which are left alone, and why, with a
// Confirm button carrying exactly the ones that would restart. It writes
// nothing.
func (q *request) restartList(form url.Values) {
	release := form.Get("release")
	if release == "" {
		release = messages.ReleaseCurrent
	}
	a := workspaces.Of(q.n).SessionRestart(q.Ctx, workspaces.SessionRestartInput{Release: release, Project: q.Project, DryRun: true})
	d := restartData{Release: release, Answer: a}
	for _, o := range a.Sessions {
		if o.Outcome == node.OutcomeWouldRestart {
			d.Picks = append(d.Picks, o.Pick().String())
		}
	}
	v := q.View("restart stopped sessions", "sessions")
	v.Data = d
	status := http.StatusOK
	if !a.OK() {
		status = http.StatusUnprocessableEntity
	}
	q.Write(status, "restart", v)
}

// restartConfirm is the Confirm of a restart's list: it restarts exactly
// the picks the list showed (SessionRestartInput.Only), none when it
// showed none; a session whose latest start is another by now is left
// alone, saying so.
func (q *request) restartConfirm(form url.Values) (*node.Answer, string) {
	picks := []node.RestartPick{}
	for _, p := range form["pick"] {
		ws, start, _ := strings.Cut(p, "@")
		picks = append(picks, node.RestartPick{Workspace: ws, Start: start})
	}
	return workspaces.Of(q.n).SessionRestart(q.Ctx, workspaces.SessionRestartInput{Release: form.Get("release"), Project: q.Project, Only: picks}), "/sessions"
}
