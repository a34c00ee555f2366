package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/release"
	"github.com/ocx-go/ocx/messages"
)

// The Releases page (seed 002, "accept a release", "roll back a release";
// docs/releases.md, D34): the release root's current, previous and staged
// releases, the daemon and its last re-exec, and the sessions on a release
// older than current. Accept and Roll back are each two presses: a dry run
// listing the checks and the links it would change, then Confirm carrying
// the check-in it showed.

// releasesData is what the Releases page shows.
type releasesData struct {
	State *release.State
	// Older are the sessions of this project on a release older than
	// current.
	Older []messages.SessionStatus
}

func (q *request) releasesPage() {
	st, err := release.Status(q.Ctx, q.n)
	d := releasesData{State: st}
	if st != nil {
		for _, s := range st.Older {
			if s.Project == q.Project {
				d.Older = append(d.Older, s)
			}
		}
	}
	q.RenderProblem("releases", "Releases", "releases", d, err)
}

// releaseConfirmData is the list the first press of Accept or Roll back
// shows: the dry run's answer, and what its Confirm button carries.
type releaseConfirmData struct {
	// Action is "accept" or "rollback", the path below /releases/.
	Action string
	Answer *node.Answer
	// Checkin is the release the confirmed action makes current (the dry
	// run's result).
	Checkin string
}

// releaseDryRun is the first press of Accept or Roll back: the host checks
// and the links the action would change, written nowhere, with a Confirm
// button carrying the check-in it would make current.
func (q *request) releaseDryRun(action string, form url.Values) {
	var a *node.Answer
	switch action {
	case "accept":
		a = release.Accept(q.Ctx, q.n, release.AcceptInput{Checkin: strings.TrimSpace(form.Get("checkin")), DryRun: true})
	default:
		a = release.Rollback(q.Ctx, q.n, release.RollbackInput{DryRun: true})
	}
	d := releaseConfirmData{Action: action, Answer: a}
	if a.Result != nil {
		d.Checkin = *a.Result
	}
	title := "accept a release"
	if action == "rollback" {
		title = "roll back"
	}
	v := q.View(title, "releases")
	v.Data = d
	status := http.StatusOK
	if !a.OK() {
		status = http.StatusUnprocessableEntity
	}
	q.Write(status, "release-confirm", v)
}

// releaseConfirm is the Confirm of Accept or Roll back: it acts on exactly
// the check-in the dry run showed (an accept names it; a rollback is
// refused when previous names another by then).
func (q *request) releaseConfirm(action string, form url.Values) (*node.Answer, string) {
	checkin := strings.TrimSpace(form.Get("checkin"))
	if checkin == "" {
		tool := "release " + action
		return (&node.Answer{Tool: tool, Log: []string{}}).Stop(fmt.Errorf("%s: the Confirm carries no check-in: nothing was changed; press the button again", tool)), "/releases"
	}
	if action == "accept" {
		return release.Accept(q.Ctx, q.n, release.AcceptInput{Checkin: checkin}), "/releases"
	}
	return release.Rollback(q.Ctx, q.n, release.RollbackInput{Checkin: checkin}), "/releases"
}
