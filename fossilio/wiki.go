package fossilio

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// WikiPage is the latest version of a wiki page, as read from the
// repository.
type WikiPage struct {
	Name     string
	Hash     string // the version's artifact; a new version names it as its Prev
	Mimetype string // the N card; "text/x-fossil-wiki" when it has none
	Text     string
	// Sender is the login the node's repository recorded as having sent
	// this version (its receipt), "" when unknown: always in a clone. It is
	// never the name written inside.
	Sender string
	// Author is the name written inside the version (its U card), which
	// proves nothing.
	Author string
	Time   time.Time // the time written in the version (its D card)
	// Deleted: the version's text is empty but for leading white space,
	// which is how Fossil deletes a page (it lists the page no more).
	Deleted bool
}

// wikiVersions is the condition on a tagxref row x that it is a visible
// version of a page: each version of a page NAME tags itself wiki-NAME
// with its text's length as the value (src/manifest.c), and a version
// awaiting moderation is hidden, as Fossil hides it from all but
// moderators.
const wikiVersions = `x.srcid=x.rid AND x.rid NOT IN (SELECT rid FROM private)
	AND EXISTS(SELECT 1 FROM event e WHERE e.objid=x.rid AND e.type='w')`

// wikiLatestQuery finds a page's latest version as Fossil's /wiki does: by
// the time written in it (tagxref.mtime), the later stored first on a tie.
const wikiLatestQuery = `SELECT x.rid, b.uuid, x.value FROM tagxref x JOIN blob b ON b.rid=x.rid
WHERE x.tagid=(SELECT tagid FROM tag WHERE tagname=?) AND ` + wikiVersions + `
ORDER BY x.mtime DESC, x.rid DESC LIMIT 1`

// wikiPagesQuery lists the wiki tags from the first whose name is at
// least ? in byte order, each with its latest version's length; the pages
// whose names start with a prefix come first and together.
const wikiPagesQuery = `SELECT g.tagname, (SELECT x.value FROM tagxref x WHERE x.tagid=g.tagid AND ` + wikiVersions + `
	ORDER BY x.mtime DESC, x.rid DESC LIMIT 1)
FROM tag g WHERE g.tagname>=? AND g.tagname GLOB 'wiki-*'
ORDER BY g.tagname`

// WikiPage returns the latest version of the wiki page named name. A page
// that was never written, or whose every version awaits moderation, is an
// error wrapping ErrNoSuchPage; a deleted page is returned, Deleted and
// without text, so that a new version can name it.
func (r *Repo) WikiPage(ctx context.Context, name string) (WikiPage, error) {
	const op = "read wiki page"
	if err := CheckWikiName(name); err != nil {
		return WikiPage{}, fmt.Errorf("%s in %s: %w", op, r.path, err)
	}
	var page WikiPage
	var found bool
	err := r.read(ctx, op, func(rd *reader) error {
		var rid int64
		var hash string
		var length sql.NullString
		var err error
		found, err = rd.row(wikiLatestQuery, []any{"wiki-" + name}, &rid, &hash, &length)
		if err != nil || !found {
			return err
		}
		page, err = rd.wikiVersion(op, name, rid, hash, length.String)
		return err
	})
	if err != nil {
		return WikiPage{}, err
	}
	if !found {
		return WikiPage{}, fmt.Errorf("%s %q in %s: %w", op, name, r.path, ErrNoSuchPage)
	}
	return page, nil
}

// wikiVersion reads one version of page name: the artifact rid, hash,
// whose wiki tag's value is length.
func (rd *reader) wikiVersion(op, name string, rid int64, hash, length string) (WikiPage, error) {
	page := WikiPage{Name: name, Hash: hash}
	info, err := rd.info(hash)
	if err != nil {
		return WikiPage{}, err
	}
	a, err := rd.artifact(rid, hash)
	if err != nil {
		return WikiPage{}, err
	}
	if a.Type != TypeWiki || a.WikiTitle != name {
		return WikiPage{}, fmt.Errorf("%s %q in %s: %w: %s parses as a %s named %q", op, name, rd.r.path, ErrWrongKind, hash, a.Type, a.WikiTitle)
	}
	page.Mimetype = a.Mimetype
	if page.Mimetype == "" {
		page.Mimetype = "text/x-fossil-wiki"
	}
	page.Text = string(a.Text)
	page.Sender, page.Author, page.Time = info.Sender, info.Author, info.Time
	n, err := strconv.Atoi(length)
	page.Deleted = err == nil && n <= 0
	return page, nil
}

