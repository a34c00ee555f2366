package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/toolio"
)

// toolAudit records a verdict (E6, D37): the audited tag on a check-in, as
// the caller, who may check in and did not send the check-in (its U card
// proves nothing, D47); against a record that counts and lists the
// check-in's branch, or a file of the check-in.
func (n actions) toolAudit(ctx context.Context, in *toolio.AuditArgs) *node.Answer {
	a := node.NewAnswer(toolio.ToolAudit, in.DryRun)
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
	f := auditFacts{Checkin: ci.Hash, Value: verdict.TagValue(), Caller: n.node.Caller.Login, Project: p.Name}
	return node.Executed(ctx, a, auditPlan(f, auditRun{n: n, r: r, p: p}), nil)
}

// auditFacts is what an audit checked, for auditPlan.
type auditFacts struct {
	Checkin, Value, Caller, Project string
}

// auditEffects are the effects an audit's plan runs.
type auditEffects interface {
	// tag tags a check-in as the caller and returns the tag's hash, or
	// why it could not.
	tag(ctx context.Context, checkin, name, value string) (string, error)
	backoffice(ctx context.Context, a *node.Answer)
}

// auditPlan is an audit's plan (E6): the audited tag on the check-in, as
// the caller, then the backoffice once it is written.
func auditPlan(f auditFacts, fx auditEffects) node.Plan {
	var plan node.Plan
	plan.Add(fmt.Sprintf("tag %s %s=%q as %q on %s", f.Checkin, messages.AuditedTag, f.Value, f.Caller, f.Project), func(ctx context.Context, a *node.Answer) error {
		hash, err := fx.tag(ctx, f.Checkin, messages.AuditedTag, f.Value)
		if err != nil {
			return err
		}
		a.Logf("tagged %s %s=%q as %q: %s", f.Checkin, messages.AuditedTag, f.Value, f.Caller, hash)
		a.SetResult(hash)
		fx.backoffice(ctx, a)
		return nil
	})
	return plan
}

// auditRun is auditEffects on this node.
type auditRun struct {
	n actions
	r *fossilio.Repo
	p node.Project
}

func (u auditRun) tag(ctx context.Context, checkin, name, value string) (string, error) {
	code, err := u.r.ProjectCode(ctx)
	if err != nil {
		return "", err
	}
	c := u.n.node.Caller
	cl := &fossilio.Client{URL: u.p.URL, Login: c.Login, Password: c.Password, Cookie: c.Cookie, ProjectCode: code, Now: u.n.node.Now}
	hash, err := cl.Tag(ctx, checkin, name, value)
	if err != nil {
		return "", fmt.Errorf("tag %s: %w", checkin, err)
	}
	return hash, nil
}

func (u auditRun) backoffice(ctx context.Context, a *node.Answer) { u.n.node.Backoffice(ctx, a, u.p) }
