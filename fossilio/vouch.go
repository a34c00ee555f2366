package fossilio

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"
)

// A node on another host reads the record from a clone of the server's
// repository that it pulls as its node user (issue 25, D72). A clone's own
// receipts name the node user for everything it pulled, and its user table
// is its own: who sent an artifact, where it stands in the server's order
// and who holds admin or setup are what the server says. The server's node
// vouches for each artifact (Repo.Receipts, served on the console's
// receipt page) and the node keeps what it was told in three tables of its
// clone, named fx_ as Fossil's rebuild keeps such tables (src/rebuild.c):
//
//	fx_ocx_receipt(hash, login, rcvid, rid, mtime, via)  what the server said of each artifact
//	fx_ocx_user(login, cap)                              the standing of each sender, as of the last pull
//	fx_ocx_vouch(name, value)                            'mark': the clone's newest receipt vouched for
//
// The server tells a node of its users only those its receipts name, each
// with whether it holds admin or setup (D81): fx_ocx_user holds each
// sender the clone knows, its cap 's' when it holds either, '' when not,
// and each pull asks again of every one of them (an artifact each sent),
// so that the standing read is the server's now.
//
// A Repo opened with OpenNode on such a clone (a vouched clone) reads the
// senders, the server's order and the users from them, and sees nothing
// the clone received past the mark: what the server has not vouched for
// has not arrived. A pull leaves the tables alone, and a rebuild keeps
// them for their prefix (tested).

// vouchSchema makes the tables a vouched clone keeps.
const vouchSchema = `
CREATE TABLE IF NOT EXISTS fx_ocx_receipt(hash TEXT PRIMARY KEY, login TEXT, rcvid INTEGER, rid INTEGER, mtime REAL, via INTEGER);
CREATE TABLE IF NOT EXISTS fx_ocx_user(login TEXT PRIMARY KEY, cap TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fx_ocx_vouch(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO fx_ocx_vouch(name, value) VALUES('mark', 0);`

// Receipt is what the server's repository says of one artifact it
// received: who sent it (its receipt's user, never the name written in
// it), where it stands in the server's order, and the standing of its
// sender. Known is false for an artifact the server does not hold.
type Receipt struct {
	Hash  string
	Known bool
	// Login is the receipt's user, "" when the receipt names none (an
	// artifact made by `fossil init`, a user since deleted).
	Login      string
	Rcvid, Rid int64
	Received   time.Time
	Via        Via
	// Privileged: Login holds admin or setup now (Privileged).
	Privileged bool
	// PrivilegedAtReceipt says whether Login held admin or setup when the
	// artifact was received: known (non-nil) only when no capability that
	// counts (the user's own, nobody's, anonymous's, reader's and
	// developer's) has changed since (Fossil stamps a user's row with the
	// time of each change); nil when one has.
	PrivilegedAtReceipt *bool
}

// receiptQuery reads a receipt and when its user's row last changed.
const receiptQuery = `SELECT b.rid, b.rcvid, u.login, rf.nonce IS NOT NULL, rf.ipaddr IS NOT NULL, rf.mtime, u.mtime
FROM blob b LEFT JOIN rcvfrom rf ON rf.rcvid=b.rcvid LEFT JOIN user u ON u.uid=rf.uid
WHERE b.uuid=? AND b.size>=0`

// maxReceipts bounds the hashes one Receipts call (and one ask of the
// console's receipt page) answers.
const maxReceipts = 1000

