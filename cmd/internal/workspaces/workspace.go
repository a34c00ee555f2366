package workspaces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// WorkspaceAddInput is what `ocx workspace add` takes.
type WorkspaceAddInput struct {
	Login, Project, Branch string
	// SandboxJSON is the sandbox as a JSON object (--sandbox FILE); nil
	// means the default template.
	SandboxJSON []byte
	// Record is a thread to post the definition in (any of its posts, or a
	// prefix of at least 10 digits); empty means a new thread.
	Record string
	DryRun bool
}

// WorkspaceAdd adds a workspace (seed 002, "add a workspace"): the
// definition, decoded and checked first, is posted as the caller as the first
// post of a new thread (or in the given thread); then the workspace is made on
// the host: a clone made over the network as the agent, with its password
// remembered, a tree opened on the definition's branch, binding.json, and the
// session's directory with its wake pipe. If a host step fails after the
// post, the host is left clean and the definition stays on the record, where
// a second add for the same workspace finds and reuses it.
func (n Actions) WorkspaceAdd(ctx context.Context, in WorkspaceAddInput) *node.Answer {
	a := node.NewAnswer("workspace add", in.DryRun)
	key := messages.WorkspaceKey{Login: in.Login, Project: in.Project}
	if err := messages.ValidateLogin(in.Login); err != nil {
		return a.Stop(fmt.Errorf("login: %w", err))
	}
	if err := n.node.CheckAgentLogin(in.Login); err != nil {
		return a.Stop(err)
	}
	p, err := n.node.Project(in.Project)
	if err != nil {
		return a.Stop(fmt.Errorf("project: %w", err))
	}
	if err := messages.ValidateBranch(in.Branch); err != nil {
		return a.Stop(fmt.Errorf("branch: %w", err))
	}
	ws, err := n.node.WorkspacePaths(key)
	if err != nil {
		return a.Stop(err)
	}
	def, err := n.Definition(key, in.Branch, ws, in.SandboxJSON)
	if err != nil {
		return a.Stop(err)
	}
	r, err := n.privilegedRepo(ctx, p)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	f, err := n.addFacts(ctx, r, p, ws, key, def, in)
	if err != nil {
		return a.Stop(err)
	}
	plan, err := addPlan(f, &workspaceRun{n: n, p: p, code: f.Code, ws: ws})
	return node.Executed(ctx, a, plan, err)
}

// addFacts is what a workspace add read of the record and the host, for
// addPlan.
type addFacts struct {
	Key    messages.WorkspaceKey
	Caller string
	Branch string
	Def    *messages.WorkspaceDefinition
	WS     host.Workspace
	URL    string
	Code   string
	// OnHost says the workspace's directory is on the host.
	OnHost bool
	// Defined is the definition on the record that counts for the
	// workspace, nil when none does.
	Defined *node.Workspace
	// Thread is the thread the definition is posted in, "" for a new one.
	Thread string
	// Disk is the size of the workspace's own file system (node.json's
	// session_limits.disk, D82), 0 for none; DiskWhy says why the host
	// cannot make it, and the workspace is then made on the host's.
	Disk    uint64
	DiskWhy string
}

// addFacts reads what an add needs: the branch's check-ins, the project
// code, the definitions on the record, the given thread.
func (n Actions) addFacts(ctx context.Context, r *fossilio.Repo, p node.Project, ws host.Workspace, key messages.WorkspaceKey, def *messages.WorkspaceDefinition, in WorkspaceAddInput) (addFacts, error) {
	f := addFacts{Key: key, Caller: n.node.Caller.Login, Branch: in.Branch, Def: def, WS: ws, URL: p.URL}
	var err error
	if f.Disk, err = host.NodeDisk(n.node.Config.SessionLimits); err != nil {
		return f, err
	}
	if f.Disk > 0 {
		f.DiskWhy = unixhost.DiskWhy()
	}
	if on, err := r.CheckinsOnBranch(ctx, in.Branch, ""); err != nil {
		return f, fmt.Errorf("branch: %w", err)
	} else if len(on) == 0 {
		return f, fmt.Errorf("branch: %q has no check-in in %s, so no tree can be opened on it; make it first (fossil branch new %q trunk)", in.Branch, p.Name, in.Branch)
	}
	if f.Code, err = r.ProjectCode(ctx); err != nil {
		return f, err
	}
	f.OnHost = unixhost.Exists(ws.Dir)
	defs, err := node.Defined(ctx, n.node.Index(r))
	if err != nil {
		return f, err
	}
	if w := defs[key]; w != nil && w.Terminated == "" {
		f.Defined = w
		return f, nil
	}
	if in.Record != "" && !f.OnHost {
		info, err := r.Info(ctx, in.Record)
		if err != nil {
			return f, fmt.Errorf("record: %w", err)
		}
		if info.Kind != fossilio.KindPost {
			return f, fmt.Errorf("record: %s is a %s; a workspace's record is a forum thread", info.Hash, info.Kind)
		}
		f.Thread = info.Root
	}
	return f, nil
}

