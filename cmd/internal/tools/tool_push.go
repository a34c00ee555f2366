package tools

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/toolio"
)

// toolPush copies the caller's new check-ins from its clone to the node's
// repository as its user, then runs the backoffice (E10, D37). Only an
// agent whose record restricts no_password pushes this way; with branch,
// a check-in on another branch is refused and nothing is pushed.
//
// The clone is the agent's (D47): it says which check-ins to look at,
// never what they are. The clone is opened following no link; each
// check-in's manifest is read from its own bytes, as the node parses them
// (a check-in manifest, tagging only itself), and its branch from its own
// T cards or else its parent's, read from the node's repository or from
// the check-ins pushed with it, never from the clone's tables; and a
// file that Fossil would take for a structural artifact (a forum post of
// another thread, a tag change, a ticket change, another check-in) is
// refused, naming it. A refusal pushes nothing.
func (n actions) toolPush(ctx context.Context, in *toolio.PushArgs) *node.Answer {
	a := node.NewAnswer(toolio.ToolPush, in.DryRun)
	p, r, err := n.toolRepo()
	if err != nil {
		return a.Stop(err)
	}
	defer r.Close()
	rec, recHash, ok, err := n.node.AgentRecord(ctx, r, p, n.node.Caller.Login)
	if err != nil {
		return a.Stop(err)
	}
	if !ok {
		return a.Stop(fmt.Errorf("caller: %q is no agent of a record on %s; push is for an agent whose record restricts no_password", n.node.Caller.Login, p.Name))
	}
	if !rec.Restrict.NoPassword {
		return a.Stop(fmt.Errorf("caller: record %s does not restrict no_password: its agent pushes with Fossil itself", recHash))
	}
	ws, err := n.node.WorkspacePaths(messages.WorkspaceKey{Login: rec.User, Project: p.Name})
	if err != nil {
		return a.Stop(err)
	}
	clone, err := n.openClone(ws.Clone)
	if err != nil {
		return a.Stop(fmt.Errorf("open the clone: %w; nothing pushed", err))
	}
	defer clone.Close()
	all, err := clone.Checkins(ctx)
	if err != nil {
		return a.Stop(err)
	}
	hashes := make([]string, len(all))
	for i, c := range all {
		hashes[i] = c.Hash
	}
	lacks, err := r.Lacks(ctx, hashes...)
	if err != nil {
		return a.Stop(err)
	}
	if len(lacks) == 0 {
		a.Logf("the clone of %s has no check-in the node lacks: nothing to push", rec.User)
		return a
	}
	set, err := readPush(ctx, clone, r, lacks)
	if err != nil {
		return a.Stop(fmt.Errorf("%w; nothing pushed", err))
	}
	f := pushFacts{Caller: n.node.Caller.Login, Project: p.Name, Record: recHash, Branch: rec.Restrict.Branch, Set: set}
	plan, err := pushPlan(f, pushRun{n: n, r: r, p: p})
	return node.Executed(ctx, a, plan, err)
}

// pushFacts is what a push read and checked, for pushPlan: the caller,
// the project, the record and the branch it restricts the agent to (""
// for none), what is to be sent.
type pushFacts struct {
	Caller, Project, Record, Branch string
	Set                             *pushSet
}

// pushEffects are the effects a push's plan runs.
type pushEffects interface {
	// send pushes the artifacts to the node's repository as the caller.
	send(ctx context.Context, artifacts [][]byte) error
	backoffice(ctx context.Context, a *node.Answer)
}

// pushPlan is a push's plan (E8): refused when a check-in is on another
// branch than the record's; else each check-in said, then the whole sent
// at once, the backoffice run once it is. The result is the last
// check-in sent.
func pushPlan(f pushFacts, fx pushEffects) (node.Plan, error) {
	var plan node.Plan
	set := f.Set
	for _, c := range set.checkins {
		if f.Branch != "" && c.branch != f.Branch {
			return plan, fmt.Errorf("checkin %s is on branch %q, not %q (restrict branch of record %s); nothing pushed", c.hash, c.branch, f.Branch, f.Record)
		}
	}
	for _, c := range set.checkins {
		text := fmt.Sprintf("push check-in %s on branch %q (%s)", c.hash, c.branch, node.FirstLine(c.art.Comment))
		plan.Add(text, func(_ context.Context, a *node.Answer) error {
			a.Logf("%s", text)
			return nil
		})
	}
	plan.Add(fmt.Sprintf("send %d check-in(s) and %d file(s) to %s as %q, then run the backoffice", len(set.checkins), len(set.files), f.Project, f.Caller), func(ctx context.Context, a *node.Answer) error {
		if err := fx.send(ctx, set.artifacts()); err != nil {
			return err
		}
		a.Logf("sent %d check-in(s) and %d file(s) to %s as %q", len(set.checkins), len(set.files), f.Project, f.Caller)
		a.SetResult(set.checkins[len(set.checkins)-1].hash)
		fx.backoffice(ctx, a)
		return nil
	})
	return plan, nil
}