// wikiVersionsQuery lists a page's visible versions in the server's
// order, the newest first, each with its text's length and its sender.
const wikiVersionsQuery = `SELECT x.rid, b.uuid, x.value, {sender} FROM tagxref x JOIN blob b ON b.rid=x.rid {vjoin}
WHERE x.tagid=(SELECT tagid FROM tag WHERE tagname=?) AND ` + wikiVersions + `
ORDER BY {rcvid} DESC, {rid} DESC`

// PrivilegedWikiPage returns the version of the wiki page named name that
// was sent last, in the server's order, by a user who holds admin or setup
// now (D27): what a page is when only such users' word counts (D81).
// Versions sent by anyone else are passed over, whatever date is written
// in them: any login that may check in may push a wiki artifact. A page
// no such user wrote is an error wrapping ErrNoSuchPage; one such a user
// deleted last is returned Deleted. On a repository that knows no senders
// (a clone not vouched for) no version counts.
func (r *Repo) PrivilegedWikiPage(ctx context.Context, name string) (WikiPage, error) {
	const op = "read wiki page"
	if err := CheckWikiName(name); err != nil {
		return WikiPage{}, fmt.Errorf("%s in %s: %w", op, r.path, err)
	}
	var page WikiPage
	var found bool
	err := r.read(ctx, op, func(rd *reader) error {
		st, err := rd.standings()
		if err != nil {
			return err
		}
		page, found, err = rd.privilegedWikiPage(op, name, st)
		return err
	})
	if err != nil {
		return WikiPage{}, err
	}
	if !found {
		return WikiPage{}, fmt.Errorf("%s %q in %s: %w: no user holding admin or setup wrote it", op, name, r.path, ErrNoSuchPage)
	}
	return page, nil
}

// standings reads who holds admin or setup, in rd's transaction; none on
// a repository that knows no senders.
func (rd *reader) standings() (standings, error) {
	if !rd.r.node && !rd.r.vouched {
		return standings{}, nil
	}
	users, err := rd.users()
	if err != nil {
		return nil, err
	}
	return newStandings(users), nil
}

