package fossilio

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
)

// OCXHook reads, from the repository's config, the command of OCX's
// after-receive hook (the entry with an "ocx" key), and whether it is
// installed. It is a plain read: cheap enough for a daemon to ask often.
func (r *Repo) OCXHook(ctx context.Context) (command string, installed bool, err error) {
	raw, _, err := r.Config(ctx, "hooks")
	if err != nil {
		return "", false, err
	}
	command, _, installed = ocxHookIn(raw)
	return command, installed, nil
}

// NewestReceipt is the newest receipt number (max rcvid), 0 when the
// repository received nothing yet; on a vouched clone, the newest the
// server vouched for.
func (r *Repo) NewestReceipt(ctx context.Context) (int64, error) {
	var last int64
	err := r.read(ctx, "newest receipt", func(rd *reader) error {
		if rd.r.vouched {
			var err error
			last, err = rd.finished(0)
			return err
		}
		_, err := rd.row(`SELECT coalesce(max(rcvid), 0) FROM rcvfrom`, nil, &last)
		return err
	})
	return last, err
}

// ReceiptBefore is the mark a reader of what this file received keeps
// (Received's after) to read every artifact after the place (rcvid, rid)
// in the server's order. On the server's own repository it is the
// receipt before rcvid; on a vouched clone, where a pull's receipt holds
// what the server received in many, the clone's receipt before the first
// that holds anything at or after the place.
func (r *Repo) ReceiptBefore(ctx context.Context, rcvid, rid int64) (int64, error) {
	if !r.vouched {
		return max(rcvid-1, 0), nil
	}
	var before int64
	err := r.read(ctx, "find the receipt before a place", func(rd *reader) error {
		_, err := rd.row(`SELECT coalesce(min(b.rcvid), (SELECT coalesce(max(rcvid), 0)+1 FROM rcvfrom))-1
			FROM fx_ocx_receipt v JOIN blob b ON b.uuid=v.hash WHERE v.rcvid>? OR (v.rcvid=? AND v.rid>=?)`,
			[]any{rcvid, rcvid, rid}, &before)
		return err
	})
	return max(before, 0), err
}

// hookLook is what the daemon's hook watch reads of a repository at each
// look, in one read: OCX's hook, the newest receipt, and the newest receipt
// Fossil's backoffice launched its hooks for.
type hookLook struct {
	// Command is OCX's hook command, when Installed.
	Command   string
	Installed bool
	// Newest is the newest receipt the hook would handle now, as Received
	// says: max(rcvid), or the receipt before one a web page is still
	// writing; 0 when the repository received nothing yet.
	Newest int64
	// Fossil is hook-last-rcvid: Fossil sets it to the newest receipt once
	// it has started its hooks for everything up to it (fossil-2.21.md
	// 4.3); 0 when never set.
	Fossil int64
	// ByPage: every receipt after the look's after, up to Newest (at least
	// one), was made by a web page (no nonce, an address: a form's post,
	// not a sync's push nor a command's write). Fossil starts no backoffice
	// for a page's receipt (the form answers with a redirect, D29), so no
	// run of the hook is on its way for it. Never on a vouched clone.
	ByPage bool
	// PageWriting: a receipt after Newest is one a web page is still
	// writing (it stored the artifact and has yet to cross-link it), so
	// a look a moment later finds it. Never on a vouched clone.
	PageWriting bool
}

// HookLook reads what the hook watch compares with the hook's mark, after
// (see HookLook): a plain read, cheap enough for a daemon to make at every
// write to the repository.
func (r *Repo) HookLook(ctx context.Context, after int64) (hookLook, error) {
	var l hookLook
	err := r.read(ctx, "hook look", func(rd *reader) error {
		var hooks sql.NullString
		var last sql.NullInt64
		_, err := rd.row(`SELECT (SELECT value FROM config WHERE name='hooks'),
			(SELECT value+0 FROM config WHERE name='hook-last-rcvid')`, nil, &hooks, &last)
		if err != nil {
			return err
		}
		l.Command, _, l.Installed = ocxHookIn(hooks.String)
		l.Fossil = last.Int64
		if l.Newest, err = rd.finished(after); err != nil || rd.r.vouched {
			return err // a clone's receipts are its pulls', none a page's
		}
		var all int64
		if _, err = rd.row(`SELECT coalesce(max(rcvid), 0) FROM rcvfrom`, nil, &all); err != nil {
			return err
		}
		l.PageWriting = all > l.Newest
		if l.Newest <= after {
			return nil
		}
		_, err = rd.row(`SELECT NOT EXISTS(SELECT 1 FROM rcvfrom WHERE rcvid>? AND rcvid<=? AND (nonce IS NOT NULL OR ipaddr IS NULL))`,
			[]any{after, l.Newest}, &l.ByPage)
		return err
	})
	return l, err
}

// ocxHookIn finds OCX's entry in the hooks setting's JSON: its command, and
// how many other hooks there are. A value that is not a JSON array of
// objects holds no hook, as Fossil reads it (src/hook.c json_valid).
func ocxHookIn(raw string) (command string, others int, ok bool) {
	if raw == "" {
		return "", 0, false
	}
	var hooks []hookEntry
	if err := json.Unmarshal([]byte(raw), &hooks); err != nil {
		return "", 0, false
	}
	for _, h := range hooks {
		if h["ocx"] != nil {
			ok = true
			command, _ = h["cmd"].(string)
		} else {
			others++
		}
	}
	return command, others, ok
}

// HookSubst is the command line Fossil's backoffice runs with /bin/sh -c for
// a hook's command: %F becomes the fossil executable, %R the repository's
// path and %A the auxiliary file (none for after-receive, so nothing); any
// other % stays. Fossil quotes none of them (src/hook.c hook_subst), and
// neither does this, so that what runs is what Fossil would run.
func HookSubst(command, fossil, repository string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(command, '%')
		if i < 0 || i == len(command)-1 {
			b.WriteString(command)
			return b.String()
		}
		b.WriteString(command[:i])
		switch command[i+1] {
		case 'F':
			b.WriteString(fossil)
		case 'R':
			b.WriteString(repository)
		case 'A':
		default:
			b.WriteByte('%')
			command = command[i+1:]
			continue
		}
		command = command[i+2:]
	}
}
