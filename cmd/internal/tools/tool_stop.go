package tools

import (
	"context"
	"fmt"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/toolio"
)

// toolStop ends a record's agent (E8, D35, D51): the daemon stops its
// session and writes the record's response, as the node user, and its
// end note, once; then every
// capability of the agent's user is withdrawn. Admin or setup only, on the
// record's node, refused when the agent is not running.
func (n actions) toolStop(ctx context.Context, in *toolio.StopArgs) *node.Answer {
	a := node.NewAnswer(toolio.ToolStop, in.DryRun)
	p, r, err := n.privilegedToolRepo(ctx)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	rec, info, err := n.node.TaskRecord(ctx, r, "record", in.Record)
	if err != nil {
		return a.Stop(err)
	}
	if rec.Node != n.node.Config.User {
		return a.Stop(fmt.Errorf("record: %s is run by node %q, not this node (%q); stop it there", info.Hash, rec.Node, n.node.Config.User))
	}
	key := messages.WorkspaceKey{Login: rec.User, Project: p.Name}
	launch, err := n.recordLaunch(ctx, r, info.Hash, rec.User)
	if err != nil {
		return a.Stop(err)
	}
	v, err := n.node.Naming(key)
	if err != nil {
		return a.Stop(err)
	}
	f := stopFacts{Key: key, User: rec.User, Record: info.Hash, Named: v.Named != host.No}
	plan, err := stopPlan(f, stopRun{n: n, r: r, idx: record.NewIndexAfter(r, n.node.Config.User, info.Receipt-1), record: info.Hash, launch: launch})
	return node.Executed(ctx, a, plan, err)
}

// stopFacts is what a stop read, for stopPlan.
type stopFacts struct {
	Key    messages.WorkspaceKey
	User   string // the agent's user
	Record string // the record's hash
	Named  bool   // a process may name the agent's workspace
}

// stopEffects are the effects a stop's plan runs.
type stopEffects interface {
	// stopSession stops the workspace's session (`session stop`).
	stopSession(ctx context.Context, a *node.Answer, key messages.WorkspaceKey) error
	// awaitEnd waits for the session's end and says its response.
	awaitEnd(ctx context.Context, a *node.Answer, key messages.WorkspaceKey) error
	// withdraw takes every capability from the user (`login withdraw`).
	withdraw(ctx context.Context, a *node.Answer, user string) error
}

// stopPlan is a stop's plan (E8, D51): refused when the agent is not
// running; else its session stopped through the daemon, which writes the
// response and the end note; its end awaited; then every capability of
// its user withdrawn, once no process names its workspace.
func stopPlan(f stopFacts, fx stopEffects) (node.Plan, error) {
	var plan node.Plan
	if !f.Named {
		return plan, fmt.Errorf("record: the agent of %s is not running (no process names workspace %s)", f.Record, f.Key)
	}
	plan.Add(fmt.Sprintf("hand `stop %s %s` to the daemon, which ends the session and writes the response (as %s) and its end note on %s", f.Key.Login, f.Key.Project, f.User, f.Record), func(ctx context.Context, a *node.Answer) error {
		return fx.stopSession(ctx, a, f.Key)
	})
	plan.Add("", func(ctx context.Context, a *node.Answer) error { return fx.awaitEnd(ctx, a, f.Key) })
	plan.Add(fmt.Sprintf("take every capability from %q once the session is gone", f.User), func(ctx context.Context, a *node.Answer) error {
		return fx.withdraw(ctx, a, f.User)
	})
	return plan, nil
}

// stopRun is stopEffects on this node: idx reads what the node received
// since the record, launch is its session's launch note ("" for none).
type stopRun struct {
	n      actions
	r      *fossilio.Repo
	idx    *record.Index
	record string
	launch string
}

func (s stopRun) stopSession(ctx context.Context, a *node.Answer, key messages.WorkspaceKey) error {
	return merged(a, s.n.ws.SessionStop(ctx, key.String(), false))
}

// awaitEnd awaits the end note and no process naming the workspace (the
// user's capabilities go then: LoginWithdraw refuses before), and says
// the response the end note follows.
func (s stopRun) awaitEnd(ctx context.Context, a *node.Answer, key messages.WorkspaceKey) error {
	end, err := s.n.awaitEnd(ctx, s.idx, key, s.launch)
	if err != nil || end == "" {
		return err
	}
	return s.n.logResponse(ctx, a, s.r, s.record, s.launch, end)
}

func (s stopRun) withdraw(ctx context.Context, a *node.Answer, user string) error {
	return merged(a, s.n.node.LoginWithdraw(ctx, user, false))
}

// awaitEnd waits, at most the outcome wait, for the end note of the
// session launch started (none to wait for when launch is "") and for no
// process to name the workspace key; it returns the end note's hash.
func (n actions) awaitEnd(ctx context.Context, idx *record.Index, key messages.WorkspaceKey, launch string) (string, error) {
	deadline := time.Now().Add(n.node.OutcomeWait())
	var end string
	for end == "" {
		if launch != "" {
			ends, err := idx.Replies(ctx, launch)
			if err != nil {
				return "", err
			}
			for _, e := range ends {
				if _, ok := e.Note.(*messages.EndNote); ok {
					end = e.Hash
					break
				}
			}
		}
		v, err := n.node.Naming(key)
		if err != nil {
			return "", err
		}
		if end != "" && v.Named == host.No {
			break
		}
		if launch == "" && v.Named == host.No {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the session of %s did not end within %s; its user keeps its capabilities until it does (stop again)", key, n.node.OutcomeWait())
		}
		end = ""
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return end, nil
}

// logResponse says, in a, the daemon's end note and the response to the
// record before it (D51), the answer's result.
func (n actions) logResponse(ctx context.Context, a *node.Answer, r *fossilio.Repo, recHash, launch, end string) error {
	// The response is the node user's, written by the daemon right
	// before its end note (D51); the answer's result is the response.
	resp, ok, err := record.ResponseOf(ctx, r, recHash, n.node.Config.User, launch, end)
	if err != nil {
		return err
	}
	a.Logf("the daemon's end note %s, written by %q", end, n.node.Config.User)
	if ok {
		a.Logf("the response to %s is %s, written by %q: %s: %s", recHash, resp.Hash, n.node.Config.User, resp.Response.Outcome, resp.Response.Note)
		a.SetResult(resp.Hash)
	} else {
		a.Logf("no response to %s is on the record before the end note", recHash)
		a.SetResult(end)
	}
	return nil
}

// recordLaunch finds the launch note of the record's session: the first in
// its thread that a user holding admin or setup sent for the agent's
// workspace; "" when there is none.
func (n actions) recordLaunch(ctx context.Context, r *fossilio.Repo, recHash, login string) (string, error) {
	posts, err := r.Thread(ctx, recHash)
	if err != nil {
		return "", fmt.Errorf("record: read its thread: %w", err)
	}
	for _, post := range posts {
		if post.Edit {
			continue
		}
		note, err := messages.ReadPost([]byte(post.Text))
		if err != nil {
			continue
		}
		if l, ok := note.(*messages.LaunchNote); ok && l.Login == login {
			if ok, _ := r.Privileged(ctx, post.Sender); ok {
				return post.Hash, nil
			}
		}
	}
	return "", nil
}
