// Package listening keeps a workspace's listening index,
// AGENTS/LOGIN/held/PROJECT/listening/ (D2, D44: out of the agent's reach):
// rebuilt from the listen and unlisten notes the node's repository
// received from the workspace's agent login, and changed one listener at a
// time by the tools, all under one lock, so the outcome never depends on
// which of them ran first.
package listening

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// stagePrefix begins the name of the directory a rebuild writes the new
// index into, beside the index.
const stagePrefix = ".listening."

// lockWait bounds how long a change of the index waits for another to end.
// Each holds the lock for one read of the node's repository and a few small
// files, so a longer wait means something is stuck.
const lockWait = 30 * time.Second

// Own is a session's own record, which its index always names (contracts 7).
type Own struct {
	Kind messages.ListenKind // thread or ticket
	ID   string              // the thread's root post, or the ticket's id
}

// ownRecord tells what the record id is, from the node's repository: a
// thread (id is a forum post; its thread's root is the record) or a ticket.
func ownRecord(ctx context.Context, node *fossilio.Repo, id string) (Own, error) {
	info, err := node.Info(ctx, id)
	if err == nil {
		if info.Kind != fossilio.KindPost {
			return Own{}, fmt.Errorf("record %s is a %s, not a thread or a ticket", id, info.Kind)
		}
		return Own{Kind: messages.ListenThread, ID: info.Root}, nil
	}
	if !errors.Is(err, fossilio.ErrNotFound) {
		return Own{}, fmt.Errorf("record %s: %w", id, err)
	}
	changes, err := node.TicketChanges(ctx, id)
	if err != nil {
		return Own{}, fmt.Errorf("record %s is neither a post nor a ticket of %s: %w", id, node.Path(), err)
	}
	if len(changes) == 0 {
		return Own{}, fmt.Errorf("record %s is neither a post nor a ticket of %s", id, node.Path())
	}
	return Own{Kind: messages.ListenTicket, ID: changes[0].Ticket}, nil
}

// event is one listen or unlisten note the agent login sent.
type event struct {
	messages.Listener
	// On is true for a listen note, false for an unlisten note.
	On bool
	// Hash is the post or ticket change holding the note.
	Hash string
	// Rcvid and Rid are its place in the server's order, which decides
	// which note is the latest.
	Rcvid, Rid int64
}

// Events reads the listen and unlisten notes of workspace key that its agent
// login sent, as the node's repository recorded the sender (D7), in the
// server's order. A note in the agent's name sent by anyone else is not read.
func Events(ctx context.Context, node *fossilio.Repo, key messages.WorkspaceKey) ([]event, error) {
	if !node.SendersKnown() {
		return nil, fmt.Errorf("the listen notes of %s: %s is not the node's repository, where senders are known", key, node.Path())
	}
	sent, err := node.SentBy(ctx, key.Login, "```json")
	if err != nil {
		return nil, fmt.Errorf("the listen notes of %s: %w", key, err)
	}
	var out []event
	for _, s := range sent {
		n, err := messages.ReadPost([]byte(s.Text))
		if err != nil {
			continue
		}
		// The one rule of fossilio/record: a listen note counts when its
		// workspace's agent login sent it (D7).
		l, on, counts := record.ListenCounts(record.Entry{Sender: s.Sender, Note: n})
		if !counts || l.Key() != key {
			continue
		}
		out = append(out, event{Listener: l, On: on, Hash: s.Hash, Rcvid: s.Rcvid, Rid: s.Rid})
	}
	return out, nil
}

// EventsIn is Events as the node's live index holds them (a
// record.Index of the node's repository): the listen and unlisten notes
// that count, read with whatever arrived since its last read.
func EventsIn(ctx context.Context, x *record.Index, key messages.WorkspaceKey) ([]event, error) {
	es, err := x.ListenEntries(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("the listen notes of %s: %w", key, err)
	}
	out := make([]event, 0, len(es))
	for _, e := range es {
		if l, on, counts := record.ListenCounts(e); counts && l.Key() == key {
			out = append(out, event{Listener: l, On: on, Hash: e.Hash, Rcvid: e.Rcvid, Rid: e.Rid})
		}
	}
	return out, nil
}

