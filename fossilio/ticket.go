package fossilio

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// TicketChange is one change to a ticket, as read from the repository.
type TicketChange struct {
	Info           // Kind is KindTicketChange; Ticket is set
	Fields []Field // its J cards, in order
	// Comment is the text this change adds to the ticket's icomment field:
	// the value it appends ("+icomment") or sets ("icomment").
	Comment string
}

// TicketChanges returns a ticket's changes in the server's order. The ticket
// is named by its full id or a unique prefix of at least MinPrefix digits.
// Changes awaiting moderation are left out, and so is one whose bytes do
// not read (Options.PassedOver is told).
func (r *Repo) TicketChanges(ctx context.Context, ticket string) ([]TicketChange, error) {
	var out []TicketChange
	err := r.read(ctx, "read ticket", func(rd *reader) error {
		id := strings.ToLower(strings.TrimSpace(ticket))
		if len(id) < MinPrefix || len(id) > sha1Len || !isLowerHex(id) {
			return &HashError{Op: "read ticket", Repo: r.path, Hash: ticket, Err: ErrBadHash}
		}
		rows, err := rd.query(`SELECT tagid, tagname FROM tag WHERE tagname>=? AND tagname<? LIMIT 4`, "tkt-"+id, "tkt-"+id+"g")
		if err != nil {
			return err
		}
		var tagids []int64
		var names []string
		for rows.Next() {
			var tid int64
			var name string
			if err := rows.Scan(&tid, &name); err != nil {
				rows.Close()
				return err
			}
			tagids, names = append(tagids, tid), append(names, strings.TrimPrefix(name, "tkt-"))
		}
		rows.Close()
		switch {
		case len(tagids) == 0:
			return &HashError{Op: "read ticket", Repo: r.path, Hash: ticket, Err: ErrNotFound}
		case len(tagids) > 1:
			return &HashError{Op: "read ticket", Repo: r.path, Hash: ticket, Matches: names, Err: ErrAmbiguous}
		}
		hashes, err := rd.hashes(r.inOrder(`SELECT b.uuid FROM tagxref x JOIN blob b ON b.rid=x.rid {vjoin}
			WHERE x.tagid=? AND x.rid NOT IN (SELECT rid FROM private) ORDER BY {rcvid}, {rid}`), tagids[0])
		if err != nil {
			return err
		}
		for _, h := range hashes {
			c, err := rd.ticketChange(h)
			if rd.r.passOver(h, err) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// TicketChange reads one ticket change by hash or unique prefix.
func (r *Repo) TicketChange(ctx context.Context, hashOrPrefix string) (TicketChange, error) {
	var c TicketChange
	err := r.read(ctx, "read ticket change", func(rd *reader) error {
		full, _, err := rd.resolve(hashOrPrefix)
		if err != nil {
			return err
		}
		c, err = rd.ticketChange(full)
		return err
	})
	return c, err
}

func (rd *reader) ticketChange(hash string) (TicketChange, error) {
	info, a, err := rd.artifactOf(hash, KindTicketChange, "read ticket change")
	if err != nil {
		return TicketChange{}, err
	}
	c := TicketChange{Info: info, Fields: a.Fields}
	if c.Ticket == "" {
		c.Ticket = strings.ToLower(a.Ticket)
	}
	for _, f := range a.Fields {
		if f.Name == "+icomment" || f.Name == "icomment" {
			c.Comment = f.Value
		}
	}
	return c, nil
}

// Ticket reads a ticket's current fields from the ticket table, by full id.
func (r *Repo) Ticket(ctx context.Context, id string) (map[string]string, error) {
	out := map[string]string{}
	err := r.read(ctx, "read ticket", func(rd *reader) error {
		rows, err := rd.query(`SELECT * FROM ticket WHERE tkt_uuid=?`, strings.ToLower(id))
		if err != nil {
			return err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return err
		}
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return err
			}
			return &HashError{Op: "read ticket", Repo: r.path, Hash: id, Err: ErrNotFound}
		}
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for i, c := range cols {
			out[c] = vals[i].String
		}
		return nil
	})
	return out, err
}

// TicketSummary is one ticket as a list of recent tickets shows it.
type TicketSummary struct {
	Ticket  string // the ticket's id (tkt_uuid: 40 hex digits)
	Title   string
	Status  string
	Changed time.Time // the time written in its latest change (D card)
}

// recentTicketsQuery lists tickets by their latest visible change. Each
// change of a ticket tags itself tkt-ID (src/manifest.c); a change
// awaiting moderation counts for nothing.
const recentTicketsQuery = `SELECT g.tagid, substr(g.tagname, 5), max(x.mtime)
FROM tag g JOIN tagxref x ON x.tagid=g.tagid
WHERE g.tagname GLOB 'tkt-*' AND x.srcid=x.rid AND x.rid NOT IN (SELECT rid FROM private)
GROUP BY g.tagid
ORDER BY 3 DESC, 2
LIMIT ?`

// ticketVersionsQuery lists a ticket's visible changes in the order
// Fossil applies them when it rebuilds the ticket (ticket_rebuild_entry:
// by the time written in each).
const ticketVersionsQuery = `SELECT x.rid, b.uuid FROM tagxref x JOIN blob b ON b.rid=x.rid
WHERE x.tagid=? AND x.srcid=x.rid AND x.rid NOT IN (SELECT rid FROM private)
ORDER BY x.mtime, x.rid`

// RecentTickets returns the n tickets most recently changed, newest first;
// n is 1 to MaxRecent. A change awaiting moderation counts for nothing, as
// in TicketChanges: a ticket's title and status are what its visible
// changes make them, applied in order as Fossil applies them (a field set,
// or appended to with "+"), and a ticket made by a change awaiting
// moderation is not listed. This is the ticket as a clone sees it;
// Fossil's ticket table, which its reports read, also counts the changes
// awaiting moderation.
func (r *Repo) RecentTickets(ctx context.Context, n int) ([]TicketSummary, error) {
	const op = "list recent tickets"
	if err := r.checkRecent(op, n); err != nil {
		return nil, err
	}
	var out []TicketSummary
	err := r.read(ctx, op, func(rd *reader) error {
		rows, err := rd.query(recentTicketsQuery, n)
		if err != nil {
			return err
		}
		var tagids []int64
		for rows.Next() {
			var tagid int64
			var t TicketSummary
			var mtime float64
			if err := rows.Scan(&tagid, &t.Ticket, &mtime); err != nil {
				rows.Close()
				return err
			}
			t.Changed = julianToTime(mtime)
			tagids, out = append(tagids, tagid), append(out, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i, tagid := range tagids {
			if err := rd.ticketSummary(tagid, &out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ticketSummary applies a ticket's visible changes to its title and status.
func (rd *reader) ticketSummary(tagid int64, t *TicketSummary) error {
	type version struct {
		rid  int64
		hash string
	}
	versions, err := queryRows(rd, func(v *version) []any { return []any{&v.rid, &v.hash} }, ticketVersionsQuery, tagid)
	if err != nil {
		return err
	}
	for _, v := range versions {
		a, err := rd.artifact(v.rid, v.hash)
		if rd.r.passOver(v.hash, err) {
			continue
		}
		if err != nil {
			return err
		}
		if a.Type != TypeTicket {
			// Fossil's rebuild skips what does not parse as a ticket
			// change (manifest_get with CFTYPE_TICKET), and so does this.
			continue
		}
		for _, f := range a.Fields {
			switch f.Name {
			case "title":
				t.Title = f.Value
			case "+title":
				t.Title += f.Value
			case "status":
				t.Status = f.Value
			case "+status":
				t.Status += f.Value
			}
		}
	}
	return nil
}
