package record

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// Verdict is the record's word on a post the daemon was handed (D7): launch
// Spec; or nothing to launch (Nothing says what it is); or a launch note to
// Ignore (its sender does not count: logged only, never answered, since a
// note for that would let anyone make the node write); or one to Refuse (its
// sender counts, so a refusal note on the record says why).
type Verdict struct {
	Spec    *protocol.LaunchSpec
	Nothing string
	Ignore  string
	Refuse  *protocol.LaunchRefused
}

// LaunchVerdict says what the post or ticket change e means to the daemon.
// The spec it launches names the record and the definitions; the release
// directory is for the daemon to resolve. A launch on a protocol v1 record
// whose agent has had its run is refused (OneRun, D76).
func (x *Index) LaunchVerdict(ctx context.Context, e Entry) (Verdict, error) {
	v, err := x.Described(ctx, e)
	if err != nil || v.Spec == nil || v.Spec.IsCI() {
		return v, err
	}
	n := e.Note.(*messages.LaunchNote)
	why, err := x.OneRun(ctx, v.Spec.Workspace, e.Record, &e)
	if err != nil || why == "" {
		return v, err
	}
	return x.refuse(ctx, e, n.Login, why), nil
}

// Described is LaunchVerdict without D76's rule: what a launch note
// describes, for a session that runs already (a process found at start
// serves it) or ran, whose launch is not being decided.
func (x *Index) Described(ctx context.Context, e Entry) (Verdict, error) {
	n, isLaunch := e.Note.(*messages.LaunchNote)
	if !isLaunch {
		if c, meant := launchClaim(e); meant {
			return x.refuse(ctx, e, c.Login, fmt.Sprintf("post %s does not read as one launch note: %v", fossilio.Short(e.Hash), e.Err)), nil
		}
		what := "a post"
		if e.Ticket {
			what = "a ticket change"
		}
		if e.Note != nil {
			return Verdict{Nothing: fmt.Sprintf("%s holding a %s note", what, e.Note.NoteKind())}, nil
		}
		return Verdict{Nothing: what + " that is not a launch note"}, nil
	}
	return x.resolve(ctx, e, n)
}

// launchClaim is the launch a post that does not read as one note was
// meant as: its first block that says it is a launch note.
func launchClaim(e Entry) (messages.Claim, bool) {
	if e.Err == nil {
		return messages.Claim{}, false
	}
	for _, c := range e.Claims {
		if c.Kind == messages.KindLaunch {
			return c, true
		}
	}
	return messages.Claim{}, false
}

// counts says whether a launch note's sender counts: a user holding admin
// or setup, or the node user (a CI launch, D5).
func (x *Index) counts(ctx context.Context, e Entry) bool {
	return e.Sender != "" && (e.Sender == x.nodeUser || x.Privileged(ctx, e.Sender))
}

// refuse is the verdict on a launch note that cannot be launched: a refusal
// when its sender counts, else ignored with the reason.
func (x *Index) refuse(ctx context.Context, e Entry, login, reason string) Verdict {
	if !x.counts(ctx, e) {
		return Verdict{Ignore: fmt.Sprintf("launch note %s was sent by %q, who holds neither admin nor setup and is not the node user (D7), and would be refused anyway: %s", fossilio.Short(e.Hash), e.Sender, reason)}
	}
	if messages.ValidateLogin(login) != nil {
		login = ""
	}
	return Verdict{Refuse: &protocol.LaunchRefused{Hash: e.Hash, Repository: x.repo.Path(),
		Workspace: messages.WorkspaceKey{Login: login, Project: x.repo.ProjectName()}, Reason: reason}}
}