// OwnRecordIn is OwnRecord answered from the node's live index when id is
// a definition's post it holds (a launch names its session definition's
// thread so), else read as OwnRecord reads it.
func OwnRecordIn(ctx context.Context, x *record.Index, id string) (Own, error) {
	if e, ok := x.Definition(id); ok && !e.Ticket {
		return Own{Kind: messages.ListenThread, ID: e.Record}, nil
	}
	return ownRecord(ctx, x.Repo(), id)
}

// Want is the listening index the notes make (a pure function): the
// session's own record, heard from the start, plus every listener of
// workspace key whose latest note in the server's order is a listen note,
// heard after that note's receipt. It maps each file name of
// WS/session/listening/ to what its file says.
func Want(key messages.WorkspaceKey, own Own, events []event) (map[string]messages.ListeningEntry, error) {
	out := make(map[string]messages.ListeningEntry)
	ownName, err := messages.ListeningFileName(own.Kind, own.ID)
	if err != nil {
		return nil, fmt.Errorf("listening file of the session's own record: %w", err)
	}
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b event) int {
		if a.Rcvid != b.Rcvid {
			return cmp.Compare(a.Rcvid, b.Rcvid)
		}
		return cmp.Compare(a.Rid, b.Rid)
	})
	type listener struct {
		kind  messages.ListenKind
		names string
	}
	latest := make(map[listener]event)
	var order []listener
	for _, e := range sorted {
		if e.Login != key.Login || e.Project != key.Project {
			continue
		}
		l := listener{e.Kind, e.Names}
		if _, seen := latest[l]; !seen {
			order = append(order, l)
		}
		latest[l] = e
	}
	for _, l := range order {
		e := latest[l]
		if !e.On {
			continue
		}
		name, err := messages.ListeningFileName(l.kind, l.names)
		if err != nil {
			return nil, fmt.Errorf("listening file of %s %s: %w", l.kind, l.names, err)
		}
		out[name] = messages.ListeningEntry{Kind: l.kind, Names: l.names, After: e.Rcvid}
	}
	// The own record is heard from the start, whatever notes name it.
	out[ownName] = messages.ListeningEntry{Kind: own.Kind, Names: own.ID}
	return out, nil
}

// result says what a rebuild wrote.
type result struct {
	// Files are the index's file names, sorted.
	Files []string
	// Notes is how many listen and unlisten notes of the workspace were read.
	Notes int
	// Hears is what AGENTS/LOGIN/held/PROJECT/hears now holds.
	Hears []string
}

// ResolveHears is whom a session hears (D27): its definition's hears as
// written, or, when the definition names none (nil), every user holding
// admin or setup on the node's repository now, the default protocol v1 E8
// gives.
func ResolveHears(ctx context.Context, node *fossilio.Repo, hears []string) ([]string, error) {
	if hears != nil {
		return hears, nil
	}
	users, err := node.PrivilegedUsers(ctx)
	if err != nil {
		return nil, fmt.Errorf("whom the session hears by default: %w", err)
	}
	return users, nil
}

// ReadHears reads the workspace's hears file (Workspace.Hears); ok is false when there is none (a
// session started by a release before it).
func ReadHears(root *unixhost.Root, ws host.Workspace) (hears []string, ok bool, err error) {
	data, err := root.ReadFile(ws.Hears, unixhost.SmallFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	h, err := messages.ParseHearsFile(data)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", ws.Hears, err)
	}
	return h, true, nil
}

// Rebuild rewrites the listening index of workspace ws from the node's
// repository: the session's own record, plus the latest listen or unlisten
// note of each listener that the agent login sent; and AGENTS/LOGIN/held/PROJECT/hears,
// the users whose posts wake the session (hears, as ResolveHears gives it).
// It holds the index's lock
// from the read of the repository to the last file written, so that a tool
// changing one listener meanwhile (Set) either comes first, and its note is
// read here, or comes after, and its change stands. The new index replaces the
// old one at once (an exchange of directories), so a reader sees the one or
// the other, never a mix; nothing is written through a symbolic link.
func Rebuild(ctx context.Context, root *unixhost.Root, ws host.Workspace, node *fossilio.Repo, own Own, hears []string) (result, error) {
	return RebuildWith(ctx, root, ws, own, func(ctx context.Context) ([]event, []string, error) {
		events, err := Events(ctx, node, ws.Key)
		return events, hears, err
	})
}

