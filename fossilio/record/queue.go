package record

import (
	"context"
	"fmt"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// RunResult is the result login left on check-in ci for a run of kind
// (decisions D5, D42), from the tag history changes: for ci, the value of
// its latest `ci` tag change, a cancel being none; for a verdict, its
// latest verdict as SentVerdicts reads it (none when login may not judge
// ci), as the audited tag's value. Whether it counts is the readers' to
// ask (Verdicts): a reviewer's verdict names its own record, which lists
// the branch it was launched for.
func RunResult(kind messages.ResultKind, login string, ci fossilio.Info, changes []fossilio.TagChange) (string, bool) {
	if kind.Or() == messages.ResultVerdict {
		if MayNotJudge(login, ci) != "" {
			return "", false
		}
		sent, _ := sentVerdicts(changes)
		for _, v := range sent {
			if v.User == login {
				return v.TagValue(), true
			}
		}
		return "", false
	}
	t, found := fossilio.LatestTag(changes, messages.CITagName, login)
	if !found || t.Op == fossilio.TagCancel {
		return "", false
	}
	return t.Value, true
}

// MayNotJudge says why login may never leave a verdict on ci (seed 001 E6:
// nobody judges their own check-in), or "" when it may. Whose check-in it
// is the node's receipt says (its sender), never its U card: anyone who
// may push writes any name there (`fossil commit --user-override`), and a
// rule reading it would let anyone take any check-in from any reviewer
// (E2, D47). It is the audit tool's rule, read the same way.
func MayNotJudge(login string, ci fossilio.Info) string {
	if login == ci.Sender {
		return fmt.Sprintf("sent by %q, the reviewer: nobody judges their own check-in (E6)", login)
	}
	return ""
}

// queued is where one check-in stands for a branch listener: waiting for its
// run, or skipped for good (Skip says why), or neither (it has its result).
type queued struct {
	Checkin string
	Waits   bool
	Skip    string
}

// queueOf decides, for one check-in on the listened branch and its tag
// history, whether it waits for login's run of kind (a pure function): a
// reviewer's own check-in is skipped; any other waits until it carries
// login's result.
func queueOf(kind messages.ResultKind, login string, ci fossilio.Info, changes []fossilio.TagChange) queued {
	q := queued{Checkin: ci.Hash}
	if kind.Or() == messages.ResultVerdict {
		if why := MayNotJudge(login, ci); why != "" {
			q.Skip = why
			return q
		}
	}
	_, found := RunResult(kind, login, ci, changes)
	q.Waits = !found
	return q
}

// Queue derives a branch listener's queue from the repository (D5, D42):
// each check-in on branch received after the listen note after, in the
// server's order, with where it stands. Nothing is stored for it: a result
// on a check-in is what takes it out.
func Queue(ctx context.Context, r *fossilio.Repo, kind messages.ResultKind, login, branch, after string) ([]queued, error) {
	cs, err := r.CheckinsOnBranch(ctx, branch, after)
	if err != nil {
		return nil, fmt.Errorf("list the check-ins on %q after %s: %w", branch, after, err)
	}
	out := make([]queued, 0, len(cs))
	for _, ci := range cs {
		changes, err := r.CheckinTags(ctx, ci.Hash)
		if err != nil {
			return nil, fmt.Errorf("read the tags of %s: %w", ci.Hash, err)
		}
		out = append(out, queueOf(kind, login, ci, changes))
	}
	return out, nil
}
