package tools

import (
	"context"
	"fmt"
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
	ok, caps, err := n.node.CallerPrivileged(ctx, r, p)
	if err != nil {
		return a.Stop(fmt.Errorf("caller: %w", err))
	}
	if !ok && !strings.Contains(caps, "i") {
		return a.Stop(fmt.Errorf("caller: %q may not check in on %s (capabilities %q), so may not audit (E8)", n.node.Caller.Login, p.Name, caps))
	}
	// Every rule of E6 a verdict must meet to count, the readers' own
	// (record.VerdictCounts): whose check-in it is the node's receipt
	// says, never its U card (D47); a record named counts and lists the
	// check-in's branch; a file named is in the check-in.
	against := in.Against
	if messages.AgainstRecord(in.Against) {
		info, err := node.ResolveField(ctx, r, "against", in.Against)
		if err != nil {
			return a.Stop(err)
		}
		against = info.Hash
	}
	verdict := messages.Verdict{Pass: in.Verdict == messages.VerdictPass, Reason: in.Reason, Against: against}
	idx := n.node.Index(r)
	x, err := idx.Objective(ctx, ci, against)
	if err != nil {
		return a.Stop(fmt.Errorf("against: %w", err))
	}
	if no := record.VerdictCounts(n.node.Caller.Login, ci, verdict, x); no != nil {
		return a.Stop(no)
	}
	value := verdict.TagValue()
	if in.DryRun {
		a.Would("tag %s %s=%q as %q on %s", ci.Hash, messages.AuditedTag, value, n.node.Caller.Login, p.Name)
		return a
	}
	code, err := r.ProjectCode(ctx)
	if err != nil {
		return a.Stop(err)
	}
	c := &fossilio.Client{URL: p.URL, Login: n.node.Caller.Login, Password: n.node.Caller.Password, Cookie: n.node.Caller.Cookie, ProjectCode: code, Now: n.node.Now}
	hash, err := c.Tag(ctx, ci.Hash, messages.AuditedTag, value)
	if err != nil {
		return a.Stop(fmt.Errorf("tag %s: %w", ci.Hash, err))
	}
	a.Logf("tagged %s %s=%q as %q: %s", ci.Hash, messages.AuditedTag, value, n.node.Caller.Login, hash)
	a.SetResult(hash)
	n.node.Backoffice(ctx, a, p)
	return a
}
