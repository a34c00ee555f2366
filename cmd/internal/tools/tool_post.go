package tools

import (
	"context"
	"fmt"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages/toolio"
)

// toolPost replies to a post as the caller (E8). An agent whose record
// restricts own_thread posts only in its record's thread (E10).
func (n actions) toolPost(ctx context.Context, in *toolio.PostArgs) *node.Answer {
	a := node.NewAnswer(toolio.ToolPost, in.DryRun)
	p, r, err := n.toolRepo()
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	info, err := node.ResolveField(ctx, r, "to", in.To)
	if err != nil {
		return a.Stop(err)
	}
	if info.Kind != fossilio.KindPost {
		return a.Stop(fmt.Errorf("to: %s is a %s, not a forum post", info.Hash, info.Kind))
	}
	if rec, hash, ok, err := n.node.AgentRecord(ctx, r, p, n.node.Caller.Login); err != nil {
		return a.Stop(err)
	} else if ok && rec.Restrict.OwnThread {
		if info.Root != hash {
			return a.Stop(fmt.Errorf("to: %s is in thread %s, outside the thread of record %s (restrict own_thread)", info.Hash, info.Root, hash))
		}
		a.Logf("%s is in the record's own thread (restrict own_thread)", info.Hash)
	}
	sub := n.node.Post(ctx, node.PostInput{Project: p.Name, To: info.Hash, Text: in.Text, DryRun: in.DryRun})
	merge(a, sub)
	return a
}
