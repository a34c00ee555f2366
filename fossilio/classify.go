package fossilio

import (
	"context"
	"database/sql"
	"slices"
	"time"
)

// Kind is what an artifact is, as OCX's hook and daemon tell artifacts apart.
type Kind int

// The kinds of artifact OCX tells apart.
const (
	KindOther        Kind = iota // file content, wiki, technote, cluster, unparsable, ...
	KindCheckin                  // a check-in manifest
	KindPost                     // a forum post (new thread, reply, edit, deletion)
	KindTicketChange             // a ticket change
	KindTagChange                // a control artifact: tags on other artifacts
)

var kindNames = [...]string{"other", "check-in", "forum-post", "ticket-change", "tag-change"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind?"
}

// Via says how an artifact reached the repository.
type Via int

// How an artifact arrived, read from its receipt.
const (
	ViaUnknown Via = iota // no receipt
	ViaSync               // an authenticated sync (the receipt has a login nonce)
	ViaWeb                // a web page (an address, no nonce)
	ViaLocal              // a command on the host itself (neither)
)

var viaNames = [...]string{"unknown", "sync", "web", "local"}

func (v Via) String() string {
	if v >= 0 && int(v) < len(viaNames) {
		return viaNames[v]
	}
	return "via?"
}

// Info is what the hook and the daemon need to know about one artifact.
type Info struct {
	Hash string
	Kind Kind

	// Sender is the login the node's repository recorded as having sent the
	// artifact (its receipt), never the name written inside it. It is ""
	// when unknown: always in a clone (OpenClone), or without a receipt.
	Sender string
	// Author is the name written inside the artifact (its U card). It proves
	// nothing: any user with push rights can write any name there.
	Author string
	Via    Via
	// Rcvid and Rid place the artifact in the server's order: by receipt,
	// then by row. On a node on another host they are the server's, as
	// the server vouched for them (vouch.go); 0 for an artifact it has not
	// vouched for.
	Rcvid, Rid int64
	// Receipt and Row are where the artifact stands in this file: the
	// receipt that brought it, which a reader following what the file
	// received keeps as its mark, and the row its bytes are read from. On
	// the server's node they are Rcvid and Rid.
	Receipt, Row int64
	Received     time.Time // when its receipt was made (the server's)
	Time         time.Time // the time written inside it (D card)

	Branch  string // check-in: its branch ("trunk" when it carries none)
	Comment string // check-in: its comment, as edited

	Root      string // post: the thread's root post (its first version)
	InReplyTo string // post: the post it replies to, "" for a thread's first post
	Edit      bool   // post: it replaces an earlier version of a post
	Pending   bool   // post: it awaits moderation (private until approved)

	Ticket string // ticket change: the ticket's id

	Tags    []Tag    // tag change: its T cards
	Targets []string // tag change: the artifacts it tags, each once

	// Unparsed says why a tag change's own bytes do not read as the node
	// parses them (Fossil, whose parser reads some cards more widely, took
	// it for one): its tags are unknown, and every reader passes over it
	// (Options.PassedOver is told). One bad artifact costs only itself.
	Unparsed string
}

const infoQuery = `SELECT b.rid, b.rcvid, u.login, rf.nonce IS NOT NULL, rf.ipaddr IS NOT NULL, rf.mtime,
	e.type, e.mtime, coalesce(e.euser, e.user), coalesce(e.ecomment, e.comment),
	EXISTS(SELECT 1 FROM private p WHERE p.rid=b.rid)
FROM blob b LEFT JOIN rcvfrom rf ON rf.rcvid=b.rcvid LEFT JOIN user u ON u.uid=rf.uid
LEFT JOIN event e ON e.objid=b.rid
WHERE b.uuid=? AND b.size>=0`

const branchQuery = `SELECT value FROM tagxref WHERE rid=? AND tagtype>0
	AND tagid=(SELECT tagid FROM tag WHERE tagname='branch')`

const forumQuery = `SELECT r.uuid, i.uuid, f.fprev IS NOT NULL
FROM forumpost f JOIN blob r ON r.rid=f.froot LEFT JOIN blob i ON i.rid=f.firt
WHERE f.fpid=?`

