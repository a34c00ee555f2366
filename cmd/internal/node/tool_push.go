package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// toolPush copies the caller's new check-ins from its clone to the node's
// repository as its user, then runs the backoffice (E10, D37). Only an
// agent whose record restricts no_password pushes this way; with branch,
// a check-in on another branch is refused and nothing is pushed.
func (n *Node) toolPush(ctx context.Context, in *messages.PushArgs) *Answer {
	a := newAnswer(messages.ToolPush, in.DryRun)
	p, r, err := n.toolRepo()
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	rec, recHash, ok, err := n.agentRecord(ctx, r, p, n.Caller.Login)
	if err != nil {
		return a.Stop(err)
	}
	if !ok {
		return a.Stop(fmt.Errorf("caller: %q is no agent of a record on %s; push is for an agent whose record restricts no_password", n.Caller.Login, p.Name))
	}
	if !rec.Restrict.NoPassword {
		return a.Stop(fmt.Errorf("caller: record %s does not restrict no_password: its agent pushes with Fossil itself", recHash))
	}
	ws, err := n.workspace(messages.WorkspaceKey{Login: rec.User, Project: p.Name})
	if err != nil {
		return a.Stop(err)
	}
	clone, err := fossilio.OpenClone(ws.Clone, nil)
	if err != nil {
		return a.Stop(fmt.Errorf("open the clone: %w", err))
	}
	defer clone.Close()
	all, err := clone.Checkins(ctx)
	if err != nil {
		return a.Stop(err)
	}
	hashes := make([]string, len(all))
	for i, c := range all {
		hashes[i] = c.Hash
	}
	lacks, err := r.Lacks(ctx, hashes...)
	if err != nil {
		return a.Stop(err)
	}
	if len(lacks) == 0 {
		a.Logf("the clone of %s has no check-in the node lacks: nothing to push", rec.User)
		return a
	}
	byHash := map[string]fossilio.Info{}
	for _, c := range all {
		byHash[c.Hash] = c
	}
	for _, h := range lacks {
		if b := rec.Restrict.Branch; b != "" && byHash[h].Branch != b {
			return a.Stop(fmt.Errorf("checkin %s is on branch %q, not %q (restrict branch of record %s); nothing pushed", h, byHash[h].Branch, b, recHash))
		}
	}
	files, manifests, err := newArtifacts(ctx, clone, r, lacks)
	if err != nil {
		return a.Stop(err)
	}
	for _, h := range lacks {
		a.Would("push check-in %s on branch %q (%s)", h, byHash[h].Branch, firstLine(byHash[h].Comment))
	}
	if in.DryRun {
		a.Would("send %d check-in(s) and %d file(s) to %s as %q, then run the backoffice", len(manifests), len(files), p.Name, n.Caller.Login)
		return a
	}
	code, err := r.ProjectCode(ctx)
	if err != nil {
		return a.Stop(err)
	}
	c := &fossilio.Client{URL: p.URL, Login: n.Caller.Login, Password: n.Caller.Password, Cookie: n.Caller.Cookie, ProjectCode: code, Now: n.Now}
	if _, err := c.PushRaw(ctx, append(files, manifests...)...); err != nil {
		return a.Stop(fmt.Errorf("push to %s: %w", p.Name, err))
	}
	a.Logf("sent %d check-in(s) and %d file(s) to %s as %q", len(manifests), len(files), p.Name, n.Caller.Login)
	a.SetResult(lacks[len(lacks)-1])
	n.backoffice(ctx, a, p)
	return a
}

// newArtifacts reads from the clone the manifests of the check-ins named
// and every file (and baseline) they name that the node lacks, each
// checked against its name.
func newArtifacts(ctx context.Context, clone, node *fossilio.Repo, checkins []string) (files, manifests [][]byte, err error) {
	seen := map[string]bool{}
	var want []string
	for _, h := range checkins {
		_, art, err := clone.Artifact(ctx, h)
		if err != nil {
			return nil, nil, fmt.Errorf("read check-in %s in the clone: %w", h, err)
		}
		if art.Baseline != "" && !seen[art.Baseline] {
			seen[art.Baseline] = true
			want = append(want, art.Baseline)
		}
		for _, f := range art.Files {
			if f.Hash != "" && !seen[f.Hash] {
				seen[f.Hash] = true
				want = append(want, f.Hash)
			}
		}
	}
	lacks, err := node.Lacks(ctx, want...)
	if err != nil {
		return nil, nil, err
	}
	isCheckin := map[string]bool{}
	for _, h := range checkins {
		isCheckin[h] = true
	}
	read := func(h string) ([]byte, error) {
		b, err := clone.Content(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("read %s in the clone: %w", h, err)
		}
		if fossilio.HashOf(b) != h {
			return nil, fmt.Errorf("read %s in the clone: %w: it is not named by its SHA3-256, which push sends", h, errors.ErrUnsupported)
		}
		return b, nil
	}
	for _, h := range lacks {
		if isCheckin[h] {
			continue // a baseline among the new check-ins goes with them
		}
		b, err := read(h)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, b)
	}
	for _, h := range checkins {
		b, err := read(h)
		if err != nil {
			return nil, nil, err
		}
		manifests = append(manifests, b)
	}
	return files, manifests, nil
}
