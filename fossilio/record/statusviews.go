package record

import (
	"context"
	"fmt"

	"github.com/ocx-go/ocx/messages"
)

// What the node's status reads of a project's check-ins: the verdicts on
// them and the reviewers' queues.

// statusVerdictsOf bounds how many check-ins the status reads verdicts
// of: those most recently tagged audited.
const statusVerdictsOf = 50

// StatusVerdicts lists, for the node's status, each user's latest verdict
// that counts (Verdicts: every rule of E6, the audit tool's own) on the
// check-ins of a project most recently tagged audited; a tag that holds
// no verdict, or a verdict that does not count, is passed over and
// logged, once.
func StatusVerdicts(ctx context.Context, idx *Index, project string, passed *PassedLog) ([]messages.VerdictStatus, error) {
	r := idx.Repo()
	tagged, err := r.Tagged(ctx, messages.AuditedTag, statusVerdictsOf)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	var out []messages.VerdictStatus
	for _, h := range tagged {
		ci, err := r.Info(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		kept, bad, err := idx.ReadVerdicts(ctx, ci)
		if err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		for _, b := range bad {
			passed.Note(b.Tag, b.Line())
		}
		for _, v := range kept {
			word := messages.VerdictFail
			if v.Pass {
				word = messages.VerdictPass
			}
			out = append(out, messages.VerdictStatus{Project: project, Checkin: h, Branch: ci.Branch, User: v.User,
				Verdict: word, Reason: v.Reason, Against: v.Against, Tag: v.Tag})
		}
	}
	return out, nil
}

// Reviews lists, for the node's status, each reviewer's queue on a
// project (D42): every branch listener whose session definition's result
// is verdict, with the check-ins on its branch that wait for its verdict,
// derived by the rule the daemon launches by (Queue).
func Reviews(ctx context.Context, idx *Index, project string) ([]messages.ReviewStatus, error) {
	ls, err := idx.Listeners(ctx)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	var out []messages.ReviewStatus
	for _, l := range ls {
		if !l.On || l.Listener.Kind != messages.ListenBranch {
			continue
		}
		key := l.Listener.Key()
		_, def, err := idx.NewestDefinitions(ctx, key, l.Entry.Record)
		if err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		if def == nil || def.Note.(*messages.SessionDefinition).Result != messages.ResultVerdict {
			continue
		}
		qs, err := Queue(ctx, idx.Repo(), messages.ResultVerdict, key.Login, l.Listener.Names, l.Entry.Hash)
		if err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		r := messages.ReviewStatus{Project: project, Login: key.Login, Branch: l.Listener.Names, Record: l.Entry.Record, Pending: []string{}}
		for _, q := range qs {
			switch {
			case q.Skip != "":
				r.Skipped++
			case q.Waits:
				r.Pending = append(r.Pending, q.Checkin)
			}
		}
		out = append(out, r)
	}
	return out, nil
}