// workspaceEffects are the effects a workspace's plans run.
type workspaceEffects interface {
	// post writes a note on the project's record.
	post(ctx context.Context, note fossilio.NoteWrite) (string, error)
	// make makes the workspace on the host from a definition.
	make(ctx context.Context, def *messages.WorkspaceDefinition, hash, record string) error
	// remove removes the workspace from the host.
	remove(ctx context.Context) error
	backoffice(ctx context.Context, a *node.Answer)
}

// addPlan is a workspace add's plan (seed 002): a workspace defined on the
// record but not on the host is made from that definition; otherwise the
// Definition is posted as the caller (a new thread's first post, or in the
// given thread) and the workspace made from it. It refuses a workspace on
// the host already.
func addPlan(f addFacts, fx workspaceEffects) (node.Plan, error) {
	var plan node.Plan
	key, ws := f.Key, f.WS
	if f.Disk > 0 && f.DiskWhy != "" && !f.OnHost {
		plan.Say("node.json's session_limits.disk (%s) is not applied on this host: %s; the workspace is made on the host's file system", host.SizeWords(f.Disk), f.DiskWhy)
	}
	disk := ""
	if f.Disk > 0 && f.DiskWhy == "" {
		disk = fmt.Sprintf("on a disk of its own of %s (%s, mounted there), ", host.SizeWords(f.Disk), ws.Disk)
	}
	if w := f.Defined; w != nil {
		if f.OnHost {
			return plan, fmt.Errorf("workspace %s exists: defined at %s on record %s, and on the host at %s", key, w.Hash, w.Record, ws.Dir)
		}
		plan.Say("workspace %s is defined on the record at %s (record %s) but not on the host; making it from that definition", key, w.Hash, w.Record)
		if w.Definition.Branch != f.Branch {
			plan.Say("the definition on the record says branch %q, not %q: the record's definition counts (terminate the workspace to change it)", w.Definition.Branch, f.Branch)
		}
		plan.Add(fmt.Sprintf("make workspace %s on the host at %s%s", key, ws.Dir, strings.TrimSuffix(", "+disk, ", ")), func(ctx context.Context, a *node.Answer) error {
			if err := fx.make(ctx, w.Definition, w.Hash, w.Record); err != nil {
				return err
			}
			a.Logf("made workspace %s at %s: clone, tree on %q, binding.json, session/wake", key, ws.Dir, w.Definition.Branch)
			a.SetResult(w.Hash)
			return nil
		})
		return plan, nil
	}
	if f.OnHost {
		return plan, fmt.Errorf("workspace %s: %s is on the host but no definition on the record counts for it; `ocx workspace gc` removes it", key, ws.Dir)
	}
	block, err := f.Def.Encode()
	if err != nil {
		return plan, err
	}
	text := fmt.Sprintf("Workspace `%s`: agent login `%s` on project `%s`, branch `%s`.\n\n%s", key, key.Login, key.Project, f.Branch, block)
	note := fossilio.NoteWrite{Login: f.Caller, Title: "Workspace " + key.String(), Text: text}
	where := "the first post of a new thread"
	if f.Thread != "" {
		note = fossilio.NoteWrite{Login: f.Caller, Thread: f.Thread, ReplyTo: f.Thread, Text: text}
		where = "in thread " + f.Thread
	}
	var hash string
	plan.Add(fmt.Sprintf("post as %q %s:\n%s", f.Caller, where, text), func(ctx context.Context, a *node.Answer) error {
		var err error
		if hash, err = fx.post(ctx, note); err != nil {
			return fmt.Errorf("post the definition: %w", err)
		}
		thread := f.Thread
		if thread == "" {
			thread = hash
		}
		a.Logf("posted the definition of %s as %q at %s (record %s)", key, f.Caller, hash, thread)
		a.SetResult(hash)
		return nil
	})
	plan.Deferred(fx.backoffice)
	plan.Add(fmt.Sprintf("%sclone %s as %q into %s, open its tree on %q in %s, write %s and make %s", disk, f.URL, key.Login, ws.Clone, f.Branch, ws.Tree, ws.Binding, ws.Wake), func(ctx context.Context, a *node.Answer) error {
		thread := f.Thread
		if thread == "" {
			thread = hash
		}
		if err := fx.make(ctx, f.Def, hash, thread); err != nil {
			return fmt.Errorf("%w; the host is left clean and the definition stays on the record at %s: `ocx workspace add` again reuses it", err, hash)
		}
		a.Logf("made workspace %s at %s: clone, tree on %q, binding.json, session/wake", key, ws.Dir, f.Branch)
		return nil
	})
	return plan, nil
}

