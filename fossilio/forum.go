package fossilio

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ForumPost is one forum post as read from the repository.
type ForumPost struct {
	Info            // Kind is KindPost; Root, InReplyTo, Edit, Pending are set
	Title    string // the H card: a thread's first post, or an edit of it
	Mimetype string
	Text     string
	// First is the hash of the post's first version; it equals Hash unless
	// the post was edited. A note is read from the first version.
	First string
	// Deleted: an edit that emptied the post (Fossil's "delete reply").
	Deleted bool
}

// Post reads one forum post, by full hash or unique prefix. Anything but a
// forum post is refused with ErrWrongKind.
func (r *Repo) Post(ctx context.Context, hashOrPrefix string) (ForumPost, error) {
	var p ForumPost
	err := r.read(ctx, "read post", func(rd *reader) error {
		full, _, err := rd.resolve(hashOrPrefix)
		if err != nil {
			return err
		}
		p, err = rd.post(full)
		if err != nil {
			return err
		}
		p.First, err = rd.firstVersion(p.Row, full)
		return err
	})
	return p, err
}

func (rd *reader) post(hash string) (ForumPost, error) {
	info, a, err := rd.artifactOf(hash, KindPost, "read post")
	if err != nil {
		return ForumPost{}, err
	}
	if a.Type != TypeForum {
		return ForumPost{}, fmt.Errorf("read post %s in %s: %w: it parses as a %s", hash, rd.r.path, ErrWrongKind, a.Type)
	}
	mime := a.Mimetype
	if mime == "" {
		mime = "text/x-fossil-wiki"
	}
	return ForumPost{
		Info:     info,
		Title:    a.ThreadTitle,
		Mimetype: mime,
		Text:     string(a.Text),
		First:    hash,
		Deleted:  info.Edit && len(a.Text) == 0,
	}, nil
}

// firstVersion follows a post's chain of edits back to its first version.
func (rd *reader) firstVersion(rid int64, hash string) (string, error) {
	for range maxDeltaChain {
		var prev sql.NullInt64
		var prevHash sql.NullString
		found, err := rd.row(`SELECT f.fprev, b.uuid FROM forumpost f LEFT JOIN blob b ON b.rid=f.fprev WHERE f.fpid=?`,
			[]any{rid}, &prev, &prevHash)
		if err != nil {
			return "", err
		}
		if !found || !prev.Valid {
			return hash, nil
		}
		rid, hash = prev.Int64, prevHash.String
	}
	return "", fmt.Errorf("read post %s: edit chain too long: %w", hash, ErrMalformed)
}

// Thread returns a thread's posts in the server's order (by the receipt of
// each post's first version, then its row), each in its latest version. The
// thread is named by any of its posts. Posts awaiting moderation are left
// out, as Fossil hides them from everyone but moderators, and so is a post
// whose bytes do not read (Options.PassedOver is told).
func (r *Repo) Thread(ctx context.Context, anyPost string) ([]ForumPost, error) {
	var posts []ForumPost
	err := r.read(ctx, "read thread", func(rd *reader) error {
		_, rid, err := rd.resolve(anyPost)
		if err != nil {
			return err
		}
		var root sql.NullInt64
		found, err := rd.row(`SELECT froot FROM forumpost WHERE fpid=?`, []any{rid}, &root)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("read thread %s in %s: %w: not a forum post", anyPost, r.path, ErrWrongKind)
		}
		versions, err := queryRows(rd, func(v *postVersion) []any { return []any{&v.rid, &v.rcvid, &v.row, &v.prev, &v.hash} },
			r.inOrder(`SELECT f.fpid, {rcvid}, {rid}, coalesce(f.fprev, 0), b.uuid FROM forumpost f JOIN blob b ON b.rid=f.fpid {vjoin}
			WHERE f.froot=? AND f.fpid NOT IN (SELECT rid FROM private) ORDER BY {rcvid}, {rid}`), root.Int64)
		if err != nil {
			return err
		}
		entries := latestVersions(versions)
		for _, e := range entries {
			p, err := rd.post(e.latest.hash)
			if passOverPost(rd.r, e.latest.hash, err) {
				continue
			}
			if err != nil {
				return err
			}
			p.First = e.first.hash
			posts = append(posts, p)
		}
		return nil
	})
	return posts, err
}

