package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
)

// toolAudit records a verdict (E6, D37): the audited tag on a check-in, as
// the caller, who may check in and did not send the check-in (its U card
// proves nothing, D47); against a record that counts and lists the
// check-in's branch, or a file of the check-in.
func (n Actions) toolAudit(ctx context.Context, in *messages.AuditArgs) *node.Answer {
	a := node.NewAnswer(messages.ToolAudit, in.DryRun)
	p, r, err := n.toolRepo()
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	ci, err := node.ResolveField(ctx, r, "checkin", in.Checkin)
	if err != nil {
		return a.Stop(err)
	}
	if ci.Kind != fossilio.KindCheckin {
		return a.Stop(fmt.Errorf("checkin: %s is a %s, not a check-in", ci.Hash, ci.Kind))
	}
	ok, caps, err := n.CallerPrivileged(ctx, r, p)
	if err != nil {
		return a.Stop(fmt.Errorf("caller: %w", err))
	}
	if !ok && !strings.Contains(caps, "i") {
		return a.Stop(fmt.Errorf("caller: %q may not check in on %s (capabilities %q), so may not audit (E8)", n.Caller.Login, p.Name, caps))
	}
	// Whose check-in it is the node's receipt says, never its U card,
	// which anyone who may push writes (record.MayNotJudge, D47).
	if record.MayNotJudge(n.Caller.Login, ci) != "" {
		return a.Stop(fmt.Errorf("checkin: %s was sent by %q, the caller: nobody audits their own check-in (E6)", ci.Hash, ci.Sender))
	}
	against := in.Against
	if messages.AgainstRecord(in.Against) {
		rec, info, err := n.TaskRecord(ctx, r, "against", in.Against)
		if err != nil {
			return a.Stop(err)
		}
		if !slices.Contains(rec.Checkins, ci.Branch) {
			return a.Stop(fmt.Errorf("against: record %s does not list the check-in's branch %q in its checkins (%s)", info.Hash, ci.Branch, strings.Join(rec.Checkins, ", ")))
		}
		against = info.Hash
	} else {
		has, err := checkinHasFile(ctx, r, ci.Hash, in.Against)
		if err != nil {
			return a.Stop(fmt.Errorf("against: %w", err))
		}
		if !has {
			return a.Stop(fmt.Errorf("against: check-in %s has no file %q", ci.Hash, in.Against))
		}
	}
	value := messages.Verdict{Pass: in.Verdict == messages.VerdictPass, Reason: in.Reason, Against: against}.TagValue()
	if in.DryRun {
		a.Would("tag %s %s=%q as %q on %s", ci.Hash, messages.AuditedTag, value, n.Caller.Login, p.Name)
		return a
	}
	code, err := r.ProjectCode(ctx)
	if err != nil {
		return a.Stop(err)
	}
	c := &fossilio.Client{URL: p.URL, Login: n.Caller.Login, Password: n.Caller.Password, Cookie: n.Caller.Cookie, ProjectCode: code, Now: n.Now}
	hash, err := c.Tag(ctx, ci.Hash, messages.AuditedTag, value)
	if err != nil {
		return a.Stop(fmt.Errorf("tag %s: %w", ci.Hash, err))
	}
	a.Logf("tagged %s %s=%q as %q: %s", ci.Hash, messages.AuditedTag, value, n.Caller.Login, hash)
	a.SetResult(hash)
	n.Backoffice(ctx, a, p)
	return a
}

// checkinHasFile says whether a check-in holds a file at name, reading its
// manifest and, for a delta manifest, its baseline.
func checkinHasFile(ctx context.Context, r *fossilio.Repo, checkin, name string) (bool, error) {
	_, art, err := r.Artifact(ctx, checkin)
	if err != nil {
		return false, err
	}
	for _, f := range art.Files {
		if f.Name == name {
			return f.Hash != "", nil
		}
	}
	if art.Baseline == "" {
		return false, nil
	}
	_, base, err := r.Artifact(ctx, art.Baseline)
	if err != nil {
		return false, err
	}
	for _, f := range base.Files {
		if f.Name == name {
			return true, nil
		}
	}
	return false, nil
}