const ticketQuery = `SELECT substr(t.tagname, 5) FROM tagxref x JOIN tag t ON t.tagid=x.tagid
WHERE x.rid=? AND t.tagname GLOB 'tkt-*' LIMIT 1`

// Classify tells, for each hash the after-receive hook lists, what the
// artifact is and who sent it, in one read transaction of the repository. The
// result has one Info per hash, in the order given. Hashes must be full
// (the hook lists full hashes); an unknown one is a *HashError (ErrNotFound).
func (r *Repo) Classify(ctx context.Context, hashes ...string) ([]Info, error) {
	out := make([]Info, 0, len(hashes))
	err := r.read(ctx, "classify", func(rd *reader) error {
		var err error
		out, err = rd.infos(out, hashes)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Info classifies one artifact named by a full hash or a unique prefix.
func (r *Repo) Info(ctx context.Context, hashOrPrefix string) (Info, error) {
	var info Info
	err := r.read(ctx, "classify", func(rd *reader) error {
		full, _, err := rd.resolve(hashOrPrefix)
		if err != nil {
			return err
		}
		info, err = rd.info(full)
		return err
	})
	return info, err
}

// infos appends to out the Info of each of the full hashes, in order.
func (rd *reader) infos(out []Info, hashes []string) ([]Info, error) {
	for _, h := range hashes {
		info, err := rd.info(h)
		if err != nil {
			return out, err
		}
		out = append(out, info)
	}
	return out, nil
}

func (rd *reader) info(hash string) (Info, error) {
	if !IsHash(hash) {
		return Info{}, &HashError{Op: "classify", Repo: rd.r.path, Hash: hash, Err: ErrBadHash}
	}
	info := Info{Hash: hash}
	var (
		login, etype, author, comment sql.NullString
		rcvid                         sql.NullInt64
		viaSync, viaAddr              sql.NullBool
		rtime, etime                  sql.NullFloat64
		private                       bool
	)
	var (
		vRcvid, vRid sql.NullInt64
		vVia         sql.NullInt64
	)
	q, dest := infoQuery, []any{&info.Row, &rcvid, &login, &viaSync, &viaAddr, &rtime,
		&etype, &etime, &author, &comment, &private}
	if rd.r.vouched {
		q, dest = vouchedInfoQuery, append(dest, &vRcvid, &vRid, &vVia)
	}
	found, err := rd.row(q, []any{hash}, dest...)
	if err != nil {
		return Info{}, err
	}
	if !found {
		return Info{}, &HashError{Op: "classify", Repo: rd.r.path, Hash: hash, Err: ErrNotFound}
	}
	info.Receipt = rcvid.Int64
	switch {
	case rd.r.vouched:
		// The server's word, as it vouched for the artifact; nothing for
		// one it has not (yet): an unknown sender, never trusted.
		info.Sender, info.Rcvid, info.Rid = login.String, vRcvid.Int64, vRid.Int64
		info.Via = Via(vVia.Int64)
		if !vRcvid.Valid {
			info.Via = ViaUnknown
		}
	case rd.r.node:
		info.Sender, info.Rcvid, info.Rid = login.String, rcvid.Int64, info.Row
	default:
		info.Rcvid, info.Rid = rcvid.Int64, info.Row
	}
	if !rd.r.vouched {
		switch {
		case !rtime.Valid:
			info.Via = ViaUnknown
		case viaSync.Bool:
			info.Via = ViaSync
		case viaAddr.Bool:
			info.Via = ViaWeb
		default:
			info.Via = ViaLocal
		}
	}
	info.Received = julianToTime(rtime.Float64)
	info.Time = julianToTime(etime.Float64)
	info.Author = author.String
	switch etype.String {
	case "ci":
		info.Kind = KindCheckin
		info.Comment = comment.String
		var branch sql.NullString
		if _, err := rd.row(branchQuery, []any{info.Row}, &branch); err != nil {
			return Info{}, err
		}
		info.Branch = branch.String
		if info.Branch == "" {
			info.Branch = "trunk"
		}
	case "f":
		info.Kind = KindPost
		info.Pending = private
		var root, irt sql.NullString
		if _, err := rd.row(forumQuery, []any{info.Row}, &root, &irt, &info.Edit); err != nil {
			return Info{}, err
		}
		info.Root, info.InReplyTo = root.String, irt.String
	case "t":
		info.Kind = KindTicketChange
		var id sql.NullString
		if _, err := rd.row(ticketQuery, []any{info.Row}, &id); err != nil {
			return Info{}, err
		}
		info.Ticket = id.String
	case "g":
		info.Kind = KindTagChange
		// The tag tables keep only each tag's latest setting, so the
		// artifact itself is what says which tags it set and where.
		a, err := rd.artifact(info.Row, hash)
		if rd.r.passOver(hash, err) {
			info.Unparsed = err.Error()
			return info, nil
		}
		if err != nil {
			return Info{}, err
		}
		info.Tags = a.Tags
		for _, t := range a.Tags {
			if !slices.Contains(info.Targets, t.Target) {
				info.Targets = append(info.Targets, t.Target)
			}
		}
	}
	return info, nil
}

// Received lists the artifacts received after receipt number after, in the
// server's order, and the newest receipt number. The hook can keep its own
// mark with it: Fossil's own list skips the first receipt after a day
// without any (docs/fossil.md). Both stop before the oldest receipt after
// after that a web page is still writing (unfinishedQuery): a reader that
// kept its mark past it would never see it for what it is.
func (r *Repo) Received(ctx context.Context, after int64) (hashes []string, last int64, err error) {
	err = r.read(ctx, "list received", func(rd *reader) error {
		var err error
		if last, err = rd.finished(after); err != nil {
			return err
		}
		hashes, err = rd.hashes(rd.r.inOrder(receivedQuery), after, last)
		return err
	})
	return hashes, last, err
}

// receivedQuery lists the artifacts of the receipts after ? up to ?: by
// receipt, then in the server's order (on a vouched clone a pull's receipt
// holds what the server received in many, stored in the order of their
// hashes), then by row.
const receivedQuery = `SELECT b.uuid FROM blob b {vjoin} WHERE b.rcvid>? AND b.rcvid<=? AND b.size>=0 ORDER BY b.rcvid, {rcvid}, {rid}, b.rid`

// UnfinishedFor is how long a receipt a web page made may stay unfinished
// (unfinishedQuery) before it counts as finished whatever it holds: a
// cross-link that failed must not hold every later receipt back for good.
const UnfinishedFor = 10 * time.Second

// unfinishedQuery finds the oldest receipt after ? that a web page is still
// writing. Fossil's forms store an artifact (its blob and its receipt) in one
// transaction and cross-link it (its event, forumpost or ticket rows) in the
// next (wiki_put: content_put_ex, then manifest_crosslink), so for a moment,
// about a millisecond on an idle host, a reader sees a post that is no post
// yet (VERIFIED with a reader polling every 0.5 ms beside a web post). Sync
// and the commands on the host write both in one transaction. Such a
// receipt was made by a web page (no nonce, an address) less than
// UnfinishedFor ago, holds artifacts, and none of them is cross-linked: every
// artifact a page makes has an event row once it is.
const unfinishedQuery = `SELECT min(rf.rcvid) FROM rcvfrom rf
WHERE rf.rcvid>? AND rf.nonce IS NULL AND rf.ipaddr IS NOT NULL AND rf.mtime>julianday('now')-?
AND EXISTS(SELECT 1 FROM blob b WHERE b.rcvid=rf.rcvid AND b.size>=0)
AND NOT EXISTS(SELECT 1 FROM blob b JOIN event e ON e.objid=b.rid WHERE b.rcvid=rf.rcvid)`

// finished is the newest receipt number, or the one before the oldest
// unfinished receipt after after; 0 when the repository received nothing.
// On a vouched clone it is the newest receipt the server vouched for:
// what it has not vouched for has not arrived (D72), and a pull writes
// each receipt whole, in one transaction.
func (rd *reader) finished(after int64) (int64, error) {
	if rd.r.vouched {
		var mark int64
		_, err := rd.row(`SELECT min(value, (SELECT coalesce(max(rcvid), 0) FROM rcvfrom)) FROM fx_ocx_vouch WHERE name='mark'`, nil, &mark)
		return mark, err
	}
	var newest, unfinished sql.NullInt64
	if _, err := rd.row(`SELECT max(rcvid) FROM rcvfrom`, nil, &newest); err != nil {
		return 0, err
	}
	if _, err := rd.row(unfinishedQuery, []any{after, UnfinishedFor.Hours() / 24}, &unfinished); err != nil {
		return 0, err
	}
	if unfinished.Valid {
		return unfinished.Int64 - 1, nil
	}
	return newest.Int64, nil
}

// ArtifactsOf reads and parses, in one read transaction, the artifacts
// infos name, each by its row with its hash checked (infos are what
// Classify or Info gave): arts[i] is what Artifact gives of the ith, errs[i]
// its own error (a *ParseError for one that does not parse). err is the
// transaction's.
func (r *Repo) ArtifactsOf(ctx context.Context, infos []Info) (arts []*Artifact, errs []error, err error) {
	err = r.read(ctx, "read artifacts", func(rd *reader) error {
		arts, errs = make([]*Artifact, len(infos)), make([]error, len(infos))
		for i, info := range infos {
			arts[i], errs[i] = rd.artifact(info.Row, info.Hash)
		}
		return nil
	})
	return arts, errs, err
}

// NoteTexts reads, in one read transaction, the text each artifact may
// hold a note in: a post's text, what a ticket change adds to the ticket's
// comment; "" for anything else, for an edit or a post awaiting
// moderation, which hold none, and for one whose bytes do not read
// (Options.PassedOver is told). infos are what Classify or Info gave, so
// each artifact is read by its row, its hash checked, never looked up again.
func (r *Repo) NoteTexts(ctx context.Context, infos []Info) ([]string, error) {
	var out []string
	err := r.read(ctx, "read notes", func(rd *reader) error {
		var err error
		out, err = rd.noteTexts(infos)
		return err
	})
	return out, err
}

// noteTexts is NoteTexts in rd's transaction.
func (rd *reader) noteTexts(infos []Info) ([]string, error) {
	out := make([]string, len(infos))
	for i, info := range infos {
		switch {
		case info.Kind == KindPost && !info.Edit && !info.Pending:
		case info.Kind == KindTicketChange:
		default:
			continue
		}
		a, err := rd.artifact(info.Row, info.Hash)
		if rd.r.passOver(info.Hash, err) {
			continue // it holds no note the node can read
		}
		if err != nil {
			return nil, err
		}
		switch {
		case info.Kind == KindPost && a.Type == TypeForum:
			out[i] = string(a.Text)
		case info.Kind == KindTicketChange:
			for _, f := range a.Fields {
				if f.Name == "+icomment" || f.Name == "icomment" {
					out[i] = f.Value
				}
			}
		}
	}
	return out, nil
}

// Arrival is what a repository received after a receipt, read in one
// read transaction (Arrived).
type Arrival struct {
	// Last is the newest finished receipt (Received).
	Last int64
	// Hashes are what was received after the receipt, in the server's order.
	Hashes []string
	// Infos classify the first of Hashes, and Texts hold the text each may
	// hold a note in (Classify, NoteTexts).
	Infos []Info
	Texts []string
	// Users is the user table as of the same moment, when it was read.
	Users []User
}

// Arrived reads in one read transaction what Received, Classify,
// NoteTexts and Users read one transaction each: what the repository
// received after receipt after, the first most of it classified with its
// note texts, and, when users says so of what arrived, the user table, all
// as of one moment. A reader that keeps an index of the record
// (record.Index) reads what arrived, and whom D7 counts when it needs
// that, in one look.
func (r *Repo) Arrived(ctx context.Context, after int64, most int, users func(Arrival) bool) (Arrival, error) {
	var a Arrival
	err := r.read(ctx, "read what arrived", func(rd *reader) error {
		var err error
		if a.Last, err = rd.finished(after); err != nil {
			return err
		}
		if a.Hashes, err = rd.hashes(rd.r.inOrder(receivedQuery), after, a.Last); err != nil {
			return err
		}
		first := a.Hashes[:min(most, len(a.Hashes))]
		if a.Infos, err = rd.infos(make([]Info, 0, len(first)), first); err != nil {
			return err
		}
		if a.Texts, err = rd.noteTexts(a.Infos); err != nil || users == nil || !users(a) {
			return err
		}
		a.Users, err = rd.users()
		return err
	})
	if err != nil {
		return Arrival{}, err
	}
	return a, nil
}