// postVersion is one version of a thread's post, as the forumpost table
// links it to the version it replaces (prev): rid and prev are rows of
// this file, rcvid and row its place in the server's order.
type postVersion struct {
	rid, rcvid, row, prev int64
	hash                  string
}

// threadEntry is one post of a thread: its latest version and its first.
type threadEntry struct {
	latest, first postVersion
}

// latestVersions is the thread's posts, each in its latest version, in
// the order of their first versions (by receipt, then row).
func latestVersions(versions []postVersion) []threadEntry {
	// A version is the latest of its post when no other replaces it; its
	// first version is found by following the replaced versions back.
	byRid := make(map[int64]postVersion, len(versions))
	replaced := make(map[int64]bool, len(versions))
	for _, v := range versions {
		byRid[v.rid] = v
		if v.prev != 0 {
			replaced[v.prev] = true
		}
	}
	var entries []threadEntry
	for _, v := range versions {
		if replaced[v.rid] {
			continue
		}
		first := v
		for range len(versions) {
			p, ok := byRid[first.prev]
			if !ok {
				break
			}
			first = p
		}
		entries = append(entries, threadEntry{latest: v, first: first})
	}
	slices.SortFunc(entries, func(a, b threadEntry) int {
		if a.first.rcvid != b.first.rcvid {
			return cmp.Compare(a.first.rcvid, b.first.rcvid)
		}
		return cmp.Compare(a.first.row, b.first.row)
	})
	return entries
}

