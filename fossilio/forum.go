package fossilio

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
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
		p.First, err = rd.firstVersion(p.Rid, full)
		return err
	})
	return p, err
}

func (rd *reader) post(hash string) (ForumPost, error) {
	info, err := rd.info(hash)
	if err != nil {
		return ForumPost{}, err
	}
	if info.Kind != KindPost {
		return ForumPost{}, fmt.Errorf("read post %s in %s: %w: it is a %s", hash, rd.r.path, ErrWrongKind, info.Kind)
	}
	a, err := rd.artifact(info.Rid, hash)
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
// out, as Fossil hides them from everyone but moderators.
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
		type version struct {
			rid, rcvid, prev int64
			hash             string
		}
		rows, err := rd.query(`SELECT f.fpid, b.rcvid, coalesce(f.fprev, 0), b.uuid FROM forumpost f JOIN blob b ON b.rid=f.fpid
			WHERE f.froot=? AND f.fpid NOT IN (SELECT rid FROM private) ORDER BY b.rcvid, f.fpid`, root.Int64)
		if err != nil {
			return err
		}
		var versions []version
		for rows.Next() {
			var v version
			if err := rows.Scan(&v.rid, &v.rcvid, &v.prev, &v.hash); err != nil {
				rows.Close()
				return err
			}
			versions = append(versions, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// A version is the latest of its post when no other replaces it; its
		// first version is found by following the replaced versions back.
		byRid := make(map[int64]version, len(versions))
		replaced := make(map[int64]bool, len(versions))
		for _, v := range versions {
			byRid[v.rid] = v
			if v.prev != 0 {
				replaced[v.prev] = true
			}
		}
		type entry struct {
			latest, first version
		}
		var entries []entry
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
			entries = append(entries, entry{latest: v, first: first})
		}
		slices.SortFunc(entries, func(a, b entry) int {
			if a.first.rcvid != b.first.rcvid {
				return cmpInt(a.first.rcvid, b.first.rcvid)
			}
			return cmpInt(a.first.rid, b.first.rid)
		})
		for _, e := range entries {
			p, err := rd.post(e.latest.hash)
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

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