// privilegedWikiPage is PrivilegedWikiPage in rd's transaction, st saying
// who holds admin or setup.
func (rd *reader) privilegedWikiPage(op, name string, st standings) (WikiPage, bool, error) {
	rows, err := rd.query(rd.r.inOrder(wikiVersionsQuery), "wiki-"+name)
	if err != nil {
		return WikiPage{}, false, err
	}
	var (
		rid    int64
		hash   string
		length sql.NullString
		found  bool
	)
	for rows.Next() {
		var sender sql.NullString
		if err := rows.Scan(&rid, &hash, &length, &sender); err != nil {
			rows.Close()
			return WikiPage{}, false, err
		}
		if st.privileged(sender.String) {
			found = true
			break
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil || !found {
		return WikiPage{}, false, err
	}
	page, err := rd.wikiVersion(op, name, rid, hash, length.String)
	return page, err == nil, err
}

// WikiPages returns the names of the wiki pages that start with prefix
// ("" for every page), sorted by byte. Deleted pages are left out, as
// Fossil's list of pages leaves them out, and so are pages whose every
// version awaits moderation.
func (r *Repo) WikiPages(ctx context.Context, prefix string) ([]string, error) {
	const op = "list wiki pages"
	if err := checkWikiPrefix(prefix); err != nil {
		return nil, fmt.Errorf("%s in %s: %w", op, r.path, err)
	}
	var out []string
	err := r.read(ctx, op, func(rd *reader) error {
		tagPrefix := "wiki-" + prefix
		rows, err := rd.query(wikiPagesQuery, tagPrefix)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var tag string
			var length sql.NullString
			if err := rows.Scan(&tag, &length); err != nil {
				return err
			}
			if !strings.HasPrefix(tag, tagPrefix) {
				break
			}
			// A page's latest version has its text's length as its
			// value; none is visible, or it is a deletion (0), or the tag
			// is no page's (a wiki- tag set by hand), and it is left out.
			if n, err := strconv.Atoi(length.String); err != nil || n <= 0 {
				continue
			}
			out = append(out, strings.TrimPrefix(tag, "wiki-"))
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PrivilegedWikiPages returns the names of the wiki pages that start with
// prefix whose version a user holding admin or setup sent last
// (PrivilegedWikiPage) is not a deletion, sorted by byte.
func (r *Repo) PrivilegedWikiPages(ctx context.Context, prefix string) ([]string, error) {
	const op = "list wiki pages"
	if err := checkWikiPrefix(prefix); err != nil {
		return nil, fmt.Errorf("%s in %s: %w", op, r.path, err)
	}
	var out []string
	err := r.read(ctx, op, func(rd *reader) error {
		st, err := rd.standings()
		if err != nil {
			return err
		}
		tagPrefix := "wiki-" + prefix
		var names []string
		rows, err := rd.query(`SELECT tagname FROM tag WHERE tagname>=? ORDER BY tagname`, tagPrefix)
		if err != nil {
			return err
		}
		for rows.Next() {
			var tag string
			if err := rows.Scan(&tag); err != nil {
				rows.Close()
				return err
			}
			if !strings.HasPrefix(tag, tagPrefix) {
				break
			}
			names = append(names, strings.TrimPrefix(tag, "wiki-"))
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return err
		}
		for _, name := range names {
			if CheckWikiName(name) != nil {
				continue
			}
			p, found, err := rd.privilegedWikiPage(op, name, st)
			if err != nil {
				return err
			}
			if found && !p.Deleted {
				out = append(out, name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// maxWikiName is the longest wiki page name Fossil takes, in bytes.
const maxWikiName = 100

// CheckWikiName refuses a wiki page name Fossil would refuse
// (src/wiki.c wiki_name_is_wellformed): empty or longer than 100 bytes, a
// control character, a space at either end or two in a row. It also
// refuses, where Fossil does not, DEL and bytes that are not UTF-8.
func CheckWikiName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty wiki page name", ErrBadInput)
	case len(name) > maxWikiName:
		return fmt.Errorf("%w: wiki page name %q is %d bytes, more than %d", ErrBadInput, name, len(name), maxWikiName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: wiki page name %q is not UTF-8", ErrBadInput, name)
	case hasControl(name):
		return fmt.Errorf("%w: wiki page name %q holds a control character", ErrBadInput, name)
	case name[0] == ' ' || name[len(name)-1] == ' ':
		return fmt.Errorf("%w: wiki page name %q starts or ends with a space", ErrBadInput, name)
	case strings.Contains(name, "  "):
		return fmt.Errorf("%w: wiki page name %q holds two spaces in a row", ErrBadInput, name)
	}
	return nil
}

// checkWikiPrefix refuses a prefix no wiki page name can start with.
func checkWikiPrefix(prefix string) error {
	switch {
	case len(prefix) > maxWikiName:
		return fmt.Errorf("%w: wiki page name prefix %q is %d bytes, more than %d", ErrBadInput, prefix, len(prefix), maxWikiName)
	case !utf8.ValidString(prefix):
		return fmt.Errorf("%w: wiki page name prefix %q is not UTF-8", ErrBadInput, prefix)
	case hasControl(prefix):
		return fmt.Errorf("%w: wiki page name prefix %q holds a control character", ErrBadInput, prefix)
	}
	return nil
}

// hasControl says whether s holds a control character (below space, or
// DEL).
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}
