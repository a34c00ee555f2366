package daemon

import (
	"context"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/host/usage"
	"github.com/ocx-go/ocx/messages"
)

// usageReader reads a session's use of the node at its end (D50): the
// node's count of its model, which its model proxy wrote outside the
// sandbox, and its own account of its turns, which its sandbox wrote
// (believed of that session alone), both through the bounded reader.
type usageReader struct {
	layout host.Layout
	root   *unixhost.Root
}

// Read is actors.Usage's.
func (u usageReader) Read(_ context.Context, w messages.WorkspaceKey, launch string) (*messages.SessionUsage, string, error) {
	ws, err := u.layout.Workspace(w)
	if err != nil {
		return nil, "", err
	}
	return usage.Read(u.root, ws, launch)
}
