package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/runs"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Run patterns (seed 004, sections 5 and 14; D84): the wiki page run/NAME
// holds the layers most runs take, once; `ocx run post --pattern NAME`
// and the console's Patterns page write them into each run in full
// (runmsg.RunPattern). A pattern is read as a user holding admin or
// setup last sent its page, in the server's order (fossilio's
// PrivilegedWikiPage, as the console's templates are): any login that may
// check in may push a wiki version, dated as it likes.

// RunPatternInfo is one pattern as the tool and the console list it.
type RunPatternInfo struct {
	Name string `json:"name"`
	// Page is its wiki page, run/NAME; Version the page's version read,
	// and Sender who sent it.
	Page    string `json:"page"`
	Version string `json:"version"`
	Sender  string `json:"sender"`
	// Layers are the layers it holds, in table 1's order; Text the page's
	// whole text, as shown.
	Layers []string `json:"layers,omitempty"`
	Text   string   `json:"text"`
	// Problem says why it makes no run, when its page does not read as a
	// pattern.
	Problem string `json:"problem,omitempty"`
}

// runPattern reads the pattern name of the repository r.
func runPattern(ctx context.Context, r *fossilio.Repo, name string) (*runmsg.RunPattern, RunPatternInfo, error) {
	page := runmsg.RunPatternPrefix + name
	info := RunPatternInfo{Name: name, Page: page}
	if err := runmsg.CheckRunPatternName(name); err != nil {
		return nil, info, err
	}
	p, err := r.PrivilegedWikiPage(ctx, page)
	switch {
	case errors.Is(err, fossilio.ErrNoSuchPage):
		return nil, info, fmt.Errorf("pattern: no pattern %q: no user holding admin or setup wrote the wiki page %s", name, page)
	case err != nil:
		return nil, info, fmt.Errorf("pattern: %w", err)
	case p.Deleted:
		return nil, info, fmt.Errorf("pattern: the wiki page %s was deleted (its version %s, sent by %s)", page, p.Hash, p.Sender)
	}
	info.Version, info.Sender, info.Text = p.Hash, p.Sender, p.Text
	pat, err := runmsg.DecodeRunPattern(name, []byte(p.Text))
	if err != nil {
		info.Problem = err.Error()
		return nil, info, err
	}
	info.Layers = pat.Layers()
	return pat, info, nil
}

// RunPatterns lists the project's patterns: each wiki page run/NAME whose
// version a user holding admin or setup last sent is not a deletion, by
// name, with the problem of one that does not read.
func (n actions) RunPatterns(ctx context.Context, project string) ([]RunPatternInfo, error) {
	_, r, err := n.node.ProjectRepo(project)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	pages, err := r.PrivilegedWikiPages(ctx, runmsg.RunPatternPrefix)
	if err != nil {
		return nil, err
	}
	out := []RunPatternInfo{}
	for _, page := range pages {
		name := strings.TrimPrefix(page, runmsg.RunPatternPrefix)
		_, info, err := runPattern(ctx, r, name)
		if err != nil && info.Problem == "" {
			info.Problem = err.Error()
		}
		out = append(out, info)
	}
	return out, nil
}

// runPostPattern is RunPost with a pattern: the caller's fields (in.Message,
// an object of a run's fields) over the pattern in.Pattern, the run
// written in full in the block posted, after the strict decoder and
// section 11's rows this node can check before anything is written.
func (n actions) runPostPattern(ctx context.Context, a *node.Answer, in RunInput) *node.Answer {
	p, r, err := n.toolRepoIn(in.Project)
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	if err := n.node.RequirePrivileged(ctx, r, p); err != nil {
		return a.Stop(fmt.Errorf("%w; a run such a user sends is refused (seed 004, section 11, row 1)", err))
	}
	pat, info, err := runPattern(ctx, r, in.Pattern)
	if err != nil {
		return a.Stop(err)
	}
	a.Logf("pattern %s: the version %s, sent by %q, holding %s", info.Page, info.Version, info.Sender, strings.Join(info.Layers, ", "))
	run, err := pat.Apply(in.Message, n.node.Config.User, in.Objective)
	if err != nil {
		return a.Stop(err)
	}
	if over := pat.Over(in.Message); len(over) > 0 {
		a.Logf("yours over the pattern's: %s", strings.Join(over, ", "))
	}
	if err := n.checkRun(ctx, r, p, run); err != nil {
		return a.Stop(err)
	}
	block, err := run.Encode()
	if err != nil {
		return a.Stop(err)
	}
	a.Logf("the run, in full:\n%s", strings.TrimSpace(string(block)))
	text := fmt.Sprintf("A run from the pattern `%s` (its version `%s`), written out in full.\n\n%s", info.Page, info.Version, block)
	if in.To != "" {
		return mergeAll(a, n.node.Post(ctx, node.PostInput{Project: p.Name, To: in.To, Text: text, DryRun: in.DryRun}))
	}
	return mergeAll(a, n.node.Thread(ctx, node.PostInput{Project: p.Name, Title: runTitle(run.Objective), Text: text, DryRun: in.DryRun}))
}

// checkRun checks a run the tool is to post against section 11's rows,
// with the facts the daemon reads when it arrives, before anything is
// written: rows 1 to 5 (the record's), and on this node's run 6 and 7
// too (the node's); row 8 (what the host provides) and later rows are
// the node's daemon's, which probes its host, at the run's arrival.
func (n actions) checkRun(ctx context.Context, r *fossilio.Repo, p node.Project, run *runmsg.Run) error {
	msgs, err := n.runRecord(ctx, r)
	if err != nil {
		return err
	}
	m := record.RunMsg{Sender: n.node.Caller.Login, Msg: run}
	f, err := record.RunRecordFacts(ctx, r, msgs, m, run.Node, record.PrivilegedOnce(ctx, r))
	if err != nil {
		return err
	}
	ours := run.Node == n.node.Config.User
	// Every sandbox setting and limit counts as provided here: row 8 is the
	// daemon's.
	f.Provides = runmsg.RunProvision{Sandbox: true, NoNetwork: true, Limits: run.Limits.Names(), Terminal: true, Deliveries: true, Manual: true}
	if run.Sandbox != nil {
		f.Provides.Capabilities = run.Sandbox.Capabilities
	}
	f.ServerNode, f.HasPassword = true, true
	if ours {
		f.NothingUnconfined = n.node.Config.ConfinedOnly
		if p.OtherHost && run.HasPasswordStep() {
			f.ServerNode = false
			if f.HasPassword, f.PasswordsWhy, err = runs.PasswordFacts(n.node.Layout.Root(), run.Process.User); err != nil {
				return err
			}
		}
	}
	if ref := runmsg.RunRefusal(run, nil, f); ref != nil {
		return fmt.Errorf("run: refused by seed 004's section 11, row %d: %s; nothing written", ref.Row, ref.Note)
	}
	return nil
}
