package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// Tool is one protocol v1 tool (seed 001 E8) as every front end offers it:
// the command line (`ocx tool`), the console and MCP list the same tools
// and call them through Node.Call (D36).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"` // docs/design/tool-NAME.schema.json
}

var toolDescriptions = map[string]string{
	messages.ToolCreate: "Make an agent: its user, its workspace and its record (a new thread), and start its session. Admin or setup only.",
	messages.ToolPost:   "Reply to a forum post, as the caller.",
	messages.ToolAudit:  "Record a verdict on a check-in: the audited tag, pass: or fail:, the reason, and what it was judged against. Never on your own check-in.",
	messages.ToolPush:   "Copy your new check-ins from your clone to the node's repository, as your user, and run the hook. Only for an agent whose record restricts no_password.",
	messages.ToolStop:   "End a record's agent: the node writes its response and withdraws its user's capabilities. Admin or setup only.",
}

// Tools lists the tools in seed 001's order, each with its input schema.
func Tools() []Tool {
	out := make([]Tool, 0, len(messages.ToolNames))
	for _, name := range messages.ToolNames {
		out = append(out, Tool{Name: name, Description: toolDescriptions[name], InputSchema: design.ToolSchema(name)})
	}
	return out
}

// Call runs the tool name with its JSON input as caller, a login the front
// end authenticated (never a field of the input), on the node's one
// project, and returns the tool's one answer shape whatever happens: an
// input that does not decode stops the answer with the decoder's error,
// naming the field at fault.
func (n *Node) Call(ctx context.Context, caller Caller, name string, input json.RawMessage) *Answer {
	return n.CallIn(ctx, "", caller, name, input)
}

// CallIn is Call on the named project of the node ("" for its one
// project): a front end that knows the caller's project (a session's)
// names it.
func (n *Node) CallIn(ctx context.Context, project string, caller Caller, name string, input json.RawMessage) *Answer {
	args, err := messages.DecodeTool(name, input)
	if err != nil {
		return newAnswer(name, messages.ToolDryRun(input)).Stop(err)
	}
	c := *n
	c.Caller = caller
	c.toolProject = project
	switch a := args.(type) {
	case *messages.CreateArgs:
		return c.toolCreate(ctx, a)
	case *messages.PostArgs:
		return c.toolPost(ctx, a)
	case *messages.AuditArgs:
		return c.toolAudit(ctx, a)
	case *messages.PushArgs:
		return c.toolPush(ctx, a)
	case *messages.StopArgs:
		return c.toolStop(ctx, a)
	}
	return newAnswer(name, args.Dry()).Stop(fmt.Errorf("tool %q has no action", name))
}

// AgentCaller is an agent login as a caller: its password the one the node
// keeps for it. A front end that authenticated a session (MCP) calls the
// tools as the session's agent with it.
func (n *Node) AgentCaller(login string) (Caller, error) {
	if err := n.checkAgentLogin(login); err != nil {
		return Caller{}, err
	}
	path, err := n.Layout.Password(login)
	if err != nil {
		return Caller{}, err
	}
	pw, err := fossilio.ReadPasswordFrom(unixhost.Below(n.Agents), path)
	if err != nil {
		return Caller{}, err
	}
	return Caller{Login: login, Password: pw}, nil
}

// toolRepo opens the node's one project for a tool, after checking that a
// caller was given.
func (n *Node) toolRepo() (project, *fossilio.Repo, error) {
	if err := n.requireCaller(); err != nil {
		return project{}, nil, err
	}
	p, err := n.defaultProject(n.toolProject)
	if err != nil {
		return project{}, nil, err
	}
	r, err := n.openRepo(p)
	if err != nil {
		return project{}, nil, err
	}
	return p, r, nil
}

// privilegedToolRepo is toolRepo for a caller holding admin or setup on the
// project: create's and stop's.
func (n *Node) privilegedToolRepo(ctx context.Context) (project, *fossilio.Repo, error) {
	p, r, err := n.toolRepo()
	if err != nil {
		return project{}, nil, err
	}
	if err := n.requirePrivileged(ctx, r, p); err != nil {
		r.Close()
		return project{}, nil, err
	}
	return p, r, nil
}

// resolveField resolves a hash or prefix a tool was given, naming the field
// in every refusal: no artifact, several (with their names), or not a hash.
func resolveField(ctx context.Context, r *fossilio.Repo, field, s string) (fossilio.Info, error) {
	info, err := r.Info(ctx, s)
	if err != nil {
		return info, hashRefusal(field, s, r.ProjectName(), err)
	}
	return info, nil
}

// hashRefusal says why a hash a tool was given names no one artifact,
// naming the field: none, several (with their names), or not a hash.
func hashRefusal(field, s, project string, err error) error {
	var he *fossilio.HashError
	switch {
	case errors.Is(err, fossilio.ErrAmbiguous) && errors.As(err, &he):
		return fmt.Errorf("%s: %q names several artifacts (%s); give more of its digits", field, s, strings.Join(he.Matches, ", "))
	case errors.Is(err, fossilio.ErrNotFound):
		return fmt.Errorf("%s: %q names no artifact of %s", field, s, project)
	}
	return fmt.Errorf("%s: %w", field, err)
}

// taskRecord reads the protocol v1 record a hash names (D35): the first
// post of a thread, holding a record block, sent by a user holding admin
// or setup. field names the input at fault.
func (n *Node) taskRecord(ctx context.Context, r *fossilio.Repo, field, hash string) (*messages.TaskRecord, fossilio.Info, error) {
	info, err := resolveField(ctx, r, field, hash)
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
	rec, err := messages.ReadTaskRecord([]byte(post.Text))
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

// agentRecord finds the record of an agent login on p (D35, D47): the
// protocol v1 record that counts (its sender holds admin or setup, E3)
// whose user is the login and whose node is this one
// (record.FindAgentRecord), read from the node's repository alone: what
// the agent's workspace holds (its listening files, its clone) is the
// agent's to write, and removing a file there lifts no restriction. It is
// the one lookup of the caller's record: post, push and login rotate use
// it. ok is false for a login no record names.
func (n *Node) agentRecord(ctx context.Context, r *fossilio.Repo, p project, login string) (rec *messages.TaskRecord, hash string, ok bool, err error) {
	if messages.ValidateLogin(login) != nil {
		return nil, "", false, nil
	}
	found, ok, err := record.FindAgentRecord(ctx, r, login, n.Config.User)
	if err != nil || !ok {
		return nil, "", false, err
	}
	return found.Record, found.Hash, true, nil
}

// merge adds a sub-action's log to a and says whether it did its work; if
// not, a stops with its reason.
func (a *Answer) merge(sub *Answer) bool {
	a.Log = append(a.Log, sub.Log...)
	if sub.Result != nil && a.Result == nil {
		a.Result = sub.Result
	}
	if !sub.OK() {
		a.Stopped = sub.Stopped
		return false
	}
	return true
}

// Running says whether a process may name the workspace k: true when one
// does, or when the process table cannot say that none does.
func (n *Node) Running(k messages.WorkspaceKey) (bool, error) {
	v, err := n.naming(k)
	if err != nil {
		return false, err
	}
	return v.Named != host.No, nil
}