// pushRun is pushEffects on this node.
type pushRun struct {
	n actions
	r *fossilio.Repo
	p node.Project
}

func (u pushRun) send(ctx context.Context, artifacts [][]byte) error {
	code, err := u.r.ProjectCode(ctx)
	if err != nil {
		return err
	}
	c := u.n.node.Caller
	cl := &fossilio.Client{URL: u.p.URL, Login: c.Login, Password: c.Password, Cookie: c.Cookie, ProjectCode: code, Now: u.n.node.Now}
	if _, err := cl.PushRaw(ctx, artifacts...); err != nil {
		return fmt.Errorf("push to %s: %w", u.p.Name, err)
	}
	return nil
}

func (u pushRun) backoffice(ctx context.Context, a *node.Answer) { u.n.node.Backoffice(ctx, a, u.p) }

// openClone opens an agent's clone for reading in place, following no
// link and only when it is a regular file with one name (the clone is the
// agent's file; a link there would make the node read any SQLite file, its
// own repository among them): a refusal says why.
func (n actions) openClone(path string) (*fossilio.Repo, error) {
	f, err := n.node.OpenAgentFile(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	return fossilio.OpenCloneFile(f, nil)
}

// pushCheckin is one check-in a push sends: its manifest as read and
// parsed, and its branch as that manifest and its parent give it.
type pushCheckin struct {
	hash   string
	data   []byte
	art    *fossilio.Artifact
	branch string
}

// pushSet is what a push sends: the files the node lacks, then the
// check-ins, each a parent before its children.
type pushSet struct {
	files    [][]byte
	checkins []pushCheckin
}

// artifacts are the set's artifacts in the order they are sent: files
// first, so that a check-in never arrives before what it names.
func (p *pushSet) artifacts() [][]byte {
	out := append([][]byte{}, p.files...)
	for _, c := range p.checkins {
		out = append(out, c.data)
	}
	return out
}

// readPush reads from the clone the check-ins named (those the node
// lacks) and everything they need that the node lacks, each checked
// against its name, and decides from their own bytes what they are: each
// must parse as a check-in manifest that tags only itself, its baseline
// (a delta manifest's) must be on the node or pushed with it, and no file
// may be what Fossil takes for a structural artifact. Each check-in's
// branch is its manifest's own, else what its primary parent propagates,
// the parent read from the node's repository or from among the check-ins
// pushed.
func readPush(ctx context.Context, clone, node *fossilio.Repo, checkins []string) (*pushSet, error) {
	pl := &pushReader{clone: clone, node: node, byHash: map[string]*pushCheckin{}}
	if err := pl.readCheckins(ctx, checkins); err != nil {
		return nil, err
	}
	if err := pl.branches(ctx); err != nil {
		return nil, err
	}
	set := &pushSet{}
	var err error
	if set.files, err = pl.files(ctx); err != nil {
		return nil, err
	}
	set.checkins = pl.order()
	return set, nil
}

// pushReader is readPush's work: the check-ins pushed, by hash and in the
// order they came.
type pushReader struct {
	clone, node *fossilio.Repo
	byHash      map[string]*pushCheckin
	ordered     []*pushCheckin
}

// read reads h from the clone, checked against its name.
func (pl *pushReader) read(ctx context.Context, h, what string) ([]byte, error) {
	b, err := pl.clone.Content(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("read %s %s in the clone: %w", what, h, err)
	}
	if fossilio.HashOf(b) != h {
		return nil, fmt.Errorf("read %s %s in the clone: %w: it is not named by its SHA3-256, which push sends", what, h, errors.ErrUnsupported)
	}
	return b, nil
}

// readCheckins reads the check-ins named, each a check-in manifest that
// tags only itself.
func (pl *pushReader) readCheckins(ctx context.Context, checkins []string) error {
	for _, h := range checkins {
		data, err := pl.read(ctx, h, "check-in")
		if err != nil {
			return err
		}
		art, err := fossilio.Parse(data)
		if err != nil {
			return fmt.Errorf("checkin %s is not a check-in manifest: it does not parse (%v)", h, err)
		}
		if art.Type != fossilio.TypeManifest {
			return fmt.Errorf("checkin %s is not a check-in manifest: it is %s", h, artifactWords[art.Type])
		}
		for _, t := range art.Tags {
			if t.Target != "" {
				return fmt.Errorf("checkin %s tags another artifact (%c%s on %s): a check-in push sends tags itself alone", h, t.Op, t.Name, t.Target)
			}
		}
		c := &pushCheckin{hash: h, data: data, art: art}
		pl.byHash[h] = c
		pl.ordered = append(pl.ordered, c)
	}
	return nil
}

// branches gives each check-in its branch: its manifest's own, else what
// its primary parent propagates.
func (pl *pushReader) branches(ctx context.Context) error {
	byHash, ordered, node := pl.byHash, pl.ordered, pl.node
	// Branches, each parent's first: from the node's repository, from
	// among those pushed, or unknown.
	type state struct {
		st    fossilio.BranchState
		known bool
	}
	states := map[string]state{}
	var branchOf func(h string, depth int) (state, error)
	branchOf = func(h string, depth int) (state, error) {
		if s, ok := states[h]; ok {
			return s, nil
		}
		c, pushed := byHash[h]
		if !pushed {
			st, found, err := node.BranchState(ctx, h)
			if err != nil {
				return state{}, err
			}
			return state{st: st, known: found}, nil
		}
		parent := state{known: true} // no parent: nothing inherited
		if len(c.art.Parents) > 0 && depth < len(ordered) {
			var err error
			if parent, err = branchOf(c.art.Parents[0], depth+1); err != nil {
				return state{}, err
			}
		}
		own := c.art.Branch(fossilio.BranchState{})
		s := state{st: c.art.Branch(parent.st), known: parent.known}
		if own != (fossilio.BranchState{}) || ownCancel(c.art) {
			s.known = true // its own T card decides, whatever the parent
		}
		states[h] = s
		return s, nil
	}
	for _, c := range ordered {
		s, err := branchOf(c.hash, 0)
		if err != nil {
			return err
		}
		if !s.known {
			return fmt.Errorf("checkin %s names no branch of its own and its parent %s is neither on the node nor pushed with it, so its branch is unknown", c.hash, c.art.Parents[0])
		}
		c.branch = s.st.Name
	}
	return nil
}

// files reads the files and baselines the check-ins need that the node
// lacks, none of them what Fossil takes for a structural artifact.
func (pl *pushReader) files(ctx context.Context) ([][]byte, error) {
	byHash, ordered, node := pl.byHash, pl.ordered, pl.node
	var out [][]byte
	// What the check-ins need: their baselines and their files.
	seen := map[string]bool{}
	var want []string
	fileOf := map[string]string{} // a file's hash: the check-in and name naming it
	for _, c := range ordered {
		if b := c.art.Baseline; b != "" && !seen[b] {
			seen[b] = true
			want = append(want, b)
			fileOf[b] = "the baseline of check-in " + c.hash
		}
		for _, f := range c.art.Files {
			if f.Hash != "" && !seen[f.Hash] {
				seen[f.Hash] = true
				want = append(want, f.Hash)
				fileOf[f.Hash] = fmt.Sprintf("file %q of check-in %s", f.Name, c.hash)
			}
		}
	}
	lacks, err := node.Lacks(ctx, want...)
	if err != nil {
		return nil, err
	}
	for _, h := range lacks {
		if byHash[h] != nil {
			continue // a baseline among the new check-ins goes with them
		}
		b, err := pl.read(ctx, h, "file")
		if err != nil {
			return nil, err
		}
		if t, structural := fossilio.Structural(b); structural {
			what := artifactWords[t]
			return nil, fmt.Errorf("%s is %s, %s: Fossil would store it as one, sent by you; push sends check-ins and plain files alone", fileOf[h], h, what)
		}
		out = append(out, b)
	}
	return out, nil
}

// order is the check-ins in the order they came (the clone's own), each
// after its parent when both are pushed.
func (pl *pushReader) order() []pushCheckin {
	byHash, ordered := pl.byHash, pl.ordered
	var out []pushCheckin
	placed := map[string]bool{}
	var place func(c *pushCheckin, depth int)
	place = func(c *pushCheckin, depth int) {
		if placed[c.hash] {
			return
		}
		placed[c.hash] = true
		for _, p := range c.art.Parents {
			if pc := byHash[p]; pc != nil && depth < len(ordered) {
				place(pc, depth+1)
			}
		}
		out = append(out, *c)
	}
	for _, c := range ordered {
		place(c, 0)
	}
	return out
}

// ownCancel says whether a check-in's manifest cancels its branch tag on
// itself ("-branch *"): it has no branch, whatever its parent had.
func ownCancel(a *fossilio.Artifact) bool {
	for _, t := range a.Tags {
		if t.Target == "" && t.Name == "branch" {
			return t.Op == fossilio.TagCancel
		}
	}
	return false
}

// artifactWords name each kind of structural artifact in a refusal.
var artifactWords = map[fossilio.Type]string{
	fossilio.TypeNone:       "what Fossil may take for a structural artifact (it ends in a Z card whose checksum holds)",
	fossilio.TypeManifest:   "a check-in manifest",
	fossilio.TypeCluster:    "a cluster",
	fossilio.TypeControl:    "a tag change (a control artifact)",
	fossilio.TypeWiki:       "a wiki page",
	fossilio.TypeTicket:     "a ticket change",
	fossilio.TypeAttachment: "an attachment",
	fossilio.TypeTechnote:   "a technote",
	fossilio.TypeForum:      "a forum post",
}