// Receipts answers, for each full hash, what the server's repository says
// of it (Receipt), in one read transaction, in the order given; the user
// table read in the same transaction is returned with them. Only the
// server's own repository can say this: on a clone it is refused.
func (r *Repo) Receipts(ctx context.Context, hashes ...string) ([]Receipt, []User, error) {
	if !r.node || r.vouched {
		return nil, nil, fmt.Errorf("answer receipts from %s: %w: only the server's own repository knows who sent what", r.path, ErrBadInput)
	}
	if len(hashes) > maxReceipts {
		return nil, nil, fmt.Errorf("answer receipts from %s: %w: %d hashes, more than %d at once", r.path, ErrBadInput, len(hashes), maxReceipts)
	}
	for _, h := range hashes {
		if !IsHash(h) {
			return nil, nil, &HashError{Op: "answer receipts", Repo: r.path, Hash: h, Err: ErrBadHash}
		}
	}
	var out []Receipt
	var users []User
	err := r.read(ctx, "answer receipts", func(rd *reader) error {
		var err error
		if users, err = rd.users(); err != nil {
			return err
		}
		st := newStandings(users)
		// The capabilities of the pseudo-users count for everyone (D27), so
		// a change of theirs is a change of everyone's standing.
		var pseudoChanged sql.NullFloat64
		if _, err := rd.row(`SELECT max(mtime) FROM user WHERE login IN ('nobody','anonymous','reader','developer')`, nil, &pseudoChanged); err != nil {
			return err
		}
		out = make([]Receipt, 0, len(hashes))
		for _, h := range hashes {
			rc := Receipt{Hash: h}
			var (
				rcvid            sql.NullInt64
				login            sql.NullString
				viaSync, viaAddr sql.NullBool
				rtime            sql.NullFloat64
				changed          sql.NullFloat64
			)
			found, err := rd.row(receiptQuery, []any{h}, &rc.Rid, &rcvid, &login, &viaSync, &viaAddr, &rtime, &changed)
			if err != nil {
				return err
			}
			if !found {
				out = append(out, rc)
				continue
			}
			rc.Known, rc.Rcvid, rc.Login = true, rcvid.Int64, login.String
			rc.Received = julianToTime(rtime.Float64)
			rc.Via = viaOf(rtime.Valid, viaSync.Bool, viaAddr.Bool)
			rc.Privileged = st.privileged(rc.Login)
			// Fossil stamps user.mtime in whole seconds since 1970
			// (now()), a receipt in Julian days to the millisecond: a
			// change stamped S was made within [S, S+1), so only a receipt
			// from S+1 on is surely after it.
			last := max(changed.Float64, pseudoChanged.Float64)
			if rtime.Valid && float64(rc.Received.UnixMilli())/1000 >= last+1 {
				held := rc.Privileged
				rc.PrivilegedAtReceipt = &held
			}
			out = append(out, rc)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, users, nil
}

// viaOf says how an artifact arrived from its receipt's columns.
func viaOf(received, nonce, addr bool) Via {
	switch {
	case !received:
		return ViaUnknown
	case nonce:
		return ViaSync
	case addr:
		return ViaWeb
	}
	return ViaLocal
}

// standings answers "holds admin or setup" from one read of a user table.
type standings map[string]bool

func newStandings(users []User) standings {
	s := standings{}
	for _, u := range PrivilegedAmong(users) {
		s[u] = true
	}
	return s
}

func (s standings) privileged(login string) bool { return login != "" && s[login] }

// Standing is what a vouched clone keeps of a user: whether it holds
// admin or setup, as the server said at its last answer (D81).
type Standing struct {
	Login      string
	Privileged bool
}

// sender is a login the clone's vouched receipts name, and the newest
// artifact it sent there: what a keeper asks of again for its standing.
type sender struct{ Login, Hash string }

// VouchedQuery is what the server vouches for, as a vouched clone's keeper
// asks it: each artifact the clone received after its mark that the
// server's word is needed for (Unvouched), the newest receipt it read,
// and the senders whose standing is asked again.
type VouchedQuery struct {
	// Senders are the senders the clone knows, each with an artifact it
	// sent, by login.
	Senders []sender
	// Through is the clone's newest receipt: once the server has answered
	// for Hashes, the clone's mark moves to it.
	Through int64
	// Hashes are the artifacts received after the mark that stand in the
	// record: those Fossil cross-linked (an event: a check-in, a post, a
	// ticket change, a tag change, a wiki page) and those a tag names;
	// file contents stand in no order and have no sender that counts.
	Hashes []string
}

// unvouchedQuery lists what a clone received in a range of its receipts
// that stands in the record, in the clone's order.
const unvouchedQuery = `SELECT b.uuid FROM blob b WHERE b.rcvid>? AND b.rcvid<=? AND b.size>=0
AND (EXISTS(SELECT 1 FROM event e WHERE e.objid=b.rid) OR EXISTS(SELECT 1 FROM tagxref x WHERE x.srcid=b.rid))
AND NOT EXISTS(SELECT 1 FROM fx_ocx_receipt v WHERE v.hash=b.uuid)
ORDER BY b.rcvid, b.rid`

// Unvouched reads, on a vouched clone, what the server must vouch for
// before the clone's mark moves past its newest receipt.
func (a *Admin) Unvouched(ctx context.Context) (VouchedQuery, error) {
	var q VouchedQuery
	err := a.tx(ctx, "list what the server has not vouched for", false, func(tx *sql.Tx) error {
		var mark int64
		if err := tx.QueryRowContext(ctx, `SELECT value FROM fx_ocx_vouch WHERE name='mark'`).Scan(&mark); err != nil {
			return notVouched(err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(rcvid), 0) FROM rcvfrom`).Scan(&q.Through); err != nil {
			return err
		}
		senders, err := tx.QueryContext(ctx, sendersQuery)
		if err != nil {
			return err
		}
		for senders.Next() {
			var s sender
			var rcvid sql.NullInt64
			if err := senders.Scan(&s.Login, &s.Hash, &rcvid); err != nil {
				senders.Close()
				return err
			}
			q.Senders = append(q.Senders, s)
		}
		senders.Close()
		if err := senders.Err(); err != nil {
			return err
		}
		if q.Through <= mark {
			q.Through = mark
			return nil
		}
		rows, err := tx.QueryContext(ctx, unvouchedQuery, mark, q.Through)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h string
			if err := rows.Scan(&h); err != nil {
				return err
			}
			q.Hashes = append(q.Hashes, h)
		}
		return rows.Err()
	})
	return q, err
}

// sendersQuery lists each login the vouched receipts name with the
// newest artifact it sent (SQLite takes the bare columns from the row of
// max()).
const sendersQuery = `SELECT login, hash, max(rcvid) FROM fx_ocx_receipt WHERE login IS NOT NULL AND login<>'' GROUP BY login ORDER BY login`

// notVouched names a clone that keeps no vouch tables.
func notVouched(err error) error {
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return fmt.Errorf("%w: not a clone a node on another host keeps (no fx_ocx_vouch table; `ocx init --other-host` makes one)", ErrBadInput)
	}
	return err
}

// MakeVouched readies a clone for a node on another host: the tables of
// what the server vouches for, its mark at 0 (nothing vouched for yet).
// Made again, it changes nothing.
func (a *Admin) MakeVouched(ctx context.Context) error {
	return a.writeTx(ctx, "make the vouch tables", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, vouchSchema)
		return err
	})
}

// StoreVouched keeps what the server vouched for in the clone, in one
// write transaction: each receipt (one the server does not know is kept
// with no login: an unknown sender, never trusted), the standing of each
// sender the server named in place of the last (nil keeps the last), and
// the mark moved on to through (never back: another keeper may have
// moved it further).
func (a *Admin) StoreVouched(ctx context.Context, through int64, receipts []Receipt, standings []Standing) error {
	return a.writeTx(ctx, "keep what the server vouched for", func(tx *sql.Tx) error {
		for _, rc := range receipts {
			if !IsHash(rc.Hash) {
				return fmt.Errorf("%w: a receipt for %q, not a hash", ErrBadInput, rc.Hash)
			}
			var login, rcvid, rid, mtime, via any
			if rc.Known {
				login, rcvid, rid, via = rc.Login, rc.Rcvid, rc.Rid, int64(rc.Via)
				mtime = timeToJulian(rc.Received)
			}
			if _, err := tx.ExecContext(ctx, `REPLACE INTO fx_ocx_receipt(hash, login, rcvid, rid, mtime, via) VALUES(?,?,?,?,?,?)`,
				rc.Hash, login, rcvid, rid, mtime, via); err != nil {
				return notVouched(err)
			}
		}
		if standings != nil {
			if _, err := tx.ExecContext(ctx, `DELETE FROM fx_ocx_user`); err != nil {
				return notVouched(err)
			}
			for _, u := range standings {
				caps := ""
				if u.Privileged {
					caps = "s"
				}
				if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO fx_ocx_user(login, cap) VALUES(?,?)`, u.Login, caps); err != nil {
					return err
				}
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE fx_ocx_vouch SET value=max(value, ?) WHERE name='mark'`, through)
		return notVouched(err)
	})
}

// inOrder renders a query for r. In it {vjoin} joins each blob b to what
// the server vouched for it (nothing on the server's own repository),
// {rcvid} and {rid} are b's place in the server's order, and {sender} the
// login of its receipt (NULL when none, or not vouched for).
func (r *Repo) inOrder(q string) string {
	key := orderKey{q, r.vouched}
	if s, ok := orderQueries.Load(key); ok {
		return s.(string)
	}
	rep := nodeOrder
	if r.vouched {
		rep = vouchedOrder
	}
	s := rep.Replace(q)
	orderQueries.Store(key, s)
	return s
}

type orderKey struct {
	q       string
	vouched bool
}

var (
	orderQueries sync.Map // orderKey → string
	nodeOrder    = strings.NewReplacer("{vjoin}", "", "{rcvid}", "b.rcvid", "{rid}", "b.rid",
		"{sender}", "(SELECT u.login FROM rcvfrom rf JOIN user u ON u.uid=rf.uid WHERE rf.rcvid=b.rcvid)")
	vouchedOrder = strings.NewReplacer("{vjoin}", "LEFT JOIN fx_ocx_receipt v ON v.hash=b.uuid",
		"{rcvid}", "coalesce(v.rcvid, 0)", "{rid}", "coalesce(v.rid, 0)", "{sender}", "v.login")
)

// vouchedInfoQuery is infoQuery on a vouched clone: the server's receipt
// (login, order, time, how it came) from what it vouched.
const vouchedInfoQuery = `SELECT b.rid, b.rcvid, v.login, 0, 0, v.mtime,
	e.type, e.mtime, coalesce(e.euser, e.user), coalesce(e.ecomment, e.comment),
	EXISTS(SELECT 1 FROM private p WHERE p.rid=b.rid), v.rcvid, v.rid, v.via
FROM blob b LEFT JOIN fx_ocx_receipt v ON v.hash=b.uuid
LEFT JOIN event e ON e.objid=b.rid
WHERE b.uuid=? AND b.size>=0`

// Vouched says whether r is a vouched clone: a node on another host's
// clone of the server, whose senders, order and users the server vouched.
func (r *Repo) Vouched() bool { return r.vouched }
