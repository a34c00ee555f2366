package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/listening"
	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/host/procs"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
	"github.com/ocx-go/ocx/messages/toolio"
)

// remoteOffered says whether runner offers remote control on this node
// (E8's remote, "default: true when the runner offers it"), and when not,
// why, for create's refusal of remote: true (D84). None does: Claude
// Code's Remote Control needs a claude.ai login whose tokens the claude
// process holds, inside the agent's sandbox, and the other runners have
// no remote control at all.
func remoteOffered(runner string) (bool, string) {
	if runner == messages.RunnerClaude {
		return false, "Claude Code's Remote Control (claude remote-control, --remote-control) runs only on a claude.ai login of full scope " +
			"(it refuses an API key, and the inference-only token of claude setup-token), whose OAuth tokens the claude process holds and refreshes itself: " +
			"inside the agent's sandbox, where the agent could read them and act as the person's claude.ai account, " +
			"while this node keeps every credential outside the sandbox (D48, D84)"
	}
	return false, fmt.Sprintf("runner %q has no remote control (D84)", runner)
}

// toolCreate makes an agent (E8, D35): the record as a new thread, the
// agent's user, its workspace in the record's thread, its session started
// on the record. Everything that needs no write is checked first.
func (n actions) toolCreate(ctx context.Context, in *toolio.CreateArgs) *node.Answer {
	a := node.NewAnswer(toolio.ToolCreate, in.DryRun)
	p, r, err := n.privilegedToolRepo(ctx)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	rec, err := n.createRecord(ctx, r, in)
	if err != nil {
		return a.Stop(err)
	}
	block, err := rec.Encode()
	if err != nil {
		return a.Stop(err)
	}
	nw, err := n.createWorkspace(ctx, r, p, rec)
	if err != nil {
		return a.Stop(err)
	}
	if err := procs.RequireOffered(n.node.Release, rec.Runner); err != nil {
		return a.Stop(err) // E9: a runner it does not offer is refused, nothing written
	}
	text := fmt.Sprintf("Record of agent `%s` (%s): %s\n\n%s", rec.User, rec.Runner, node.FirstLine(rec.Objective), block)
	f := createFacts{Caller: n.node.Caller.Login, Project: p.Name, Rec: rec, Text: text, NW: nw}
	return node.Executed(ctx, a, createPlan(f, createRun{n: n, r: r, p: p}), nil)
}

