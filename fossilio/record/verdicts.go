package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// auditVerdict is one user's latest verdict on a check-in (protocol v1 E6).
type auditVerdict struct {
	messages.Verdict
	User string // who sent the tag change, as the node's repository recorded it
	Tag  string // the tag change carrying it
}

// passedVerdict is an audited tag change a reader passes over and logs
// (once): one whose value is no verdict (messages.ParseVerdict), the
// sender's earlier verdict standing, or a user's latest verdict that does
// not count (VerdictCounts), which leaves that user none.
type passedVerdict struct {
	Tag    string // the tag change
	Sender string
	Why    string
}

// Line is how a reader logs it.
func (p passedVerdict) Line() string {
	return fmt.Sprintf("the audited tag sent by %q is passed over: %s", p.Sender, p.Why)
}

// sentVerdicts reads each user's latest verdict on the check-in ci from the
// audited tag's history (fossilio.CheckinTags), in the server's order of
// those latest changes, before any rule of E6 is asked of it (Verdicts
// asks them): a cancel withdraws its sender's verdict, and a value that is
// no verdict is passed over, the sender's earlier verdict standing. It is
// what a reviewer's queue asks (has the login left its result, RunResult).
func sentVerdicts(changes []fossilio.TagChange) ([]auditVerdict, []passedVerdict) {
	latest := map[string]int{}
	var out []*auditVerdict
	var passed []passedVerdict
	for _, c := range changes {
		if c.Name != messages.AuditedTag {
			continue
		}
		var v *auditVerdict
		if c.Op != fossilio.TagCancel {
			pv, err := messages.ParseVerdict(c.Value)
			if err != nil {
				passed = append(passed, passedVerdict{Tag: c.Hash, Sender: c.Sender, Why: "it holds no verdict: " + err.Error()})
				continue
			}
			v = &auditVerdict{Verdict: pv, User: c.Sender, Tag: c.Hash}
		}
		if i, ok := latest[c.Sender]; ok {
			out[i] = nil
		}
		latest[c.Sender] = len(out)
		out = append(out, v)
	}
	var kept []auditVerdict
	for _, v := range out {
		if v != nil {
			kept = append(kept, *v)
		}
	}
	return kept, passed
}

// objective is what the repository says of the X a verdict names (E6):
// the facts VerdictCounts judges it by, read by Index.Objective.
type objective struct {
	// Against is X, as the verdict names it.
	Against string
	// Record: X is a full hash, so it names a record; otherwise it is the
	// path of a file that states the objective.
	Record bool
	// Found: X opens a thread holding a record: protocol v1's (E3), or a
	// workspace definition, the record its reviewers judge against (D42).
	Found bool
	// NoRecord says why X holds no record, when it is known (a block
	// that does not read as one: a key refused inside sandbox, E9).
	NoRecord string
	// Sender is who sent the record (the node's receipt).
	Sender string
	// Counts: its sender holds admin or setup (E3, D7).
	Counts bool
	// Branches are the branches whose check-ins the record is about: a
	// v1 record's checkins; a workspace record's, the branches its branch
	// listeners named there (D42).
	Branches []string
	// HasFile: X is a path, and the audited check-in holds a file there.
	HasFile bool
	// FilesUnread says why the check-in's files could not be read (its
	// manifest, or its baseline, malformed or missing): one bad artifact
	// costs only the verdicts that name a file of it (D47).
	FilesUnread string
}

// notCounting says why a verdict does not count: Field is the part of it
// at fault (checkin: who may judge it; against: its X), Why says how.
type notCounting struct {
	Field string
	Why   string
}

func (n *notCounting) Error() string { return n.Field + ": " + n.Why }

// VerdictCounts is every rule of seed 001 E6 a verdict on the check-in ci,
// sent by sender, must meet to count, given what the repository says of
// its X: nil when it counts, or why not. The audit tool refuses to write a
// verdict that would not count, and every reader passes over one that does
// not, by this one rule.
//
//   - its sender is known (the node's receipt) and did not send the
//     check-in; the user its U card names judges it as anyone may, since
//     anyone who may push writes any name there (E2, D47);
//   - a record it names counts (a user holding admin or setup wrote it)
//     and lists the check-in's branch among its checkins;
//   - a file it names is in the check-in.
func VerdictCounts(sender string, ci fossilio.Info, v messages.Verdict, x objective) *notCounting {
	no := func(field, format string, args ...any) *notCounting {
		return &notCounting{Field: field, Why: fmt.Sprintf(format, args...)}
	}
	if sender == "" {
		return no("checkin", "the verdict's sender is not known (only the node's repository records who sent an artifact, E2)")
	}
	if MayNotJudge(sender, ci) != "" {
		return no("checkin", "%s was sent by %q, who judges it: nobody judges their own check-in (E6)", ci.Hash, sender)
	}
	if x.Against != v.Against {
		return no("against", "%q was not read", v.Against)
	}
	if !x.Record {
		if x.FilesUnread != "" {
			return no("against", "the files of check-in %s do not read, so none is %q: %s", ci.Hash, v.Against, x.FilesUnread)
		}
		if !x.HasFile {
			return no("against", "check-in %s has no file %q", ci.Hash, v.Against)
		}
		return nil
	}
	switch {
	case !x.Found:
		why := x.NoRecord
		if why == "" {
			why = "it is neither a thread's first post holding a record (E3) nor a workspace definition (D42)"
		}
		return no("against", "%s is no record: %s", v.Against, why)
	case !x.Counts:
		return no("against", "the record %s does not count: its sender %q holds neither admin nor setup (E3)", v.Against, x.Sender)
	case !slices.Contains(x.Branches, ci.Branch):
		return no("against", "record %s does not list the check-in's branch %q in its checkins (%s)", v.Against, ci.Branch, strings.Join(x.Branches, ", "))
	}
	return nil
}

