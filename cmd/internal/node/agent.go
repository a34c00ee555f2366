package node

import (
	"context"
	"fmt"
	"os"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// What the tools and the workspaces read of an agent: its record, the files it may have written.

// ResolveField resolves a hash or prefix a tool was given, naming the field
// in every refusal (fossilio.ResolveField).
func ResolveField(ctx context.Context, r *fossilio.Repo, field, s string) (fossilio.Info, error) {
	return fossilio.ResolveField(ctx, r, field, s)
}

// HashRefusal says why a hash a tool was given names no one artifact,
// naming the field (fossilio.HashRefusal).
func HashRefusal(field, s, project string, err error) error {
	return fossilio.HashRefusal(field, s, project, err)
}

// TaskRecord reads the protocol v1 record a hash names (D35): the first
// post of a thread, holding a record block, sent by a user holding admin
// or setup. field names the input at fault.
func (n *Node) TaskRecord(ctx context.Context, r *fossilio.Repo, field, hash string) (*runmsg.TaskRecord, fossilio.Info, error) {
	info, err := ResolveField(ctx, r, field, hash)
	if err != nil {
		return nil, info, err
	}
	if info.Kind != fossilio.KindPost || info.InReplyTo != "" || info.Edit {
		return nil, info, fmt.Errorf("%s: %s is not a thread's first post, so no record", field, info.Hash)
	}
	post, err := r.Post(ctx, info.Hash)
	if err != nil {
		return nil, info, fmt.Errorf("%s: %w", field, err)
	}
	rec, err := runmsg.ReadTaskRecord([]byte(post.Text))
	if err != nil {
		return nil, info, fmt.Errorf("%s: %s holds no record: %w", field, info.Hash, err)
	}
	ok, err := r.Privileged(ctx, info.Sender)
	if err != nil {
		return nil, info, fmt.Errorf("%s: %w", field, err)
	}
	if !ok {
		return nil, info, fmt.Errorf("%s: the record %s does not count: its sender %q holds neither admin nor setup (E3)", field, info.Hash, info.Sender)
	}
	return rec, info, nil
}

// AgentRecord finds the record of an agent login on p (D35, D47): the
// protocol v1 record that counts (its sender holds admin or setup, E3)
// whose user is the login and whose node is this one
// (record.FindAgentRecord), read from the node's repository alone: what
// the agent's workspace holds (its listening files, its clone) is the
// agent's to write, and removing a file there lifts no restriction. It is
// the one lookup of the caller's record: post, push and login rotate use
// it. ok is false for a login no record names.
func (n *Node) AgentRecord(ctx context.Context, r *fossilio.Repo, p Project, login string) (rec *runmsg.TaskRecord, hash string, ok bool, err error) {
	if messages.ValidateLogin(login) != nil {
		return nil, "", false, nil
	}
	found, ok, err := record.FindAgentRecord(ctx, r, login, n.Config.User)
	if err != nil || !ok {
		return nil, "", false, err
	}
	return found.Record, found.Hash, true, nil
}

// Running says whether a process may name the workspace k: true when one
// does, or when the process table cannot say that none does.
func (n *Node) Running(k messages.WorkspaceKey) (bool, error) {
	v, err := n.Naming(k)
	if err != nil {
		return false, err
	}
	return v.Named != host.No, nil
}

// OpenAgentFile opens a file below the agents root that an agent may have
// written, in place, with unixhost's Root.OpenRegular (no link, a regular
// file with one name).
func (n *Node) OpenAgentFile(path string, flag int) (*os.File, error) {
	root, err := unixhost.OpenRoot(n.Agents)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.OpenRegular(path, flag)
}
