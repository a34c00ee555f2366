package record

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// Index is the notes of one repository that OCX looks up, kept up to date
// from the receipts the repository made since the last look: workspace and
// session definitions, terminated notes, listen and unlisten notes, and the
// node user's end and refusal notes. Notes are facts that never change once
// received, so the index is safe to keep for as long as the repository is
// open; who may write what (D7) is checked when an entry is used, since
// capabilities can change. It is safe for concurrent use.
type Index struct {
	repo     *fossilio.Repo
	nodeUser string
	// also are told of each artifact a refresh reads (NewIndex).
	also []func(fossilio.Info, string)

	mu   sync.Mutex
	mark int64 // the newest receipt indexed
	// sessionDefs are the session definitions on each record, in the
	// server's order.
	sessionDefs map[string][]Entry
	// workspaceDefs are the workspace definitions of each workspace, in the
	// server's order, each the first post of its thread.
	workspaceDefs map[messages.WorkspaceKey][]Entry
	// terminated are the terminated notes of each workspace.
	terminated map[messages.WorkspaceKey][]Entry
	// listens are the listen and unlisten notes each workspace's agent
	// login sent (D7), in the server's order.
	listens map[messages.WorkspaceKey][]Entry
	// latest is Latest of every listen, kept until another listen or
	// unlisten note is indexed (nil then): a status asks it twice, and a
	// status after a post that is not a listen reads it again at no cost.
	latest []listen
	// replies are the node user's end and refusal notes, by the launch
	// they answer.
	replies map[string][]Entry
	// ends are the node user's end notes of each workspace, in the
	// server's order.
	ends map[messages.WorkspaceKey][]Entry
	// endDays are the node user's end notes by the UTC day they say the
	// session was seen to end (EndsSeen): a reader of the last days reads
	// those days' ends alone, never every end the record holds.
	endDays map[string][]Entry
	// reports are the report notes on each record, in the server's order.
	reports map[string][]Entry
	// launches are the launch notes of each workspace, whoever sent them
	// (who counts is checked when one is used), in the server's order.
	launches map[messages.WorkspaceKey][]Entry
	// taskRecords are the records' first posts OneRun read, by hash (nil
	// until the first): what each holds of a protocol v1 record.
	taskRecords map[string]taskRecord
	// definitions are the session and workspace definitions by hash,
	// wherever they stand (a launch names them so; posts do not change).
	definitions map[string]Entry
	// recent are the artifacts the latest refreshes read, by hash, the
	// oldest first in recentOrder: what a classification that follows a
	// refresh need not read again.
	recent      map[string]artifact
	recentOrder []string
}

// artifact is what a refresh read of one artifact.
type artifact struct {
	info  fossilio.Info
	entry Entry
	ok    bool // it holds a note, or blocks that claim to be one
}

// maxRecent bounds the artifacts a refresh keeps for the classifications
// that follow it.
const maxRecent = 1024

// NewIndex indexes repo, where nodeUser writes the daemon's notes. Nothing is
// read until the first Refresh.
//
// Each of also is told of every artifact a refresh reads, with its note
// text, in the server's order: a second reading of the same receipts (the
// daemon's log of run engine messages) is made from the one read, so that
// an artifact is read from the repository once.
func NewIndex(repo *fossilio.Repo, nodeUser string, also ...func(fossilio.Info, string)) *Index {
	return &Index{repo: repo, nodeUser: nodeUser, also: also,
		sessionDefs:   map[string][]Entry{},
		workspaceDefs: map[messages.WorkspaceKey][]Entry{},
		terminated:    map[messages.WorkspaceKey][]Entry{},
		listens:       map[messages.WorkspaceKey][]Entry{},
		replies:       map[string][]Entry{},
		definitions:   map[string]Entry{},
		ends:          map[messages.WorkspaceKey][]Entry{},
		endDays:       map[string][]Entry{},
		reports:       map[string][]Entry{},
		launches:      map[messages.WorkspaceKey][]Entry{},
		recent:        map[string]artifact{},
	}
}

// NewIndexAfter indexes only what repo received after the receipt rcvid:
// for a caller that awaits the answers to a note already on the record
// (the daemon's replies to a launch come after it), without reading the
// whole record first.
func NewIndexAfter(repo *fossilio.Repo, nodeUser string, rcvid int64) *Index {
	x := NewIndex(repo, nodeUser)
	x.mark = rcvid
	return x
}