// workspaceRun is workspaceEffects on this node.
type workspaceRun struct {
	n    Actions
	p    node.Project
	code string
	ws   host.Workspace
}

func (w *workspaceRun) post(ctx context.Context, note fossilio.NoteWrite) (string, error) {
	return w.n.node.Writer(w.p, w.code).WriteNote(ctx, note)
}

func (w *workspaceRun) make(ctx context.Context, def *messages.WorkspaceDefinition, hash, record string) error {
	return w.n.makeWorkspace(ctx, w.p, w.code, w.ws, def, hash, record)
}

func (w *workspaceRun) remove(ctx context.Context) error { return w.n.removeWorkspace(ctx, w.ws) }

func (w *workspaceRun) backoffice(ctx context.Context, a *node.Answer) {
	w.n.node.Backoffice(ctx, a, w.p)
}

// privilegedRepo opens project p's repository for an action of the
// caller, who must hold admin or setup on it.
func (n Actions) privilegedRepo(ctx context.Context, p node.Project) (*fossilio.Repo, error) {
	if err := n.node.RequireCaller(); err != nil {
		return nil, err
	}
	r, err := n.node.OpenProjectRepo(p)
	if err != nil {
		return nil, err
	}
	if err := n.node.RequirePrivileged(ctx, r, p); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Definition builds and checks a workspace definition: its sandbox from the
// given JSON, strictly decoded as the definition it will be part of (so an
// unknown key is refused, naming it), or the default template; and the
// node-files rule (no path may reach the node's own files).
func (n Actions) Definition(key messages.WorkspaceKey, branch string, ws host.Workspace, sandboxJSON []byte) (*messages.WorkspaceDefinition, error) {
	def := &messages.WorkspaceDefinition{Login: key.Login, Project: key.Project, Branch: branch}
	if sandboxJSON == nil {
		def.Sandbox = n.node.DefaultSandbox(ws.Dir)
	} else {
		if !json.Valid(sandboxJSON) {
			return nil, errors.New("sandbox: the file is not JSON")
		}
		head, err := json.Marshal(map[string]string{"ocx": "workspace", "login": key.Login, "project": key.Project, "branch": branch})
		if err != nil {
			return nil, err
		}
		whole := append(head[:len(head)-1], `,"sandbox":`...)
		whole = append(append(whole, sandboxJSON...), '}')
		d, err := messages.DecodeNoteAs[*messages.WorkspaceDefinition](whole)
		if err != nil {
			return nil, err
		}
		def = d
	}
	if err := def.Validate(); err != nil {
		return nil, err
	}
	var repos []string
	for _, p := range n.node.Projects() {
		repos = append(repos, p.Repository)
	}
	release, err := filepath.EvalSymlinks(n.node.Release)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", n.node.Release, err)
	}
	files, err := unixhost.NodeFilesOf(repos, n.node.Agents, n.node.Config.Release, release, ws.Dir)
	if err != nil {
		return nil, fmt.Errorf("the node's own files: %w", err)
	}
	sb := messages.Sandbox{Network: def.Sandbox.Network, ReadOnly: def.Sandbox.ReadOnly, ReadWrite: def.Sandbox.ReadWrite, Homes: def.Sandbox.Homes, Path: def.Sandbox.Path}
	if err := files.CheckSandbox(sb, unixhost.Resolve); err != nil {
		return nil, fmt.Errorf("workspace definition: sandbox: %w", err)
	}
	return def, nil
}

