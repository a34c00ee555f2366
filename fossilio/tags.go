package fossilio

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// TagChange is one T card aimed at a check-in: set by the check-in itself or
// by a later tag change (control artifact), with who sent it and when.
type TagChange struct {
	Tag           // Op, Name (raw, e.g. "sym-trunk", "ci"), Target (the check-in), Value
	Hash   string // the artifact that carries the T card
	Sender string // who sent that artifact ("" when unknown, as in a clone)
	Author string // the name written in it, which proves nothing
	Time   time.Time
	Rcvid  int64
	Rid    int64
}

// CheckinTags returns every tag change aimed at a check-in, the check-in's
// own T cards first, then each tag change in the server's order. Fossil's
// tag tables keep only the latest value of each tag; this is the history.
// An artifact whose bytes do not read (the check-in's own manifest, a tag
// change) gives no tag and is passed over (Options.PassedOver is told).
func (r *Repo) CheckinTags(ctx context.Context, checkin string) ([]TagChange, error) {
	var out []TagChange
	err := r.read(ctx, "read check-in tags", func(rd *reader) error {
		full, _, err := rd.resolve(checkin)
		if err != nil {
			return err
		}
		ci, err := rd.info(full)
		if err != nil {
			return err
		}
		if ci.Kind != KindCheckin {
			return fmt.Errorf("read tags of %s in %s: %w: it is a %s", full, r.path, ErrWrongKind, ci.Kind)
		}
		own, err := rd.artifact(ci.Row, full)
		if rd.r.passOver(full, err) {
			own = &Artifact{} // its own tags are unknown; the tag changes still count
		} else if err != nil {
			return err
		}
		for _, t := range own.Tags {
			if t.Target == "" {
				t.Target = full
			}
			if t.Target == full {
				out = append(out, tagChange(t, ci))
			}
		}
		// Each tag change's timeline entry names every target by at least
		// its first 16 digits ("Edit [HASH|..."), which narrows the search
		// to the tag changes that may name this check-in; each is then
		// parsed to be sure.
		candidates, err := rd.hashes(r.inOrder(`SELECT b.uuid FROM event e JOIN blob b ON b.rid=e.objid {vjoin}
			WHERE e.type='g' AND instr(e.comment, ?)>0 AND b.rid NOT IN (SELECT rid FROM private)
			ORDER BY {rcvid}, {rid}`), "Edit ["+full[:16])
		if err != nil {
			return err
		}
		for _, h := range candidates {
			info, err := rd.info(h)
			if err != nil {
				return err
			}
			for _, t := range info.Tags {
				if t.Target == full {
					out = append(out, tagChange(t, info))
				}
			}
		}
		return nil
	})
	return out, err
}

func tagChange(t Tag, from Info) TagChange {
	return TagChange{Tag: t, Hash: from.Hash, Sender: from.Sender, Author: from.Author,
		Time: from.Time, Rcvid: from.Rcvid, Rid: from.Rid}
}

// LatestTag returns the latest change of the raw tag name among changes,
// counting only those sent by sender when sender is not "". A cancel counts
// as a change: ok is false when there is none, and the returned change's Op
// tells whether the tag is set (TagAdd, TagPropagate) or cancelled.
func LatestTag(changes []TagChange, name, sender string) (TagChange, bool) {
	for _, c := range slices.Backward(changes) {
		if c.Name == name && (sender == "" || c.Sender == sender) {
			return c, true
		}
	}
	return TagChange{}, false
}

// CheckinsOnBranch returns the check-ins on a branch that the repository
// received after the artifact named by after (any artifact: a listen note,
// say), in the server's order. With after "" it returns every check-in on
// the branch.
func (r *Repo) CheckinsOnBranch(ctx context.Context, branch, after string) ([]Info, error) {
	var out []Info
	err := r.read(ctx, "list check-ins on branch", func(rd *reader) error {
		var rcvid, rid int64
		if after != "" {
			full, _, err := rd.resolve(after)
			if err != nil {
				return err
			}
			if _, err := rd.row(r.inOrder(`SELECT coalesce({rcvid}, 0), {rid} FROM blob b {vjoin} WHERE b.uuid=?`), []any{full}, &rcvid, &rid); err != nil {
				return err
			}
		}
		hashes, err := rd.hashes(r.inOrder(`SELECT b.uuid FROM tagxref x JOIN blob b ON b.rid=x.rid JOIN event e ON e.objid=x.rid AND e.type='ci' {vjoin}
			WHERE x.tagid=(SELECT tagid FROM tag WHERE tagname='branch') AND x.tagtype>0 AND x.value=?
			AND ({rcvid}>? OR ({rcvid}=? AND {rid}>?)) AND b.rid NOT IN (SELECT rid FROM private)
			ORDER BY {rcvid}, {rid}`), branch, rcvid, rcvid, rid)
		if err != nil {
			return err
		}
		out, err = rd.infos(out, hashes)
		return err
	})
	return out, err
}

