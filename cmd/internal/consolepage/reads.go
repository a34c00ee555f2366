package consolepage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/nodestatus"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// What the pages read beside the status: the record, the hooks' settings,
// a session's log.

// hooks says whether the wake hook is installed on each repository
// (nodestatus.Hook); nil with what could not be read.
func (p *Page) hooks() ([]messages.HookStatus, error) {
	var out []messages.HookStatus
	for _, name := range p.Config.ProjectNames() {
		r, err := p.Reads.Repo(name)
		if err != nil {
			return nil, fmt.Errorf("hook of %s: %w", name, err)
		}
		st, err := r.Hook(p.Ctx)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("hook of %s: %w", name, err)
		}
		out = append(out, nodestatus.Hook(p.Layout, name, p.Config.Projects[name].Repository, st))
	}
	return out, nil
}

// workspaces are the workspaces the project's record defines: each one's
// latest definition that counts and the terminated note that ends it.
func (p *Page) workspaces() (map[messages.WorkspaceKey]*record.Workspace, error) {
	r, err := p.Reads.Repo(p.Project)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return p.Reads.Index(r).Workspaces(p.Ctx)
}

// lastSessionEnd is how the last session of workspace k ended
// (record.LastSessionEnd); nil when none ever did.
func (p *Page) lastSessionEnd(k messages.WorkspaceKey) (*record.SessionEnd, error) {
	r, err := p.Reads.Repo(k.Project)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return record.LastSessionEnd(p.Ctx, p.Reads.Index(r), k)
}

// logTail returns the last max bytes of a log below the agents root, from
// the start of a line, or "" when there is none, and the log's size (the
// byte a viewer following it asks from next). A session's log is in its
// workspace, the agent's to replace: it is read through no link, without
// waiting, and only when it is a regular file (ReadTail); anything else
// there shows as no log, logged once.
func (p *Page) logTail(path string, max int64) (string, int64, error) {
	root, err := p.openRoot()
	if err != nil {
		return "", 0, err
	}
	defer root.Close()
	b, size, err := root.ReadTail(path, max)
	if err != nil {
		if p.Refusals.Absent(err) {
			return "", 0, nil
		}
		return "", 0, err
	}
	s := string(b)
	if size > int64(len(b)) {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD"), size, nil
}

// openRoot opens the agents root, to read below it through no link.
func (p *Page) openRoot() (*unixhost.Root, error) { return unixhost.OpenRoot(p.Layout.Root()) }

// projectOf names the project whose repository is the file at path, as
// Fossil names it (FOSSIL_REPOSITORY): by node.json's path, or by the file
// itself when one of the two names it through a link.
func projectOf(cfg *messages.NodeConfig, path string) (string, bool) {
	// Fossil gives the repository as its server was given it: relative to
	// the server's directory, which is the CGI's too.
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if name, ok := cfg.ProjectOfRepository(path); ok {
		return name, true
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	for _, name := range cfg.ProjectNames() {
		if pst, err := os.Stat(cfg.Projects[name].Repository); err == nil && os.SameFile(st, pst) {
			return name, true
		}
	}
	return "", false
}

const recentCount = 10

// option is one choice a form offers.
type option struct{ Value, Label string }

// recent offers the ten most recent records of a kind, or the branches.
func (p *Page) recent(kind string) ([]option, error) {
	r, err := p.Reads.Repo(p.Project)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []option
	switch kind {
	case "thread":
		ts, err := r.RecentThreads(p.Ctx, recentCount)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			out = append(out, option{Value: t.Root, Label: t.Title})
		}
	case "ticket":
		ts, err := r.RecentTickets(p.Ctx, recentCount)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			out = append(out, option{Value: t.Ticket, Label: t.Title + " (" + t.Status + ")"})
		}
	case "branch":
		bs, err := r.Branches(p.Ctx)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			out = append(out, option{Value: b.Name, Label: b.Name})
		}
	}
	return out, nil
}