// makeWorkspace makes a workspace on the host from its definition; on
// failure it removes what it made.
func (n Actions) makeWorkspace(ctx context.Context, p node.Project, code string, ws host.Workspace, def *messages.WorkspaceDefinition, defHash, record string) (err error) {
	password, err := n.node.Password(def.Login)
	if err != nil {
		return err
	}
	root, err := unixhost.OpenRoot(n.node.Agents)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.MkdirAll(ws.Dir, 0o700); err != nil {
		return fmt.Errorf("make %s: %w", ws.Dir, err)
	}
	defer func() {
		if err != nil {
			root.Remove(ws.HeldBinding)
			if rmErr := unixhost.RemoveDisk(ctx, ws.Disk); rmErr != nil {
				err = fmt.Errorf("%w; and removing its disk %s failed: %v", err, ws.Disk, rmErr)
				return // not the directory: its disk may still be mounted there
			}
			if rmErr := root.RemoveAll(ws.Dir); rmErr != nil {
				err = fmt.Errorf("%w; and removing %s failed: %v", err, ws.Dir, rmErr)
			}
		}
	}()
	// Its own file system first (D82), so that everything of the
	// workspace is on it.
	if size, err := host.NodeDisk(n.node.Config.SessionLimits); err != nil {
		return err
	} else if size > 0 && unixhost.DiskWhy() == "" {
		if err := root.MkdirAll(ws.Held, 0o700); err != nil {
			return err
		}
		if err := unixhost.MakeDisk(ws.Disk, size); err != nil {
			return err
		}
		if err := unixhost.MountDisk(ctx, ws.Disk, ws.Dir); err != nil {
			return err
		}
	}
	// The clone's fossil commands use the workspace as their home, as the
	// session's do (its HOME in the sandbox).
	f := &fossilio.Fossil{Exe: n.node.Fossil, Home: ws.Dir, User: def.Login, Dir: ws.Dir}
	if err := f.Clone(ctx, fossilio.CloneOptions{URL: p.URL, Login: def.Login, Password: password, ProjectCode: code}, ws.Clone); err != nil {
		return err
	}
	if err := f.OpenCheckout(ctx, ws.Clone, ws.Tree, def.Branch); err != nil {
		return err
	}
	b := messages.Binding{Login: def.Login, Project: def.Project, ProjectCode: code, Remote: p.URL, Branch: def.Branch, Home: record, Workspace: defHash}
	data, err := b.Encode()
	if err != nil {
		return err
	}
	// The workspace's copy is the agent's (its session reads it); the held
	// one, bound into no sandbox, is what the node reads after (D44).
	if err := root.MkdirAll(ws.Held, 0o700); err != nil {
		return err
	}
	for _, p := range []string{ws.Binding, ws.HeldBinding} {
		if err := root.WriteFile(p, data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	for _, d := range []string{ws.ListeningDir, ws.Session} {
		if err := root.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := root.Mkfifo(ws.Wake, 0o600); err != nil {
		return err
	}
	return nil
}

// WorkspaceTerminate terminates a workspace (seed 002, "terminate a
// workspace"): the terminated note on its record, as the caller, then the
// workspace removed from the host. It is refused while a process names it.
func (n Actions) WorkspaceTerminate(ctx context.Context, keyText, reason string, dry bool) *node.Answer {
	a := node.NewAnswer("workspace terminate", dry)
	key, err := messages.ParseWorkspaceKey(keyText)
	if err != nil {
		return a.Stop(fmt.Errorf("workspace: %w", err))
	}
	p, ws, err := n.projectWorkspace(key)
	if err != nil {
		return a.Stop(err)
	}
	f := terminateFacts{Key: key, Caller: n.node.Caller.Login, Reason: reason, WS: ws}
	if _, err := f.note().Encode(); err != nil {
		return a.Stop(err)
	}
	if err := n.node.RequireCaller(); err != nil {
		return a.Stop(err)
	}
	v, err := n.node.Naming(key)
	if err != nil {
		return a.Stop(err)
	}
	if err := node.RefuseIfNamed(v, key, "terminate "+key.String()); err != nil {
		return a.Stop(err)
	}
	r, err := n.privilegedRepo(ctx, p)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	code, err := r.ProjectCode(ctx)
	if err != nil {
		return a.Stop(err)
	}
	defs, err := node.Defined(ctx, n.node.Index(r))
	if err != nil {
		return a.Stop(err)
	}
	f.Defined, f.OnHost = defs[key], unixhost.Exists(ws.Dir)
	plan, err := terminatePlan(f, &workspaceRun{n: n, p: p, code: code, ws: ws})
	return node.Executed(ctx, a, plan, err)
}

// terminateFacts is what a terminate read, for terminatePlan.
type terminateFacts struct {
	Key     messages.WorkspaceKey
	Caller  string
	Reason  string
	WS      host.Workspace
	Defined *node.Workspace // the definition that counts on the record, or nil
	OnHost  bool
}

func (f terminateFacts) note() *messages.TerminatedNote {
	return &messages.TerminatedNote{Login: f.Key.Login, Project: f.Key.Project, Reason: f.Reason}
}

// terminatePlan is a terminate's plan (seed 002): the terminated note on
// the workspace's record, as the caller, unless it is there; then the
// workspace removed from the host, if it is on it.
func terminatePlan(f terminateFacts, fx workspaceEffects) (node.Plan, error) {
	var plan node.Plan
	key, w := f.Key, f.Defined
	switch {
	case w == nil && f.OnHost:
		return plan, fmt.Errorf("workspace %s: no definition on the record counts for it, so there is no record to note its end on; `ocx workspace gc` removes %s", key, f.WS.Dir)
	case w == nil:
		return plan, fmt.Errorf("workspace %s does not exist: no definition on the record and nothing on the host", key)
	case w.Terminated != "" && !f.OnHost:
		return plan, fmt.Errorf("workspace %s is already terminated (%s) and not on the host", key, w.Terminated)
	}
	if w.Terminated != "" {
		plan.Say("workspace %s is already terminated (%s)", key, w.Terminated)
	} else {
		block, err := f.note().Encode()
		if err != nil {
			return plan, err
		}
		text := fmt.Sprintf("Workspace `%s` is terminated.\n\n%s", key, block)
		plan.Add(fmt.Sprintf("post as %q in record %s:\n%s", f.Caller, w.Record, text), func(ctx context.Context, a *node.Answer) error {
			hash, err := fx.post(ctx, fossilio.NoteWrite{Login: f.Caller, Thread: w.Record, ReplyTo: w.Record, Text: text})
			if err != nil {
				return fmt.Errorf("post the terminated note: %w", err)
			}
			a.Logf("posted the terminated note of %s as %q at %s", key, f.Caller, hash)
			a.SetResult(hash)
			return nil
		})
		plan.Deferred(fx.backoffice)
	}
	if !f.OnHost {
		plan.Say("workspace %s was not on the host", key)
		return plan, nil
	}
	plan.Add("remove "+f.WS.Dir, func(ctx context.Context, a *node.Answer) error {
		if err := fx.remove(ctx); err != nil {
			return err
		}
		a.Logf("removed %s", f.WS.Dir)
		return nil
	})
	return plan, nil
}

func (n Actions) removeWorkspace(ctx context.Context, ws host.Workspace) error {
	root, err := unixhost.OpenRoot(n.node.Agents)
	if err != nil {
		return err
	}
	defer root.Close()
	// Its own file system first (D82): what is below the workspace is on
	// it, and goes with it.
	if err := unixhost.RemoveDisk(ctx, ws.Disk); err != nil {
		return fmt.Errorf("remove the disk of %s: %w", ws.Key, err)
	}
	if err := root.RemoveAll(ws.Dir); err != nil {
		return fmt.Errorf("remove %s: %w", ws.Dir, err)
	}
	// What the node held of it goes with it: its binding, its listening
	// index, whom its sessions heard.
	if err := root.RemoveAll(ws.Held); err != nil {
		return fmt.Errorf("remove %s: %w", ws.Held, err)
	}
	return nil
}

// WorkspaceGC collects workspaces (seed 002, "collect workspaces"): each
// workspace on the host whose record has a terminated note, or whose
// Definition no longer counts, is removed; never one a running process names
// (or might name). It writes nothing on the record.
func (n Actions) WorkspaceGC(ctx context.Context, dry bool) *node.Answer {
	a := node.NewAnswer("workspace gc", dry)
	facts, err := n.gcFacts(ctx)
	return node.Executed(ctx, a, gcPlan(facts, gcRun{n}), err)
}

// gcFact is what a gc read of one workspace on the host, for gcPlan.
type gcFact struct {
	Key messages.WorkspaceKey
	WS  host.Workspace
	// Unread says why its paths or its project could not be read.
	Unread error
	// Binding is the node's own copy of its binding (D44), BindingErr why
	// it did not read.
	Binding    *messages.Binding
	BindingErr error
	// Defined is the definition on the record that counts for it, or nil.
	Defined *node.Workspace
	// Named is what names it, read only when it is to be collected.
	Named host.Verdict
}

// gcWhy says why a gc collects the workspace (why), or why it leaves it
// alone although it might be collected (alone); neither when it counts.
func gcWhy(f gcFact) (why, alone string) {
	// What the node made it from is its own copy of the binding (D44);
	// without one (being added, half made, or made by an earlier release)
	// only the record can collect it.
	switch w := f.Defined; {
	case f.BindingErr != nil && !errors.Is(f.BindingErr, fs.ErrNotExist):
		return "", fmt.Sprintf("%s: the node's binding of it does not read (%v); left alone", f.Key, f.BindingErr)
	case f.BindingErr != nil && w != nil && w.Terminated == "":
		return "", fmt.Sprintf("%s: the node kept no binding of it (being added, half made, or made by an earlier release) and its definition %s counts; left alone", f.Key, w.Hash)
	case w == nil:
		return "no definition on the record counts for it", ""
	case w.Terminated != "":
		return "terminated at " + w.Terminated, ""
	case w.Hash != f.Binding.Workspace:
		return fmt.Sprintf("made from definition %s, which %s replaced", f.Binding.Workspace, w.Hash), ""
	}
	return "", ""
}

// gcFacts reads each workspace on the host: its paths, its binding, the
// definitions on its project's record, and, for one to be collected, what
// names it.
func (n Actions) gcFacts(ctx context.Context) ([]gcFact, error) {
	logins, err := n.node.PasswordLogins()
	if err != nil {
		return nil, err
	}
	var facts []gcFact
	records := map[string]map[messages.WorkspaceKey]*node.Workspace{}
	for _, login := range logins {
		keys, err := n.node.WorkspacesOf(login)
		if err != nil {
			return nil, err
		}
		for _, key := range keys {
			f := gcFact{Key: key}
			var p node.Project
			if f.WS, f.Unread = n.node.WorkspacePaths(key); f.Unread == nil {
				p, f.Unread = n.node.Project(key.Project)
			}
			if f.Unread != nil {
				facts = append(facts, f)
				continue
			}
			defs, ok := records[p.Name]
			if !ok {
				if defs, err = n.workspacesOnRecord(ctx, p); err != nil {
					return nil, err
				}
				records[p.Name] = defs
			}
			f.Defined = defs[key]
			f.Binding, f.BindingErr = n.node.ReadBinding(f.WS)
			if why, _ := gcWhy(f); why != "" {
				if f.Named, err = n.node.Naming(key); err != nil {
					return nil, err
				}
			}
			facts = append(facts, f)
		}
	}
	return facts, nil
}

// gcEffects are the effects a gc's plan runs.
type gcEffects interface {
	// removeWorkspace removes a workspace from the host.
	removeWorkspace(ctx context.Context, ws host.Workspace) error
}

// gcRun is gcEffects on this node.
type gcRun struct{ n Actions }

func (g gcRun) removeWorkspace(ctx context.Context, ws host.Workspace) error {
	return g.n.removeWorkspace(ctx, ws)
}

// gcPlan is a gc's plan (seed 002): each workspace to collect that no
// process names (or might name) removed, in the order read; each left
// alone said why.
func gcPlan(facts []gcFact, fx gcEffects) node.Plan {
	var plan node.Plan
	for _, f := range facts {
		why, alone := gcWhy(f)
		switch {
		case f.Unread != nil:
			plan.Say("%s: %v; left alone", f.Key, f.Unread)
		case alone != "":
			plan.Say("%s", alone)
		case why == "":
		case f.Named.Named != host.No:
			plan.Say("%s: %s, but a running process names it (%s); left alone", f.Key, why, f.Named)
		default:
			ws := f.WS
			plan.Add(fmt.Sprintf("remove %s (%s)", ws.Dir, why), func(ctx context.Context, a *node.Answer) error {
				if err := fx.removeWorkspace(ctx, ws); err != nil {
					return err
				}
				a.Logf("removed %s (%s)", ws.Dir, why)
				return nil
			})
		}
	}
	if len(plan.Steps) == 0 {
		plan.Say("nothing to collect")
	}
	return plan
}

func (n Actions) workspacesOnRecord(ctx context.Context, p node.Project) (map[messages.WorkspaceKey]*node.Workspace, error) {
	r, err := n.node.OpenProjectRepo(p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return node.Defined(ctx, n.node.Index(r))
}
