package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/toolio"
)

// Tool is one protocol v1 tool (seed 001 E8) as every front end offers it:
// the command line (`ocx tool`), the console and MCP list the same tools
// and call them through Actions.Call (D36).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"` // docs/design/tool-NAME.schema.json
}

var toolDescriptions = map[string]string{
	toolio.ToolCreate: "Make an agent: its user, its workspace and its record (a new thread), and start its session. Admin or setup only.",
	toolio.ToolPost:   "Reply to a forum post, as the caller.",
	toolio.ToolAudit:  "Record a verdict on a check-in: the audited tag, pass: or fail:, the reason, and what it was judged against. Never on your own check-in.",
	toolio.ToolPush:   "Copy your new check-ins from your clone to the node's repository, as your user, and run the hook. Only for an agent whose record restricts no_password.",
	toolio.ToolStop:   "End a record's agent: the node writes its response and withdraws its user's capabilities. Admin or setup only.",
}

// Tools lists the tools in seed 001's order, each with its input schema.
func Tools() []Tool {
	out := make([]Tool, 0, len(toolio.ToolNames))
	for _, name := range toolio.ToolNames {
		out = append(out, Tool{Name: name, Description: toolDescriptions[name], InputSchema: design.ToolSchema(name)})
	}
	return out
}

// Call runs the tool name with its JSON input as caller, a login the front
// end authenticated (never a field of the input), on the node's one
// project, and returns the tool's one answer shape whatever happens: an
// input that does not decode stops the answer with the decoder's error,
// naming the field at fault.
func (n actions) Call(ctx context.Context, caller node.Caller, name string, input json.RawMessage) *node.Answer {
	return n.CallIn(ctx, "", caller, name, input)
}

// CallIn is Call on the named project of the node ("" for its one
// project): a front end that knows the caller's project (a session's)
// names it.
func (n actions) CallIn(ctx context.Context, project string, caller node.Caller, name string, input json.RawMessage) *node.Answer {
	args, err := toolio.DecodeTool(name, input)
	if err != nil {
		return node.NewAnswer(name, toolio.ToolDryRun(input)).Stop(err)
	}
	nc := *n.node
	nc.Caller = caller
	c := Of(&nc)
	c.project = project
	switch a := args.(type) {
	case *toolio.CreateArgs:
		return c.toolCreate(ctx, a)
	case *toolio.PostArgs:
		return c.toolPost(ctx, a)
	case *toolio.AuditArgs:
		return c.toolAudit(ctx, a)
	case *toolio.PushArgs:
		return c.toolPush(ctx, a)
	case *toolio.StopArgs:
		return c.toolStop(ctx, a)
	}
	return node.NewAnswer(name, args.Dry()).Stop(fmt.Errorf("tool %q has no action", name))
}

// AgentCaller is an agent login as a caller: its password the one the node
// keeps for it. A front end that authenticated a session (MCP) calls the
// tools as the session's agent with it.
func (n actions) AgentCaller(login string) (node.Caller, error) {
	if err := n.node.CheckAgentLogin(login); err != nil {
		return node.Caller{}, err
	}
	path, err := n.node.Layout.Password(login)
	if err != nil {
		return node.Caller{}, err
	}
	pw, err := fossilio.ReadPasswordFrom(unixhost.Below(n.node.Agents), path)
	if err != nil {
		return node.Caller{}, err
	}
	return node.Caller{Login: login, Password: pw}, nil
}

// toolRepo opens the node's one project for a tool, after checking that a
// caller was given.
func (n actions) toolRepo() (node.Project, *fossilio.Repo, error) {
	if err := n.node.RequireCaller(); err != nil {
		return node.Project{}, nil, err
	}
	p, err := n.node.DefaultProject(n.project)
	if err != nil {
		return node.Project{}, nil, err
	}
	r, err := n.node.OpenProjectRepo(p)
	if err != nil {
		return node.Project{}, nil, err
	}
	return p, r, nil
}

// privilegedToolRepo is toolRepo for a caller holding admin or setup on the
// project: create's and stop's.
func (n actions) privilegedToolRepo(ctx context.Context) (node.Project, *fossilio.Repo, error) {
	p, r, err := n.toolRepo()
	if err != nil {
		return node.Project{}, nil, err
	}
	if err := n.node.RequirePrivileged(ctx, r, p); err != nil {
		r.Close()
		return node.Project{}, nil, err
	}
	return p, r, nil
}

// merge adds a sub-action's log to a and says whether it did its work; if
// not, a stops with its reason.
func merge(a, sub *node.Answer) bool {
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

// merged is merge as a plan's step says it: why sub stopped, or nil.
func merged(a, sub *node.Answer) error {
	if merge(a, sub) {
		return nil
	}
	return errors.New(*sub.Stopped)
}
