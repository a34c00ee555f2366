package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// PasswordLogins lists the logins that keep a password in the agents root
// agents, the node user included, sorted.
func PasswordLogins(agents string) ([]string, error) {
	entries, err := unixhost.Below(agents).ReadDir(agents)
	if err != nil {
		return nil, fmt.Errorf("list agent logins: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || messages.ValidateLogin(e.Name()) != nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(agents, e.Name(), "password")); err == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// ReadBinding reads the binding the node wrote when it made workspace ws,
// its own copy (Workspace.HeldBinding, D44); fs.ErrNotExist when the node
// made none: the workspace is not on the host, or an earlier release made
// it (BoundWorkspace then takes the record's definition). The workspace's
// own binding.json is the agent's to rewrite and is never read here.
func (n Node) ReadBinding(ws host.Workspace) (*messages.Binding, error) {
	root, err := unixhost.OpenRoot(n.Layout.Root())
	if err != nil {
		return nil, err
	}
	defer root.Close()
	data, err := root.ReadFile(ws.HeldBinding, unixhost.SmallFile)
	if err != nil {
		if _, refused := unixhost.AsRefused(err); refused {
			n.Refusals.Absent(err)
			return nil, fmt.Errorf("%w: %v", fs.ErrNotExist, err)
		}
		return nil, err
	}
	b, err := messages.DecodeBinding(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ws.HeldBinding, err)
	}
	if b.Key() != ws.Key {
		return nil, fmt.Errorf("%s is the binding of %s, not %s", ws.HeldBinding, b.Key(), ws.Key)
	}
	return b, nil
}

// OnHost says whether workspace ws is on the host: its directory is there
// (the node makes it, and it is no agent's to replace: it is the mount point
// of the agent's sandbox).
func OnHost(ws host.Workspace) error {
	st, err := os.Lstat(ws.Dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", ws.Dir)
	}
	return nil
}

// BoundWorkspace is what the node made workspace ws from: the binding it
// kept (ReadBinding); for a workspace an earlier release made, which kept
// none, the definition that counts for it on the record r, while its
// directory is on the host. fs.ErrNotExist when it is not on the host.
func (n Node) BoundWorkspace(ctx context.Context, r *fossilio.Repo, ws host.Workspace) (*messages.Binding, error) {
	b, err := n.ReadBinding(ws)
	if !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	if OnHost(ws) != nil {
		return nil, err
	}
	defs, derr := n.Facts.Index(r).Workspaces(ctx)
	if derr != nil {
		return nil, derr
	}
	w := defs[ws.Key]
	if w == nil || w.Terminated != "" {
		return nil, err
	}
	code, cerr := r.ProjectCode(ctx)
	if cerr != nil {
		return nil, cerr
	}
	p, ok := n.Config.Projects[ws.Key.Project]
	if !ok {
		return nil, fmt.Errorf("project %q is not a repository of this node (it has %s)", ws.Key.Project, strings.Join(n.Config.ProjectNames(), ", "))
	}
	n.Log.Info("the node kept no binding of this workspace (made by an earlier release); the record's definition stands for it",
		slog.String("workspace", ws.Key.String()), slog.String("definition", w.Entry.Hash))
	return &messages.Binding{Login: ws.Key.Login, Project: ws.Key.Project, ProjectCode: code, Remote: p.URL,
		Branch: w.Definition.Branch, Home: w.Entry.Record, Workspace: w.Entry.Hash}, nil
}

// SessionLimits is what the node holds each session to (D46): node.json's
// session_limits, the defaults filled in, and where the cgroups holding
// them are made on this host, or why none can be; and the size of each
// workspace's own file system, or why this host makes none (D82).
func SessionLimits(layout host.Layout, cfg *messages.NodeConfig) *messages.SessionLimitsStatus {
	mem, err := unixhost.MemTotal()
	if err != nil {
		mem = 0
	}
	lim, err := host.SessionLimits(cfg.SessionLimits, mem)
	if err != nil {
		// node.json was validated as it was read: a size it took reads.
		return &messages.SessionLimitsStatus{NotApplied: err.Error()}
	}
	s := &messages.SessionLimitsStatus{Memory: lim.Memory, Processes: lim.Processes}
	// Each workspace's own file system (D82), or why this host makes none.
	if disk, err := host.NodeDisk(cfg.SessionLimits); err == nil && disk > 0 {
		s.Disk, s.DiskNotApplied = disk, unixhost.DiskWhy()
	}
	cg := unixhost.HostCgroups()
	if why := cg.Why(); why != "" {
		s.NotApplied = why
		return s
	}
	h := cg.Hierarchies()
	var dirs []string
	for _, d := range h.Dirs() {
		dirs = append(dirs, filepath.Join(d, layout.CgroupNode()))
	}
	s.Cgroups = fmt.Sprintf("v%d %s", h.Version, strings.Join(dirs, " "))
	return s
}