// passOverPost says whether err is a post's own fault, which a reader of
// many passes over (Options.PassedOver is told): its bytes do not read,
// or they parse as another kind than Fossil took them for.
func passOverPost(r *Repo, hash string, err error) bool {
	if errors.Is(err, ErrWrongKind) {
		err = fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return r.passOver(hash, err)
}

// Thread is one forum thread as a list of recent threads shows it.
type Thread struct {
	Root  string // the full hash of the thread's first post, as first written
	Title string // the title of the first post's latest version
	// LastPost is the time written in the thread's newest post or edit
	// (its D card), which is when the thread was last active.
	LastPost time.Time
	// Posts counts the thread's posts, each once however often edited
	// (a deleted reply still counts, as it does on Fossil's /forum).
	Posts int
}

// recentThreadsQuery groups the visible versions of posts by thread, the
// most recently active first, as Fossil's /forum page does for a reader
// who is not a moderator: a version awaiting moderation counts for
// nothing, and a thread whose first post awaits it is not there at all.
const recentThreadsQuery = `SELECT r.uuid, f.froot, max(f.fmtime), sum(f.fprev IS NULL)
FROM forumpost f JOIN blob r ON r.rid=f.froot
WHERE f.fpid NOT IN (SELECT rid FROM private) AND f.froot NOT IN (SELECT rid FROM private)
GROUP BY f.froot
ORDER BY 3 DESC, f.froot DESC
LIMIT ? OFFSET ?`

// rootVersionQuery finds the latest visible version of a thread's first
// post: the one whose title is the thread's (src/manifest.c gives every
// post of a thread the title of its newest first-post version).
const rootVersionQuery = `SELECT b.uuid, f.fpid FROM forumpost f JOIN blob b ON b.rid=f.fpid
WHERE f.froot=? AND f.firt IS NULL AND f.fpid NOT IN (SELECT rid FROM private)
ORDER BY f.fmtime DESC, f.fpid DESC LIMIT 1`

// RecentThreads returns the n forum threads most recently active (by the
// time of their newest post or edit), newest first; n is 1 to MaxRecent.
// Threads whose first post awaits moderation are left out, and so are
// those whose first post was deleted: its latest version has no text or
// no title, which Fossil shows as "Deleted".
func (r *Repo) RecentThreads(ctx context.Context, n int) ([]Thread, error) {
	const op = "list recent threads"
	if err := r.checkRecent(op, n); err != nil {
		return nil, err
	}
	var out []Thread
	err := r.read(ctx, op, func(rd *reader) error {
		// Fossil creates the forum's table with the first post.
		if ok, err := rd.hasTable("forumpost"); err != nil || !ok {
			return err
		}
		type group struct {
			root      string
			rootRid   int64
			lastPost  float64
			postCount int
		}
		// Deleted threads are rare, so one batch a little larger than n
		// usually holds n threads; each further batch is as large again.
		batch := n + 8
		for offset := 0; len(out) < n; offset += batch {
			groups, err := queryRows(rd, func(g *group) []any { return []any{&g.root, &g.rootRid, &g.lastPost, &g.postCount} },
				recentThreadsQuery, batch, offset)
			if err != nil {
				return err
			}
			for _, g := range groups {
				var latest string
				var rid int64
				found, err := rd.row(rootVersionQuery, []any{g.rootRid}, &latest, &rid)
				if err != nil {
					return err
				}
				if !found {
					continue
				}
				a, err := rd.artifact(rid, latest)
				if rd.r.passOver(latest, err) {
					continue
				}
				if err != nil {
					return err
				}
				if a.Type != TypeForum {
					r.passOver(latest, fmt.Errorf("%w: first post %s parses as a %s", ErrMalformed, latest, a.Type))
					continue
				}
				if len(a.Text) == 0 || a.ThreadTitle == "" {
					continue
				}
				out = append(out, Thread{Root: g.root, Title: a.ThreadTitle, LastPost: julianToTime(g.lastPost), Posts: g.postCount})
				if len(out) == n {
					return nil
				}
			}
			if len(groups) < batch {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FirstPosts lists the first post of every thread, as first written (an
// edit of one is not listed, nor one awaiting moderation), in the server's
// order, each with who sent it and its text: where protocol v1 records are
// (E3). When holding is not empty, only the posts whose bytes hold it are
// listed, and the others are never parsed (as SentBy filters). A post
// whose bytes do not read is passed over (Options.PassedOver is told).
func (r *Repo) FirstPosts(ctx context.Context, holding string) ([]sent, error) {
	var out []sent
	err := r.read(ctx, "list first posts", func(rd *reader) error {
		// Fossil creates the forum's table with the first post.
		if ok, err := rd.hasTable("forumpost"); err != nil || !ok {
			return err
		}
		type row struct {
			hash string
			rid  int64
			raw  []byte // the stored content when it is whole (no delta)
		}
		list, err := queryRows(rd, func(x *row) []any { return []any{&x.hash, &x.rid, &x.raw} },
			r.inOrder(`SELECT b.uuid, b.rid, CASE WHEN d.rid IS NULL AND ?1 THEN b.content END
			FROM forumpost f JOIN blob b ON b.rid=f.fpid LEFT JOIN delta d ON d.rid=b.rid {vjoin}
			WHERE f.froot=f.fpid AND f.fprev IS NULL AND f.firt IS NULL AND f.fpid NOT IN (SELECT rid FROM private)
			ORDER BY {rcvid}, {rid}`), holding != "")
		if err != nil {
			return err
		}
		for _, x := range list {
			if holds, err := rd.holds(x.rid, x.hash, x.raw, holding); err != nil {
				return err
			} else if !holds {
				continue
			}
			p, err := rd.post(x.hash)
			if passOverPost(rd.r, x.hash, err) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, sent{Info: p.Info, Text: p.Text})
		}
		return nil
	})
	return out, err
}