// A Reading reads, under the listening index's lock, the workspace's
// listen and unlisten notes and whom its session hears (ResolveHears).
type reading func(ctx context.Context) (events []event, hears []string, err error)

// RebuildWith is Rebuild, the record read by read under the lock.
func RebuildWith(ctx context.Context, root *unixhost.Root, ws host.Workspace, own Own, read reading) (result, error) {
	key := ws.Key
	var res result
	err := locked(ctx, root, ws, func(sess *unixhost.Dir) error {
		events, hears, err := read(ctx)
		if err != nil {
			return err
		}
		hearsFile, err := messages.HearsFileContent(hears)
		if err != nil {
			return err
		}
		if afterRead != nil {
			afterRead()
		}
		want, err := Want(key, own, events)
		if err != nil {
			return err
		}
		res.Notes, res.Hears = len(events), hears
		for name := range want {
			res.Files = append(res.Files, name)
		}
		sort.Strings(res.Files)
		if err := replace(root, ws, sess, want); err != nil {
			return err
		}
		return writeHeld(root, ws, ws.Hears, hearsFile)
	})
	if err != nil {
		return result{}, fmt.Errorf("rebuild the listening index of %s: %w", key, err)
	}
	return res, nil
}

// InIndex reads what a rebuild reads from the node's live index, in one
// read of the repository (record.Index.Pin): the listen notes (EventsIn)
// and, when hears is nil, the users holding admin or setup as of the same
// read (PinStanding).
func InIndex(x *record.Index, key messages.WorkspaceKey, hears []string) reading {
	return func(ctx context.Context) ([]event, []string, error) {
		pin := x.Pin
		if hears == nil {
			pin = x.PinStanding
		}
		ctx, err := pin(ctx)
		if err != nil {
			return nil, nil, err
		}
		events, err := EventsIn(ctx, x, key)
		if err != nil {
			return nil, nil, err
		}
		if hears == nil {
			if hears, err = x.PrivilegedUsers(ctx); err != nil {
				return nil, nil, fmt.Errorf("whom the session hears by default: %w", err)
			}
		}
		return events, hears, nil
	}
}

// WriteCheckins writes AGENTS/LOGIN/held/PROJECT/checkins, the branches whose check-ins
// the hook gives the session (seed 001 E7), under the index's lock; with no
// branch it removes the file, so that a session started without checkins
// is given none that an earlier one of the workspace asked for.
func WriteCheckins(ctx context.Context, root *unixhost.Root, ws host.Workspace, branches []string) error {
	content, err := messages.CheckinsFileContent(branches)
	if err != nil {
		return fmt.Errorf("the checkins of %s: %w", ws.Key, err)
	}
	err = locked(ctx, root, ws, func(*unixhost.Dir) error {
		if len(branches) == 0 {
			if err := root.Remove(ws.Checkins); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			return nil
		}
		return writeHeld(root, ws, ws.Checkins, content)
	})
	if err != nil {
		return fmt.Errorf("the checkins of %s: %w", ws.Key, err)
	}
	return nil
}

// writeHeld writes one file of the workspace's held directory (its hears
// or checkins), making the directory first; a file that already says it
// is left alone. Nothing is written through a symbolic link.
func writeHeld(root *unixhost.Root, ws host.Workspace, path string, content []byte) error {
	if filepath.Dir(path) != ws.Held {
		return fmt.Errorf("%s is not in the held directory %s", path, ws.Held)
	}
	if err := root.MkdirAll(ws.Held, 0o700); err != nil {
		return err
	}
	if old, err := root.ReadFile(path, unixhost.SmallFile); err == nil && bytes.Equal(old, content) {
		return nil
	}
	return root.WriteFile(path, content, 0o600)
}

// ReadCheckins reads the workspace's checkins file: none when there is no file.
func ReadCheckins(root *unixhost.Root, ws host.Workspace) ([]string, error) {
	data, err := root.ReadFile(ws.Checkins, unixhost.SmallFile)
	if errors.Is(err, os.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	bs, err := messages.ParseCheckinsFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ws.Checkins, err)
	}
	return bs, nil
}