// createRecord is the record create would post: in's fields with the
// node's defaults and choices written out, each checked; nothing written.
func (n actions) createRecord(ctx context.Context, r *fossilio.Repo, in *toolio.CreateArgs) (*runmsg.TaskRecord, error) {
	rec := &runmsg.TaskRecord{User: in.User, Node: n.node.Config.User, Runner: in.Runner, Model: in.Model, Objective: in.Objective,
		Checkins: in.Checkins, Hears: in.Hears, Budget: in.Budget}
	if rec.Runner == "" {
		rec.Runner = messages.RunnerClaude
	}
	if !slices.Contains(messages.Runners, rec.Runner) {
		return nil, fmt.Errorf("runner: %q is not a runner (%s)", rec.Runner, strings.Join(messages.Runners, ", "))
	}
	// The record names its model, written out (D52): one the node offers
	// for the API its runner speaks (model.json's models), or their first.
	mc, err := model.ReadConfig(n.node.Layout)
	if err != nil {
		return nil, fmt.Errorf("model: the node's model configuration: %w", err)
	}
	if rec.Model, err = model.ChooseModel(mc, rec.Runner, in.Model); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	// No network where the runner reaches its model through the node
	// (D79); written out, as every default (E8).
	rec.Sandbox = runmsg.DefaultRecordSandbox(model.DefaultNetwork(mc, rec.Runner))
	offers, why := remoteOffered(rec.Runner)
	switch {
	case in.Remote == nil:
		rec.Remote = offers
	case *in.Remote && !offers:
		return nil, fmt.Errorf("remote: runner %q offers no remote control on this node: %s", rec.Runner, why)
	default:
		rec.Remote = *in.Remote
	}
	if in.Restrict != nil {
		rec.Restrict = *in.Restrict
		for _, name := range rec.Restrict.Names() {
			if !slices.Contains(node.EnforcedRestrictions, name) {
				return nil, fmt.Errorf("restrict.%s: this node does not enforce it (it enforces: %s)", name, enforcedWords())
			}
		}
	}
	if in.Sandbox != nil {
		rec.Sandbox = *in.Sandbox
	}
	if rec.Checkins == nil {
		rec.Checkins = []string{}
	}
	if rec.User == "" {
		var b [3]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		rec.User = rec.Runner + "-" + hex.EncodeToString(b[:])
	}
	if err := n.checkNewAgent(ctx, rec.User); err != nil {
		return nil, err
	}
	if rec.Hears == nil {
		if rec.Hears, err = listening.ResolveHears(ctx, r, nil); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// newWorkspace is the workspace create makes for an agent.
type newWorkspace struct {
	key    messages.WorkspaceKey
	ws     host.Workspace
	branch string
	sbJSON []byte
}

// createWorkspace works out the agent's workspace: its branch, its sandbox
// (the template's and the record's), its definition checked.
func (n actions) createWorkspace(ctx context.Context, r *fossilio.Repo, p node.Project, rec *runmsg.TaskRecord) (newWorkspace, error) {
	// The tree opens on the branch the record holds it to, once that branch
	// has a check-in; until then on trunk, from which the agent branches.
	branch := "trunk"
	if rec.Restrict.Branch != "" {
		if on, err := r.CheckinsOnBranch(ctx, rec.Restrict.Branch, ""); err != nil {
			return newWorkspace{}, err
		} else if len(on) > 0 {
			branch = rec.Restrict.Branch
		}
	}
	key := messages.WorkspaceKey{Login: rec.User, Project: p.Name}
	ws, err := n.node.WorkspacePaths(key)
	if err != nil {
		return newWorkspace{}, fmt.Errorf("user: %w", err)
	}
	sb := n.node.DefaultSandbox(ws.Dir)
	sb.Network = rec.Sandbox.Network
	sb.ReadOnly = append(sb.ReadOnly, rec.Sandbox.ReadOnly...)
	sb.ReadWrite = append(sb.ReadWrite, rec.Sandbox.ReadWrite...)
	sbJSON, err := json.Marshal(sb)
	if err != nil {
		return newWorkspace{}, err
	}
	if _, err := n.ws.Definition(key, branch, ws, sbJSON); err != nil {
		return newWorkspace{}, fmt.Errorf("sandbox: %w", err)
	}
	return newWorkspace{key: key, ws: ws, branch: branch, sbJSON: sbJSON}, nil
}

// createFacts is what create checked, for createPlan: the caller, the
// project, the record and its post's text, the agent's workspace.
type createFacts struct {
	Caller, Project string
	Rec             *runmsg.TaskRecord
	Text            string
	NW              newWorkspace
}

// createEffects are the effects create's plan runs.
type createEffects interface {
	// postRecord posts the record as the caller, a new thread's first
	// post, and returns its hash, or why it could not.
	postRecord(ctx context.Context, title, text string) (string, error)
	loginAdd(ctx context.Context, a *node.Answer, login string) error
	workspaceAdd(ctx context.Context, a *node.Answer, in workspaces.WorkspaceAddInput) error
	// forget makes the workspace's clone forget its password.
	forget(ctx context.Context, ws host.Workspace) error
	sessionStart(ctx context.Context, a *node.Answer, in workspaces.SessionStartInput) error
}

// createPlan is create's plan (E8, D35): the record as a new thread, as
// the caller; the agent's login; its workspace (its clone without a
// password when the record restricts no_password); its llm session
// started on the record. The answer's result is the record.
func createPlan(f createFacts, fx createEffects) node.Plan {
	var plan node.Plan
	rec, nw := f.Rec, f.NW
	title := "Record: " + node.FirstLine(rec.Objective)
	if len(title) > 200 {
		title = title[:200]
	}
	var hash string
	plan.Add(fmt.Sprintf("post as %q the first post of a new thread on %s:\n%s", f.Caller, f.Project, f.Text), func(ctx context.Context, a *node.Answer) error {
		var err error
		if hash, err = fx.postRecord(ctx, strings.ToValidUTF8(title, ""), f.Text); err != nil {
			return err
		}
		a.Logf("posted the record of %q as %q at %s (a new thread)", rec.User, f.Caller, hash)
		a.SetResult(hash)
		return nil
	})
	plan.Add(fmt.Sprintf("provision %q on %s with capabilities %s", rec.User, f.Project, fossilio.AgentCaps), func(ctx context.Context, a *node.Answer) error {
		return fx.loginAdd(ctx, a, rec.User)
	})
	plan.Add(fmt.Sprintf("add workspace %s on branch %q (its definition the first post of a thread of its own)", nw.key, nw.branch), func(ctx context.Context, a *node.Answer) error {
		return fx.workspaceAdd(ctx, a, workspaces.WorkspaceAddInput{Login: rec.User, Project: f.Project, Branch: nw.branch, SandboxJSON: nw.sbJSON})
	})
	if rec.Restrict.NoPassword {
		plan.Add(fmt.Sprintf("make the clone of %s forget its password (restrict no_password)", nw.key), func(ctx context.Context, a *node.Answer) error {
			if err := fx.forget(ctx, nw.ws); err != nil {
				return fmt.Errorf("make the clone forget its password: %w", err)
			}
			a.Logf("the clone of %s holds no password (restrict no_password)", nw.key)
			return nil
		})
	}
	plan.Add(fmt.Sprintf("start its llm session (runner %s, model %s, lifetime stays, wall %s%s) on the record", rec.Runner, rec.Model, rec.Budget.Wall, tokensWords(rec.Budget.Tokens)), func(ctx context.Context, a *node.Answer) error {
		return fx.sessionStart(ctx, a, workspaces.SessionStartInput{Workspace: nw.key.String(), Kind: string(messages.LLM), Runner: rec.Runner,
			Model: rec.Model, Lifetime: string(messages.Stays), Record: hash, Hears: rec.Hears, Checkins: rec.Checkins, Wall: rec.Budget.Wall, Tokens: rec.Budget.Tokens})
	})
	return plan
}

// createRun is createEffects on this node.
type createRun struct {
	n actions
	r *fossilio.Repo
	p node.Project
}

func (c createRun) postRecord(ctx context.Context, title, text string) (string, error) {
	code, err := c.r.ProjectCode(ctx)
	if err != nil {
		return "", err
	}
	hash, err := c.n.node.Writer(c.p, code).WriteNote(ctx, fossilio.NoteWrite{Login: c.n.node.Caller.Login, Title: title, Text: text})
	if err != nil {
		return "", fmt.Errorf("post the record: %w", err)
	}
	return hash, nil
}

func (c createRun) loginAdd(ctx context.Context, a *node.Answer, login string) error {
	return merged(a, c.n.node.LoginAdd(ctx, login, false))
}

func (c createRun) workspaceAdd(ctx context.Context, a *node.Answer, in workspaces.WorkspaceAddInput) error {
	return merged(a, c.n.ws.WorkspaceAdd(ctx, in))
}

// forget writes the clone in place, following no link (D47): it is in
// the agent's workspace.
func (c createRun) forget(ctx context.Context, ws host.Workspace) error {
	cf, err := c.n.node.OpenAgentFile(ws.Clone, os.O_RDWR)
	if err != nil {
		return err
	}
	defer cf.Close()
	return fossilio.ForgetFile(ctx, cf)
}

func (c createRun) sessionStart(ctx context.Context, a *node.Answer, in workspaces.SessionStartInput) error {
	return merged(a, c.n.ws.SessionStart(ctx, in))
}

// checkNewAgent refuses a user name create may not make: not a login, the
// node user's, one this node keeps a password for, or a user of any
// project (create makes a new user, E2).
func (n actions) checkNewAgent(ctx context.Context, login string) error {
	if err := node.CheckNewLogin(login); err != nil {
		return fmt.Errorf("user: %w", err)
	}
	if login == n.node.Config.User {
		return fmt.Errorf("user: %q is the node user", login)
	}
	pw, err := n.node.Layout.Password(login)
	if err != nil {
		return fmt.Errorf("user: %w", err)
	}
	if _, err := os.Lstat(pw); err == nil {
		return fmt.Errorf("user: %q is an agent login of this node already; create makes a new user", login)
	}
	for _, p := range n.node.Projects() {
		r, err := n.node.OpenProjectRepo(p)
		if err != nil {
			return err
		}
		_, err = r.User(ctx, login)
		r.Close()
		if err == nil {
			return fmt.Errorf("user: %q is already a user of %s; create makes a new user", login, p.Name)
		}
		if !errors.Is(err, fossilio.ErrNoSuchUser) {
			return err
		}
	}
	return nil
}

func enforcedWords() string {
	if len(node.EnforcedRestrictions) == 0 {
		return "none"
	}
	return strings.Join(node.EnforcedRestrictions, ", ")
}

// tokensWords says a record's tokens budget in the dry run's words.
func tokensWords(n uint64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", tokens %d", n)
}
