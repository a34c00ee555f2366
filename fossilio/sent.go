package fossilio

import (
	"bytes"
	"context"
	"fmt"
)

// sent is a forum post or a ticket change with its text, as SentBy lists it.
type sent struct {
	Info // Kind is KindPost or KindTicketChange; Sender is the login asked for
	// Text is a post's text, or what a ticket change adds to the ticket's
	// icomment field.
	Text string
}

// sentQuery lists a login's forum posts and ticket changes in the server's
// order. Fossil indexes no receipt of a blob, so it starts from the events,
// which name every post and ticket change once.
const sentQuery = `SELECT b.uuid, b.rid, e.type, CASE WHEN d.rid IS NULL AND ?2 THEN b.content END
FROM event e JOIN blob b ON b.rid=e.objid
JOIN rcvfrom rf ON rf.rcvid=b.rcvid JOIN user u ON u.uid=rf.uid LEFT JOIN delta d ON d.rid=b.rid
WHERE e.type IN ('f','t') AND u.login=?1 AND b.size>=0
	AND NOT EXISTS(SELECT 1 FROM private p WHERE p.rid=b.rid)
ORDER BY b.rcvid, b.rid`

// vouchedSentQuery is sentQuery on a vouched clone: the sender and the
// order are what the server vouched for.
const vouchedSentQuery = `SELECT b.uuid, b.rid, e.type, CASE WHEN d.rid IS NULL AND ?2 THEN b.content END
FROM event e JOIN blob b ON b.rid=e.objid
JOIN fx_ocx_receipt v ON v.hash=b.uuid LEFT JOIN delta d ON d.rid=b.rid
WHERE e.type IN ('f','t') AND v.login=?1 AND b.size>=0
	AND NOT EXISTS(SELECT 1 FROM private p WHERE p.rid=b.rid)
ORDER BY v.rcvid, v.rid`

// SentBy lists the forum posts and ticket changes the node's repository
// received from login (its receipts, never the name written inside), in the
// server's order. A post is listed in its first version only, since an edit
// never makes a note (protocol v1: a message is read from its first
// version), and nothing awaiting moderation is listed. When holding is not
// empty, only the artifacts whose bytes hold it are listed: every OCX note
// holds "```json" (a W payload and a fossilized J value alike keep it as it
// is), and the others are then never parsed. Only the node's repository
// knows who sent what: on a clone SentBy is refused (ErrBadInput).
func (r *Repo) SentBy(ctx context.Context, login, holding string) ([]sent, error) {
	if !r.node {
		return nil, fmt.Errorf("list what %q sent in %s: %w: a clone does not know who sent what", login, r.path, ErrBadInput)
	}
	var out []sent
	err := r.read(ctx, "list what "+login+" sent", func(rd *reader) error {
		type row struct {
			hash, typ string
			rid       int64
			// raw is the stored content when it is whole (no delta), read
			// in the same query so the filter costs no query of its own.
			raw []byte
		}
		list, err := queryRows(rd, func(x *row) []any { return []any{&x.hash, &x.rid, &x.typ, &x.raw} },
			r.pick(sentQuery, vouchedSentQuery), login, holding != "")
		if err != nil {
			return err
		}
		for _, x := range list {
			if holds, err := rd.holds(x.rid, x.hash, x.raw, holding); err != nil {
				return err
			} else if !holds {
				continue
			}
			switch x.typ {
			case "f":
				p, err := rd.post(x.hash)
				if passOverPost(rd.r, x.hash, err) {
					continue
				}
				if err != nil {
					return err
				}
				if p.Edit {
					continue
				}
				out = append(out, sent{Info: p.Info, Text: p.Text})
			case "t":
				c, err := rd.ticketChange(x.hash)
				if rd.r.passOver(x.hash, err) {
					continue
				}
				if err != nil {
					return err
				}
				out = append(out, sent{Info: c.Info, Text: c.Comment})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// holds reports whether the artifact (rid, hash; raw its compressed
// content when the query read it) contains holding; "" holds everything.
// An artifact the repository passes over holds nothing. The filter only
// passes over: what it keeps is read again by its caller, its hash
// checked and its cards parsed.
func (rd *reader) holds(rid int64, hash string, raw []byte, holding string) (bool, error) {
	if holding == "" {
		return true, nil
	}
	data, err := inflate(raw)
	if raw == nil || err != nil {
		data, err = rd.content(rid, hash)
	}
	if rd.r.passOver(hash, err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return bytes.Contains(data, []byte(holding)), nil
}