// afterRead, when a test sets it, runs in Rebuild once the notes are read
// and before the index is written: where a tool's change would meet it.
var afterRead func()

// rebuildFor opens the node's repository at repository, tells what the
// session's own record is, and rebuilds the index (Rebuild): what the daemon
// does just before it starts a session.
func rebuildFor(ctx context.Context, root *unixhost.Root, ws host.Workspace, repository, record string, hears []string) (result, error) {
	node, err := fossilio.OpenNode(repository, nil)
	if err != nil {
		return result{}, fmt.Errorf("rebuild the listening index of %s: %w", ws.Key, err)
	}
	defer node.Close()
	own, err := ownRecord(ctx, node, record)
	if err != nil {
		return result{}, fmt.Errorf("rebuild the listening index of %s: the session's own %w", ws.Key, err)
	}
	resolved, err := ResolveHears(ctx, node, hears)
	if err != nil {
		return result{}, fmt.Errorf("rebuild the listening index of %s: %w", ws.Key, err)
	}
	return Rebuild(ctx, root, ws, node, own, resolved)
}

// Set writes (on) or removes one listener's file of the index, under the
// index's lock. A tool calls it once the listen or unlisten note is on the
// node, so a rebuild that runs meanwhile either reads that note or runs
// before this change, and the index ends as the notes say either way. after
// is the listen note's receipt on the node (0 for the session's own record).
func Set(ctx context.Context, root *unixhost.Root, ws host.Workspace, kind messages.ListenKind, names string, after int64, on bool) error {
	file, err := messages.ListeningFileName(kind, names)
	if err != nil {
		return err
	}
	path, err := ws.Listening(file)
	if err != nil {
		return err
	}
	return locked(ctx, root, ws, func(*unixhost.Dir) error {
		if !on {
			if err := root.Remove(path); err != nil {
				return fmt.Errorf("remove %s from the listening index: %w", file, err)
			}
			return nil
		}
		if err := root.MkdirAll(ws.ListeningDir, 0o700); err != nil {
			return err
		}
		if err := root.WriteFile(path, messages.ListeningFileContent(kind, after), 0o600); err != nil {
			return fmt.Errorf("write %s into the listening index: %w", file, err)
		}
		return nil
	})
}

// locked runs fn holding the index's lock: a flock on the workspace's held
// directory (made when missing), opened without following a link. The
// directory itself is the lock because it is never replaced, unlike the
// index directory inside it, and so no file is added to the layout for it.
// It is outside the workspace: an agent holding a lock on a directory of
// its own would stall every launch and tool that changes its index.
func locked(ctx context.Context, root *unixhost.Root, ws host.Workspace, fn func(sess *unixhost.Dir) error) error {
	if err := root.MkdirAll(ws.Held, 0o700); err != nil {
		return err
	}
	sess, err := root.OpenDir(ws.Held)
	if err != nil {
		return err
	}
	defer sess.Close()
	if err := lock(ctx, sess.File()); err != nil {
		return err
	}
	// Closing the directory releases the lock; it is released explicitly
	// first so that a long close cannot hold it.
	defer unixhost.Unlock(sess.File())
	return fn(sess)
}

// lock takes an exclusive flock on f, waiting at most LockWait (or until ctx
// ends) while another holds it.
func lock(ctx context.Context, f *os.File) error {
	if err := unixhost.LockFile(ctx, f, unixhost.Exclusive, lockWait); err != nil {
		return fmt.Errorf("the listening index: %w", err)
	}
	return nil
}