// verdicts is each user's latest verdict on the check-in ci that counts
// (E6): SentVerdicts, each judged by VerdictCounts against what objective
// says of its X; a latest verdict that does not count is passed over with
// why, and its sender has none. The second list is every change passed
// over, for a reader that logs them.
func verdicts(ci fossilio.Info, changes []fossilio.TagChange, objective func(against string) objective) ([]auditVerdict, []passedVerdict) {
	sent, passed := sentVerdicts(changes)
	var kept []auditVerdict
	for _, v := range sent {
		if no := VerdictCounts(v.User, ci, v.Verdict, objective(v.Against)); no != nil {
			passed = append(passed, passedVerdict{Tag: v.Tag, Sender: v.User, Why: "its verdict does not count: " + no.Why})
			continue
		}
		kept = append(kept, v)
	}
	return kept, passed
}

// ReadVerdicts is Verdicts on the check-in ci, its tag history read from
// the repository and each X read once (Index.Objective).
func (x *Index) ReadVerdicts(ctx context.Context, ci fossilio.Info) ([]auditVerdict, []passedVerdict, error) {
	changes, err := x.repo.CheckinTags(ctx, ci.Hash)
	if err != nil {
		return nil, nil, err
	}
	sent, _ := sentVerdicts(changes)
	read := map[string]objective{}
	for _, v := range sent {
		if _, done := read[v.Against]; done {
			continue
		}
		o, err := x.Objective(ctx, ci, v.Against)
		if err != nil {
			return nil, nil, err
		}
		read[v.Against] = o
	}
	kept, passed := verdicts(ci, changes, func(against string) objective { return read[against] })
	return kept, passed, nil
}

// Objective reads what the repository says of against, the X of a verdict
// on the check-in ci (E6): for a full hash, the record it names (a
// protocol v1 record, or a workspace definition whose reviewers judge
// against it, D42), who sent it, whether that user holds admin or setup
// now (D7) and the branches it is about; for a path, whether ci holds a
// file there. A post never changes, so a record is read once.
func (x *Index) Objective(ctx context.Context, ci fossilio.Info, against string) (objective, error) {
	o := objective{Against: against, Record: messages.Verdict{Against: against}.NamesRecord()}
	if !o.Record {
		has, err := x.repo.CheckinHasFile(ctx, ci.Hash, against)
		if errors.Is(err, fossilio.ErrMalformed) || errors.Is(err, fossilio.ErrNotFound) {
			o.FilesUnread = err.Error()
			return o, nil
		}
		if err != nil {
			return o, fmt.Errorf("read the files of %s: %w", ci.Hash, err)
		}
		o.HasFile = has
		return o, nil
	}
	t, err := x.taskRecord(ctx, against)
	if err != nil {
		return o, err
	}
	o.NoRecord = t.why
	if t.rec != nil {
		o.Found, o.Sender, o.Branches = true, t.sender, slices.Clone(t.rec.Checkins)
		o.Counts = x.Privileged(ctx, t.sender)
		return o, nil
	}
	if err := x.Refresh(ctx); err != nil {
		return o, err
	}
	x.mu.Lock()
	e, ok := x.definitions[against]
	wd, isWorkspace := e.Note.(*messages.WorkspaceDefinition)
	var listens []Entry
	if ok && isWorkspace {
		listens = copies(x.listens[wd.Key()])
	}
	x.mu.Unlock()
	if !ok || !isWorkspace || !e.First() {
		return o, nil
	}
	o.Found, o.Sender, o.NoRecord = true, e.Sender, ""
	for _, l := range listens {
		if n, ok := l.Note.(*messages.ListenNote); ok && l.Record == against && n.Listener.Kind == messages.ListenBranch && !slices.Contains(o.Branches, n.Listener.Names) {
			o.Branches = append(o.Branches, n.Listener.Names)
		}
	}
	o.Counts = x.Privileged(ctx, e.Sender)
	return o, nil
}