// Repo is the repository indexed.
func (x *Index) Repo() *fossilio.Repo { return x.repo }

// Mark is the newest receipt indexed: what the index's answers are
// current to.
func (x *Index) Mark() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.mark
}

// Launch is the launch note at hash among workspace key's launches,
// whoever sent it (who counts is the caller's to check).
func (x *Index) Launch(ctx context.Context, key messages.WorkspaceKey, hash string) (Entry, bool, error) {
	if err := x.Refresh(ctx); err != nil {
		return Entry{}, false, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range x.launches[key] {
		if e.Hash == hash {
			return e, true, nil
		}
	}
	return Entry{}, false, nil
}

// NodeUser is the node user whose notes the index takes for the daemon's.
func (x *Index) NodeUser() string { return x.nodeUser }

// classifyBatch bounds the artifacts classified in one read transaction, so
// that a first look at a large repository never holds a long read.
const classifyBatch = 512

// pinned marks a context in which an index does not refresh (Pin).
type pinned struct{ x *Index }

// Pin refreshes the index once and returns a context in which its answers
// do not refresh again: each answer given under it is current to the same
// receipt (Mark), and a reader that asks many questions (the status of a
// thousand workspaces) reads what arrived once, not once a question. Whom
// D7 counts (Privileged) is read once under a pin: in the refresh's own
// transaction when what arrived holds a note (a launch note's verdict asks
// it), else the first time an answer asks. So a launch note is classified
// in one read of the repository, and a plain post costs no read of the
// user table.
func (x *Index) Pin(ctx context.Context) (context.Context, error) {
	return x.pin(ctx, holdsNote)
}

// PinStanding is Pin, the user table read in the refresh's transaction
// whatever arrived: for a reader that will ask whom D7 counts.
func (x *Index) PinStanding(ctx context.Context) (context.Context, error) {
	return x.pin(ctx, func(fossilio.Arrival) bool { return true })
}

func (x *Index) pin(ctx context.Context, users func(fossilio.Arrival) bool) (context.Context, error) {
	if ctx.Value(pinned{x}) != nil {
		return ctx, nil
	}
	read, err := x.refresh(ctx, users)
	if err != nil {
		return ctx, err
	}
	p := &pin{}
	if read != nil {
		p.once.Do(func() { p.fill(fossilio.PrivilegedAmong(read), nil) })
	}
	return context.WithValue(ctx, pinned{x}, p), nil
}

// holdsNote says whether what arrived holds a note's block.
func holdsNote(a fossilio.Arrival) bool {
	for _, t := range a.Texts {
		if strings.Contains(t, "```json") {
			return true
		}
	}
	return false
}

// pin is what the answers under a Pin share: the users holding admin or
// setup, by login (list) and as a set, read once.
type pin struct {
	once       sync.Once
	err        error
	list       []string
	privileged map[string]bool
}

func (p *pin) fill(list []string, err error) {
	p.list, p.err = list, err
	p.privileged = make(map[string]bool, len(list))
	for _, u := range list {
		p.privileged[u] = true
	}
}

// standing reads, once under the pin, who holds admin or setup, unless the
// pin's refresh read it.
func (p *pin) standing(ctx context.Context, r *fossilio.Repo) error {
	p.once.Do(func() { p.fill(r.PrivilegedUsers(ctx)) })
	return p.err
}

// Refresh indexes what the repository received since the last look; under
// a context Pin gave it does nothing.
func (x *Index) Refresh(ctx context.Context) error {
	_, err := x.refresh(ctx, nil)
	return err
}

// refresh is Refresh, and the user table when users asks it of what
// arrived (nil under a pin). What arrived is most often read in one
// transaction (Arrived); a great many arrivals (the first read of a
// year's record) are classified a batch a transaction after the first.
func (x *Index) refresh(ctx context.Context, users func(fossilio.Arrival) bool) ([]fossilio.User, error) {
	if ctx.Value(pinned{x}) != nil {
		return nil, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	a, err := x.repo.Arrived(ctx, x.mark, classifyBatch, users)
	if err != nil {
		return nil, fmt.Errorf("read what %s received: %w", x.repo.Path(), err)
	}
	x.file(a.Infos, a.Texts)
	for rest := a.Hashes[len(a.Infos):]; len(rest) > 0; {
		batch := rest[:min(classifyBatch, len(rest))]
		rest = rest[len(batch):]
		infos, err := x.repo.Classify(ctx, batch...)
		if err != nil {
			return nil, fmt.Errorf("classify what %s received: %w", x.repo.Path(), err)
		}
		texts, err := x.repo.NoteTexts(ctx, infos)
		if err != nil {
			return nil, fmt.Errorf("read what %s received: %w", x.repo.Path(), err)
		}
		x.file(infos, texts)
	}
	if a.Last > x.mark {
		x.mark = a.Last
	}
	return a.Users, nil
}

// file indexes what a refresh read: each artifact and the text it may hold
// a note in. The caller holds x.mu.
func (x *Index) file(infos []fossilio.Info, texts []string) {
	for i, info := range infos {
		for _, f := range x.also {
			f(info, texts[i])
		}
		e, ok := entryOf(info, texts[i])
		if ok {
			x.add(e)
		}
		// A post awaiting moderation may yet be approved: read again.
		if !info.Pending {
			x.remember(artifact{info: info, entry: e, ok: ok})
		}
	}
}

// remember keeps what a refresh read of an artifact. The caller holds x.mu.
func (x *Index) remember(a artifact) {
	if _, ok := x.recent[a.info.Hash]; !ok {
		x.recentOrder = append(x.recentOrder, a.info.Hash)
	}
	x.recent[a.info.Hash] = a
	for len(x.recentOrder) > maxRecent {
		delete(x.recent, x.recentOrder[0])
		x.recentOrder = x.recentOrder[1:]
	}
}

// Artifact is what the record holds at hash: its classification, and for a
// post or a ticket change its entry (ok when it holds a note, or blocks that
// claim to be one). It refreshes first, and an artifact the refresh just
// read is not read again.
func (x *Index) Artifact(ctx context.Context, hash string) (fossilio.Info, Entry, bool, error) {
	if err := x.Refresh(ctx); err != nil {
		return fossilio.Info{}, Entry{}, false, err
	}
	x.mu.Lock()
	a, found := x.recent[hash]
	x.mu.Unlock()
	if found {
		return a.info, a.entry, a.ok, nil
	}
	info, err := x.repo.Info(ctx, hash)
	if err != nil {
		return fossilio.Info{}, Entry{}, false, err
	}
	e, ok, err := Read(ctx, x.repo, info)
	return info, e, ok, err
}

// definition is the note at hash as At reads it, from the index when it is
// a definition already indexed.
func (x *Index) definition(ctx context.Context, hash string) (Entry, error) {
	x.mu.Lock()
	e, found := x.definitions[hash]
	x.mu.Unlock()
	if found {
		return e, nil
	}
	return At(ctx, x.repo, hash)
}

// add files an entry. The caller holds x.mu.
func (x *Index) add(e Entry) {
	switch e.Note.(type) {
	case *messages.SessionDefinition, *messages.WorkspaceDefinition:
		x.definitions[e.Hash] = e
	}
	switch n := e.Note.(type) {
	case *messages.ListenNote, *messages.UnlistenNote:
		if l, _, counts := ListenCounts(e); counts {
			x.listens[l.Key()] = append(x.listens[l.Key()], e)
			x.latest = nil
		}
	case *messages.SessionDefinition:
		x.sessionDefs[e.Record] = append(x.sessionDefs[e.Record], e)
	case *messages.WorkspaceDefinition:
		if e.First() {
			x.workspaceDefs[n.Key()] = append(x.workspaceDefs[n.Key()], e)
		}
	case *messages.TerminatedNote:
		x.terminated[n.Key()] = append(x.terminated[n.Key()], e)
	case *messages.EndNote:
		if e.Sender == x.nodeUser {
			x.replies[n.Launch] = append(x.replies[n.Launch], e)
			k := messages.WorkspaceKey{Login: n.Login, Project: n.Project}
			x.ends[k] = append(x.ends[k], e)
			day := dayOf(n.Seen)
			x.endDays[day] = append(x.endDays[day], e)
		}
	case *messages.ReportNote:
		x.reports[e.Record] = append(x.reports[e.Record], e)
	case *messages.LaunchNote:
		x.launches[n.Key()] = append(x.launches[n.Key()], e)
	case *messages.RefusalNote:
		if e.Sender == x.nodeUser {
			x.replies[n.Launch] = append(x.replies[n.Launch], e)
		}
	}
}

// copies returns a copy of list, so that a caller reads it without the lock.
func copies(list []Entry) []Entry { return append([]Entry(nil), list...) }

// Privileged says whether user holds admin or setup now (D7); under a pin,
// as of the pin's read.
func (x *Index) Privileged(ctx context.Context, user string) bool {
	if p, ok := ctx.Value(pinned{x}).(*pin); ok {
		return p.standing(ctx, x.repo) == nil && p.privileged[user]
	}
	return Privileged(ctx, x.repo, user)
}

// PrivilegedUsers lists, by login, the users holding admin or setup now
// (fossilio.Repo.PrivilegedUsers); under a pin, as of the pin's read.
func (x *Index) PrivilegedUsers(ctx context.Context) ([]string, error) {
	if p, ok := ctx.Value(pinned{x}).(*pin); ok {
		if err := p.standing(ctx, x.repo); err != nil {
			return nil, err
		}
		return slices.Clone(p.list), nil
	}
	return x.repo.PrivilegedUsers(ctx)
}

// ListenEntries are the listen and unlisten notes of workspace key that
// its agent login sent (D7), in the server's order, with whatever arrived
// since the last read.
func (x *Index) ListenEntries(ctx context.Context, key messages.WorkspaceKey) ([]Entry, error) {
	if err := x.Refresh(ctx); err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return copies(x.listens[key]), nil
}

// Known is how a refresh classified the artifact at hash (a full hash),
// when it is among those the latest refreshes read: what a reader that
// follows the same receipts (the hook's work in the daemon) need not
// classify again.
func (x *Index) Known(hash string) (fossilio.Info, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	a, ok := x.recent[hash]
	return a.info, ok
}

// Definition is the session or workspace definition posted at hash, if the
// index holds it (wherever it stands: who counts is not asked).
func (x *Index) Definition(hash string) (Entry, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.definitions[hash]
	return e, ok
}

// Workspace is a workspace as the record says it: its latest definition that
// counts, and the terminated note that ends it, if one does.
type Workspace struct {
	Key        messages.WorkspaceKey
	Definition *messages.WorkspaceDefinition
	Entry      Entry  // the post holding the definition
	Terminated string // the terminated note's post, "" when none
}

// Workspaces returns each workspace defined on the record: for each key its
// latest definition sent by a user holding admin or setup, and the first
// terminated note that counts on that definition's record after it.
func (x *Index) Workspaces(ctx context.Context) (map[messages.WorkspaceKey]*Workspace, error) {
	if err := x.Refresh(ctx); err != nil {
		return nil, err
	}
	x.mu.Lock()
	defs := make(map[messages.WorkspaceKey][]Entry, len(x.workspaceDefs))
	for k, es := range x.workspaceDefs {
		defs[k] = copies(es)
	}
	x.mu.Unlock()
	out := map[messages.WorkspaceKey]*Workspace{}
	// Whom D7 counts is asked once per sender in this one answer.
	privileged := x.privilegedOnce(ctx)
	for k, es := range defs {
		d := newestCounting(es, privileged)
		if d == nil {
			continue
		}
		w := &Workspace{Key: k, Definition: d.Note.(*messages.WorkspaceDefinition), Entry: *d}
		w.Terminated = x.terminatedAfter(*d, privileged)
		out[k] = w
	}
	return out, nil
}

// privilegedOnce is Privileged, each user asked of the repository once.
func (x *Index) privilegedOnce(ctx context.Context) func(string) bool {
	seen := map[string]bool{}
	return func(user string) bool {
		ok, done := seen[user]
		if !done {
			ok = x.Privileged(ctx, user)
			seen[user] = ok
		}
		return ok
	}
}

// newestCounting is the newest entry a user holding admin or setup sent.
func (x *Index) newestCounting(ctx context.Context, es []Entry) *Entry {
	return newestCounting(es, func(u string) bool { return x.Privileged(ctx, u) })
}

func newestCounting(es []Entry, privileged func(string) bool) *Entry {
	for i := len(es) - 1; i >= 0; i-- {
		if privileged(es[i].Sender) {
			return &es[i]
		}
	}
	return nil
}

// TerminatedAfter returns the first terminated note, sent by a user holding
// admin or setup on the workspace's record after its definition def, if
// there is one.
func (x *Index) TerminatedAfter(ctx context.Context, def Entry) (string, error) {
	if _, ok := def.Note.(*messages.WorkspaceDefinition); !ok {
		return "", fmt.Errorf("%s is not a workspace definition", def.Hash)
	}
	if err := x.Refresh(ctx); err != nil {
		return "", err
	}
	return x.terminatedAfter(def, func(u string) bool { return x.Privileged(ctx, u) }), nil
}

// terminatedAfter is TerminatedAfter on the index as it stands.
func (x *Index) terminatedAfter(def Entry, privileged func(string) bool) string {
	wd := def.Note.(*messages.WorkspaceDefinition)
	x.mu.Lock()
	ts := copies(x.terminated[wd.Key()])
	x.mu.Unlock()
	for _, t := range ts {
		if t.After(def) && t.Record == def.Record && privileged(t.Sender) {
			return t.Hash
		}
	}
	return ""
}

// NewestDefinitions returns the newest workspace definition of key and the
// newest session definition on record, each that counts (D7); nil when
// there is none.
func (x *Index) NewestDefinitions(ctx context.Context, key messages.WorkspaceKey, record string) (ws, session *Entry, err error) {
	if err := x.Refresh(ctx); err != nil {
		return nil, nil, err
	}
	x.mu.Lock()
	wdefs, sdefs := copies(x.workspaceDefs[key]), copies(x.sessionDefs[record])
	x.mu.Unlock()
	return x.newestCounting(ctx, wdefs), x.newestCounting(ctx, sdefs), nil
}

// listen is a listener's latest note that counts.
type listen struct {
	Listener messages.Listener
	On       bool  // a listen note, not an unlisten note
	Entry    Entry // the post or ticket change holding it
}

// Listeners returns each listener whose agent login wrote a listen or
// unlisten note, its latest in the server's order, in the order the
// listeners were first stated.
func (x *Index) Listeners(ctx context.Context) ([]listen, error) {
	if err := x.Refresh(ctx); err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.latest == nil {
		var all []Entry
		for _, es := range x.listens {
			all = append(all, es...)
		}
		x.latest = Latest(all)
		if x.latest == nil {
			x.latest = []listen{}
		}
	}
	if len(x.latest) == 0 {
		return nil, nil
	}
	return slices.Clone(x.latest), nil
}

// Latest reduces listen and unlisten entries to each listener's latest in
// the server's order, in the order the listeners were first stated (a pure
// function).
func Latest(entries []Entry) []listen {
	sorted := copies(entries)
	sortByServer(sorted)
	latest := map[messages.Listener]int{}
	var out []listen
	for _, e := range sorted {
		l, on, counts := ListenCounts(e)
		if !counts {
			continue
		}
		if i, seen := latest[l]; seen {
			out[i] = listen{Listener: l, On: on, Entry: e}
			continue
		}
		latest[l] = len(out)
		out = append(out, listen{Listener: l, On: on, Entry: e})
	}
	return out
}

// BranchListen is the latest note that counts of login's listener on branch
// of this repository's project, if any.
func (x *Index) BranchListen(ctx context.Context, key messages.WorkspaceKey, branch string) (listen, bool, error) {
	if err := x.Refresh(ctx); err != nil {
		return listen{}, false, err
	}
	x.mu.Lock()
	es := copies(x.listens[key])
	x.mu.Unlock()
	for _, l := range Latest(es) {
		if l.Listener.Kind == messages.ListenBranch && l.Listener.Names == branch {
			return l, true, nil
		}
	}
	return listen{}, false, nil
}

// Replies returns the node user's end and refusal notes answering a launch
// note, in the server's order.
func (x *Index) Replies(ctx context.Context, launch string) ([]Entry, error) {
	if err := x.Refresh(ctx); err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return copies(x.replies[launch]), nil
}

// Ended says whether the node user's end note for one process of a launch
// is on the record (D6: at most one per PID and start time).
func (x *Index) Ended(ctx context.Context, launch string, pid int, start uint64) (bool, error) {
	rs, err := x.Replies(ctx, launch)
	if err != nil {
		return false, err
	}
	for _, e := range rs {
		if n, ok := e.Note.(*messages.EndNote); ok && n.PID == pid && n.StartTime == start {
			return true, nil
		}
	}
	return false, nil
}

// sortByServer sorts entries in the server's order.
func sortByServer(es []Entry) {
	slices.SortStableFunc(es, func(a, b Entry) int {
		switch {
		case a.After(b):
			return 1
		case b.After(a):
			return -1
		}
		return 0
	})
}

// LatestEnd is the newest end note the node user wrote for a session of
// workspace key: how its last session ended; ok false when none ended.
func (x *Index) LatestEnd(ctx context.Context, key messages.WorkspaceKey) (Entry, bool, error) {
	if err := x.Refresh(ctx); err != nil {
		return Entry{}, false, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	es := x.ends[key]
	if len(es) == 0 {
		return Entry{}, false, nil
	}
	latest := es[0]
	for _, e := range es[1:] {
		if e.After(latest) {
			latest = e
		}
	}
	return latest, true, nil
}

// dayLayout names a UTC day, as endDays keys it.
const dayLayout = "2006-01-02"

// dayOf is the UTC day t falls on.
func dayOf(t time.Time) string { return t.UTC().Format(dayLayout) }

// MaxEndDays bounds the days one EndsSeen reads.
const MaxEndDays = 366

// EndsSeen returns the node user's end notes whose seen time falls on a
// UTC day from first's to last's, both included, at most MaxEndDays
// days, by day and in the server's order within each. It reads those
// days' ends alone: its cost is the days and the ends they hold, never
// the whole record's.
func (x *Index) EndsSeen(ctx context.Context, first, last time.Time) ([]Entry, error) {
	if err := x.Refresh(ctx); err != nil {
		return nil, err
	}
	first, last = first.UTC(), last.UTC()
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Entry
	end := dayOf(last)
	for d, n := first, 0; n < MaxEndDays; d, n = d.AddDate(0, 0, 1), n+1 {
		day := dayOf(d)
		if day > end {
			break
		}
		es := copies(x.endDays[day])
		sortByServer(es)
		out = append(out, es...)
	}
	return out, nil
}

// Report is the newest report note on record that sender sent after the
// entry after (a session's report since its launch); ok false when none.
// Who sent it is the node's receipt's, never the note's (D7).
func (x *Index) Report(ctx context.Context, record, sender string, after Entry) (Entry, bool, error) {
	if err := x.Refresh(ctx); err != nil {
		return Entry{}, false, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	var out Entry
	found := false
	for _, e := range x.reports[record] {
		if e.Sender == sender && e.After(after) && (!found || e.After(out)) {
			out, found = e, true
		}
	}
	return out, found, nil
}

// LatestStart is the newest start of a session in workspace key: its
// newest launch note that counts (D7: sent by a user holding admin or
// setup now, or by the node user) and that the node user did not refuse
// (a refused launch started nothing); ok false when none did. Whether it
// ran, runs or ended is for the caller to read (Replies, the process
// table).
func (x *Index) LatestStart(ctx context.Context, key messages.WorkspaceKey) (Entry, bool, error) {
	if err := x.Refresh(ctx); err != nil {
		return Entry{}, false, err
	}
	x.mu.Lock()
	es := copies(x.launches[key])
	x.mu.Unlock()
	sortByServer(es)
	privileged := x.privilegedOnce(ctx)
	for i := len(es) - 1; i >= 0; i-- {
		e := es[i]
		if e.Sender == "" || (e.Sender != x.nodeUser && !privileged(e.Sender)) {
			continue
		}
		if !x.refused(e.Hash) {
			return e, true, nil
		}
	}
	return Entry{}, false, nil
}

// WouldLaunch is the daemon's verdict (LaunchVerdict) on a launch note
// not yet written: n, as sender would send it on the record of on (a note
// already there, such as the launch it repeats). It is the check made
// before writing one; the spec it returns carries on's hash in place of
// the note's own, which does not exist yet.
func (x *Index) WouldLaunch(ctx context.Context, sender string, on Entry, n *messages.LaunchNote) (Verdict, error) {
	e := Entry{Hash: on.Hash, Sender: sender, Rcvid: on.Rcvid, Rid: on.Rid, Record: on.Record, Ticket: on.Ticket, InReplyTo: on.Record, Note: n}
	if e.Ticket {
		e.InReplyTo = ""
	}
	v, err := x.resolve(ctx, e, n)
	if err != nil || v.Spec == nil || v.Spec.IsCI() {
		return v, err
	}
	// The note is not written yet: every launch on the record, on among
	// them, comes before it.
	why, err := x.OneRun(ctx, v.Spec.Workspace, e.Record, nil)
	if err != nil || why == "" {
		return v, err
	}
	return x.refuse(ctx, e, n.Login, why), nil
}

// refused says whether a refusal note replies to the entry hash.
func (x *Index) refused(hash string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.replies[hash] {
		if _, ok := r.Note.(*messages.RefusalNote); ok {
			return true
		}
	}
	return false
}