// replace makes the index exactly want: the files are written into a new
// directory beside the index, which is then exchanged with the index in one
// rename (unixhost.Dir.ExchangeDir), and the old one removed. On a file
// system that cannot exchange, ExchangeDir moves the new files into the
// index and removes the stale ones after, so a listener the notes still name
// is never missing. Every name is opened relative to the session directory,
// which was opened without following links, and none through a link.
func replace(root *unixhost.Root, ws host.Workspace, sess *unixhost.Dir, want map[string]messages.ListeningEntry) error {
	const index = "listening"
	if filepath.Base(ws.ListeningDir) != index || filepath.Dir(ws.ListeningDir) != ws.Held {
		return fmt.Errorf("the listening index %s is not %s/%s", ws.ListeningDir, ws.Held, index)
	}
	// A staging directory left by a rebuild that died midway goes first.
	if names, err := sess.Names(); err == nil {
		for _, n := range names {
			if strings.HasPrefix(n, stagePrefix) {
				root.RemoveAll(filepath.Join(ws.Held, n))
			}
		}
	}
	// An index that already is what the notes make is left as it is: a
	// relaunch with the same listeners writes and syncs nothing.
	if unchanged(sess, index, want) {
		return nil
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	stage := stagePrefix + hex.EncodeToString(rnd[:])
	if err := sess.Mkdir(stage, 0o700); err != nil {
		return err
	}
	// Whatever is left at the staging name at the end goes: the new files
	// when they were not used, the old index after an exchange, or the
	// empty directory the fallback leaves (after a rename there is nothing).
	defer root.RemoveAll(filepath.Join(ws.Held, stage))
	if err := writeFiles(sess, stage, want); err != nil {
		return err
	}
	if err := sess.ExchangeDir(stage, index); err != nil {
		return err
	}
	return sess.Sync()
}

// writeFiles writes each listener's file into the directory dir of sess,
// and syncs it.
func writeFiles(sess *unixhost.Dir, dir string, want map[string]messages.ListeningEntry) error {
	d, err := sess.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	for name, e := range want {
		if err := d.WriteFile(name, messages.ListeningFileContent(e.Kind, e.After), 0o600); err != nil {
			return err
		}
	}
	return d.Sync()
}

// unchanged says whether the index dir of sess already is exactly want: a
// directory (not a link) holding want's files and nothing else, each a
// regular file holding its kind. Anything it cannot read makes it false, so
// the index is written again.
func unchanged(sess *unixhost.Dir, dir string, want map[string]messages.ListeningEntry) bool {
	d, err := sess.OpenDir(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil || len(names) != len(want) {
		return false
	}
	for _, name := range names {
		e, ok := want[name]
		if !ok || !d.Holds(name, messages.ListeningFileContent(e.Kind, e.After)) {
			return false
		}
	}
	return true
}

// Lookup reads the index's entry for the listening file name: ok is false
// when the index does not name it. The index is the node's (held), but it
// is read as every file below the agents root is, bounded and through no
// link (docs/trust.md); a refused file is absent.
func Lookup(root *unixhost.Root, ws host.Workspace, name string) (e messages.ListeningEntry, ok bool, err error) {
	p, err := ws.Listening(name)
	if err != nil {
		return messages.ListeningEntry{}, false, err
	}
	content, err := root.ReadFile(p, unixhost.SmallFile)
	if errors.Is(err, os.ErrNotExist) {
		return messages.ListeningEntry{}, false, nil
	}
	if err != nil {
		return messages.ListeningEntry{}, false, err
	}
	e, err = messages.ParseListeningFile(name, content)
	if err != nil {
		return messages.ListeningEntry{}, false, fmt.Errorf("%s: %w", p, err)
	}
	return e, true, nil
}

// ReadIndex reads the whole index of ws, by file name: empty when there is
// none. A file that does not read as an entry is left out and reported in
// bad, so one bad file costs only itself.
func ReadIndex(root *unixhost.Root, ws host.Workspace) (index map[string]messages.ListeningEntry, bad []error, err error) {
	index = map[string]messages.ListeningEntry{}
	d, err := root.OpenDir(ws.ListeningDir)
	if errors.Is(err, os.ErrNotExist) {
		return index, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(names)
	for _, name := range names {
		content, err := d.ReadFile(name, unixhost.SmallFile)
		if err == nil {
			var e messages.ListeningEntry
			if e, err = messages.ParseListeningFile(name, content); err == nil {
				index[name] = e
				continue
			}
			err = fmt.Errorf("%s: %w", filepath.Join(ws.ListeningDir, name), err)
		}
		bad = append(bad, err)
	}
	return index, bad, nil
}
