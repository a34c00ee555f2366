package fossilio

import (
	"context"
	"time"
)

// branch is one open branch: its name and its latest check-in.
type branch struct {
	Name    string
	Tip     string    // the full hash of the branch's latest check-in
	TipTime time.Time // that check-in's time (its D card, or a date tag's edit)
}

// branchesQuery lists each branch with its latest check-in, newest first,
// as Fossil's branch list does (src/branch.c, the tmp_brlist table): every
// check-in carries its branch's propagating "branch" tag, a branch's
// latest check-in is the one with the latest time, and the branch is
// closed when that check-in carries a "closed" tag. Private check-ins
// (fossil commit --private), which sync sends to no clone, are not
// counted. Of two check-ins with the same time, the later stored is the
// latest.
const branchesQuery = `WITH checkin AS (
	SELECT x.value AS name, x.rid AS rid, e.mtime AS mtime,
		row_number() OVER (PARTITION BY x.value ORDER BY e.mtime DESC, x.rid DESC) AS age
	FROM tagxref x JOIN event e ON e.objid=x.rid AND e.type='ci'
	WHERE x.tagid=(SELECT tagid FROM tag WHERE tagname='branch') AND x.tagtype>0
		AND x.rid NOT IN (SELECT rid FROM private)
)
SELECT t.name, b.uuid, t.mtime FROM checkin t JOIN blob b ON b.rid=t.rid
WHERE t.age=1 AND NOT EXISTS(SELECT 1 FROM tagxref c WHERE c.rid=t.rid AND c.tagtype>0
	AND c.tagid=(SELECT tagid FROM tag WHERE tagname='closed'))
ORDER BY t.mtime DESC, t.name`

// Branches returns the open branches, the one with the latest check-in
// first. A branch is open when its latest check-in carries no "closed" tag
// (a closed tag cancelled later opens it again), which is how Fossil's
// `fossil branch list` and /brlist tell.
func (r *Repo) Branches(ctx context.Context) ([]branch, error) {
	var out []branch
	err := r.read(ctx, "list branches", func(rd *reader) error {
		rows, err := rd.query(branchesQuery)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b branch
			var mtime float64
			if err := rows.Scan(&b.Name, &b.Tip, &mtime); err != nil {
				return err
			}
			b.TipTime = julianToTime(mtime)
			out = append(out, b)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