// resolve reads what a launch note names: the session definition on the
// same record, the workspace definition (both sent by a user holding admin
// or setup, D7), the sandbox, and for a CI launch its check-in's branch.
func (x *Index) resolve(ctx context.Context, e Entry, n *messages.LaunchNote) (Verdict, error) {
	if !x.counts(ctx, e) {
		return Verdict{Ignore: fmt.Sprintf("launch note %s was sent by %q, who holds neither admin nor setup and is not the node user (D7)", e.Hash, e.Sender)}, nil
	}
	refuse := func(format string, args ...any) (Verdict, error) {
		return x.refuse(ctx, e, n.Login, fmt.Sprintf(format, args...)), nil
	}
	project := x.repo.ProjectName()
	if n.Project != project {
		return refuse("launch note %s names project %q but is in the repository of %q", fossilio.Short(e.Hash), n.Project, project)
	}
	if err := x.Refresh(ctx); err != nil {
		return Verdict{}, err
	}
	sd, err := x.definition(ctx, n.Session)
	if err != nil {
		return refuse("its session definition %s: %v", fossilio.Short(n.Session), err)
	}
	def, ok := sd.Note.(*messages.SessionDefinition)
	switch {
	case !ok:
		return refuse("%s, named as its session definition, holds a %s note, not a session definition", fossilio.Short(n.Session), sd.Note.NoteKind())
	case sd.Record != e.Record || sd.Ticket != e.Ticket:
		return refuse("its session definition %s is not on the launch's record %s", fossilio.Short(n.Session), fossilio.Short(e.Record))
	case !x.Privileged(ctx, sd.Sender):
		return refuse("its session definition %s was sent by %q, who holds neither admin nor setup, so it does not count (D7)", fossilio.Short(n.Session), sd.Sender)
	}
	wd, err := x.definition(ctx, n.Workspace)
	if err != nil {
		return refuse("its workspace definition %s: %v", fossilio.Short(n.Workspace), err)
	}
	wdef, ok := wd.Note.(*messages.WorkspaceDefinition)
	switch {
	case !ok:
		return refuse("%s, named as its workspace definition, holds a %s note, not a workspace definition", fossilio.Short(n.Workspace), wd.Note.NoteKind())
	case !wd.First():
		return refuse("its workspace definition %s is not the first post of its thread, where a workspace definition is", fossilio.Short(n.Workspace))
	case wdef.Key() != n.Key():
		return refuse("it is for %s, but the workspace definition %s defines %s", n.Key(), fossilio.Short(n.Workspace), wdef.Key())
	case !x.Privileged(ctx, wd.Sender):
		return refuse("its workspace definition %s was sent by %q, who holds neither admin nor setup, so it does not count (D7)", fossilio.Short(n.Workspace), wd.Sender)
	}
	if t, err := x.TerminatedAfter(ctx, wd); err != nil {
		return Verdict{}, err
	} else if t != "" {
		return refuse("workspace %s was terminated (%s)", n.Key(), fossilio.Short(t))
	}
	sandbox, err := json.Marshal(wdef.Sandbox)
	if err != nil {
		return Verdict{}, fmt.Errorf("launch note %s: encode the sandbox: %w", e.Hash, err)
	}
	l := protocol.LaunchSpec{Hash: e.Hash, Repository: x.repo.Path(), Workspace: n.Key(), Record: e.Record,
		Kind: def.Kind, Runner: def.Runner, Model: def.Model, Lifetime: def.Lifetime, Release: n.Release, Sandbox: sandbox, Hears: def.Hears, Checkins: def.Checkins, Wall: def.Wall(), Tokens: def.Tokens(), Disk: def.Disk()}
	if n.Checkin != "" {
		ci, err := x.repo.Info(ctx, n.Checkin)
		if err != nil || ci.Kind != fossilio.KindCheckin {
			return refuse("%s is not a check-in of %s", fossilio.Short(n.Checkin), project)
		}
		l.Checkin, l.Branch, l.Result = ci.Hash, ci.Branch, def.Result
	}
	if err := l.Validate(); err != nil {
		return refuse("%v", err)
	}
	return Verdict{Spec: &l}, nil
}
