package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/actors/turn"
	"github.com/ocx-go/ocx/actors/wake"
	"github.com/ocx-go/ocx/cmd/internal/hook"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// markWait bounds the wait for the hook's mark, which a run of the hook
// holds while it wakes sessions (ms, at most its own 10 s bound).
const markWait = 15 * hook.DefaultLockWait / 10

// noteUnanswered notes, as the session's agent login, each person's post
// the hook woke the session for before it ended and that the record shows
// it never answered (no reply of its login to it, no stopped note for it)
// nor noted: a session killed, stopped or dead in a turn leaves no post it
// was given unsaid (D77). The ledger (Held/woken) is read under the hook's
// mark lock, so that every wake the hook wrote before is in it and none is
// being written; its posts woken after the end (a later session's) stay.
func (r *records) noteUnanswered(ctx context.Context, x *noderepos.Index, n protocol.WriteEnd) error {
	k := n.Launch.Workspace
	ws, err := r.layout.Workspace(k)
	if err != nil {
		return err
	}
	root, err := unixhost.OpenRoot(r.layout.Root())
	if err != nil {
		return err
	}
	defer root.Close()
	unlock, err := r.lockHookMark(ctx, root, x.Project)
	if err != nil {
		return err
	}
	defer unlock()
	data, err := root.ReadFile(ws.Woken, host.MaxWokenLen+64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the posts %s was woken for: %w", k, err)
	}
	posts, bad := host.ParseWoken(data)
	if bad > 0 {
		r.log.Warn("lines of the posts a session was woken for do not read; passed over", slog.String("workspace", k.String()), slog.Int("lines", bad))
	}
	before, after := host.SplitWoken(posts, n.End.Seen)
	var missed []wake.Missed
	for _, p := range before {
		handled, err := r.handled(ctx, x, k.Login, p.Post)
		if err != nil {
			return err
		}
		if !handled {
			missed = append(missed, wake.Missed{Workspace: k, Kind: p.Kind, Record: p.Record, Post: p.Post, Why: messages.UnheardEnded})
		}
	}
	if len(missed) > 0 {
		r.log.Info("the session ended before it answered posts it was woken for; noting them", slog.String(actors.KeyLaunch, n.Launch.Hash), slog.Int("posts", len(missed)))
		if err := hook.WriteUnheard(ctx, hook.Unheard{Config: r.cfg, Layout: r.layout, Project: x.Project, Repo: x.Repo, Log: r.log}, missed); err != nil {
			// The ledger keeps them: the end's next attempt notes them.
			return err
		}
	}
	var rest []byte
	for _, p := range after {
		rest = append(rest, p.Line()...)
	}
	if len(before) == 0 && bad == 0 {
		return nil
	}
	return root.WriteFile(ws.Woken, rest, 0o600)
}

// lockHookMark takes the hook's mark lock of project, which every run of
// the hook holds while it works.
func (r *records) lockHookMark(ctx context.Context, root *unixhost.Root, project string) (func(), error) {
	f, err := root.OpenFile(r.layout.HookMark(project), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the hook's mark: %w", err)
	}
	if err := unixhost.LockFile(ctx, f, unixhost.Exclusive, markWait); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the hook's mark: %w", err)
	}
	return func() { f.Close() }, nil
}

// handled says the record shows post dealt with by login: a reply of its
// to the post (a thread's reply naming it, a ticket comment answering it),
// a stopped note for it, or an unheard note naming it.
func (r *records) handled(ctx context.Context, x *noderepos.Index, login, post string) (bool, error) {
	sent, err := x.Repo.SentBy(ctx, login, post)
	if err != nil {
		return false, fmt.Errorf("what %s sent about post %s: %w", login, post, err)
	}
	for _, s := range sent {
		if s.InReplyTo == post || turn.RepliesTo(s.Text, post) {
			return true, nil
		}
		note, err := messages.ReadPost([]byte(s.Text))
		if err != nil {
			continue
		}
		switch nt := note.(type) {
		case *messages.UnheardNote:
			for _, h := range nt.All() {
				if h == post {
					return true, nil
				}
			}
		case *messages.StoppedNote:
			if nt.Request == post {
				return true, nil
			}
		}
	}
	return false, nil
}