// Checkins returns every check-in of the repository, in the order it
// stored them (by row: a clone's own check-ins after what it pulled).
func (r *Repo) Checkins(ctx context.Context) ([]Info, error) {
	var out []Info
	err := r.read(ctx, "list check-ins", func(rd *reader) error {
		hashes, err := rd.hashes(`SELECT b.uuid FROM event e JOIN blob b ON b.rid=e.objid
			WHERE e.type='ci' AND b.rid NOT IN (SELECT rid FROM private) ORDER BY b.rid`)
		if err != nil {
			return err
		}
		out, err = rd.infos(out, hashes)
		return err
	})
	return out, err
}

// Lacks returns those of the full hashes the repository does not hold
// (a phantom counts as not held), in the order given.
func (r *Repo) Lacks(ctx context.Context, hashes ...string) ([]string, error) {
	var out []string
	err := r.read(ctx, "look up artifacts", func(rd *reader) error {
		for _, h := range hashes {
			var size int64
			found, err := rd.row(`SELECT size FROM blob WHERE uuid=?`, []any{h}, &size)
			if err != nil {
				return err
			}
			if !found || size < 0 {
				out = append(out, h)
			}
		}
		return nil
	})
	return out, err
}

// Tagged returns the check-ins that carry, or carried, the raw tag name,
// the most recently tagged first, at most limit of them: by the receipt
// of the tag change Fossil keeps for each (then its row), the server's
// order, never by the time written in it, which anyone who may push
// writes as they like (D47).
func (r *Repo) Tagged(ctx context.Context, name string, limit int) ([]string, error) {
	var out []string
	err := r.read(ctx, "list tagged check-ins", func(rd *reader) error {
		var err error
		out, err = rd.hashes(`SELECT b.uuid FROM tagxref x JOIN blob b ON b.rid=x.rid JOIN event e ON e.objid=x.rid AND e.type='ci'
			LEFT JOIN blob s ON s.rid=x.srcid `+r.pick(`WHERE`, `LEFT JOIN fx_ocx_receipt sv ON sv.hash=s.uuid WHERE`)+`
			x.tagid=(SELECT tagid FROM tag WHERE tagname=?) AND b.rid NOT IN (SELECT rid FROM private)
			ORDER BY `+r.pick(`coalesce(s.rcvid, 0) DESC, x.srcid DESC`, `coalesce(sv.rcvid, 0) DESC, coalesce(sv.rid, 0) DESC`)+`, b.rid DESC LIMIT ?`, name, limit)
		return err
	})
	return out, err
}

// BranchState reads what the node's repository holds of a check-in's
// branch (Artifact.Branch): its "branch" tag's value and whether it
// propagates. found is false when the repository lacks the check-in (or
// holds only a phantom of it).
func (r *Repo) BranchState(ctx context.Context, checkin string) (st BranchState, found bool, err error) {
	err = r.read(ctx, "read a check-in's branch", func(rd *reader) error {
		var rid, size int64
		ok, err := rd.row(`SELECT rid, size FROM blob WHERE uuid=?`, []any{checkin}, &rid, &size)
		if err != nil || !ok || size < 0 {
			return err
		}
		found = true
		var value sql.NullString
		var tagtype int
		ok, err = rd.row(`SELECT value, tagtype FROM tagxref WHERE rid=? AND tagid=(SELECT tagid FROM tag WHERE tagname='branch')`, []any{rid}, &value, &tagtype)
		if err != nil || !ok || tagtype == 0 {
			return err
		}
		st = BranchState{Name: value.String, Propagates: tagtype == 2}
		return nil
	})
	return st, found, err
}
