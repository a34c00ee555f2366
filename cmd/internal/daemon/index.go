package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// repoIndex is one repository of the node as the daemon reads it: the
// repository opened once, and an index of the notes the daemon looks up
// (branch listen notes, session and workspace definitions, terminations, its
// own end notes), kept up to date incrementally from the receipts the
// repository made since the last look. Notes are facts that never change once
// received, so the index is safe to keep; who may write what (D7) is checked
// when an entry is used, since capabilities can change.
type repoIndex struct {
	project string
	path    string
	url     string
	repo    *fossilio.Repo

	mu   sync.Mutex
	code string // the project code, read once
	mark int64  // the newest receipt indexed
	// listens holds the latest listen or unlisten note of each branch
	// listener, by login and branch, when its agent login sent it (D7).
	listens map[listenKey]listenEntry
	// sessionDefs are the session definitions on each record, oldest first.
	sessionDefs map[string][]defEntry
	// workspaceDefs are the workspace definitions of each workspace, oldest
	// first, each the first post of its thread.
	workspaceDefs map[messages.WorkspaceKey][]defEntry
	// terminated are the terminated notes of each workspace, oldest first.
	terminated map[messages.WorkspaceKey][]defEntry
	// ends are the end notes the node user wrote, by launch and process.
	ends map[endKey]bool
}

type listenKey struct{ login, branch string }

// listenEntry is a branch listener's latest note.
type listenEntry struct {
	hash   string
	record string // the thread's root or the ticket's id the note is on
	on     bool   // listen, not unlisten
}

// defEntry is a note found on the record with where it is and who sent it.
type defEntry struct {
	hash   string
	sender string
	record string
	ticket bool
	rcvid  int64
	rid    int64
	note   messages.Note
	// noteErr says why a post whose blocks claim to be notes (claims) holds
	// none that counts: two notes, a field at fault, a block never closed.
	noteErr error
	claims  []messages.Claim
}

type endKey struct {
	launch string
	proc   messages.ProcID
}

func newRepoIndex(project string, p messages.NodeProject) (*repoIndex, error) {
	r, err := fossilio.OpenNode(p.Repository, nil)
	if err != nil {
		return nil, fmt.Errorf("open the repository of %s: %w", project, err)
	}
	return &repoIndex{
		project: project, path: p.Repository, url: p.URL, repo: r,
		listens:       map[listenKey]listenEntry{},
		sessionDefs:   map[string][]defEntry{},
		workspaceDefs: map[messages.WorkspaceKey][]defEntry{},
		terminated:    map[messages.WorkspaceKey][]defEntry{},
		ends:          map[endKey]bool{},
	}, nil
}

// classifyBatch bounds the artifacts classified in one read transaction, so
// that a first look at a large repository never holds a long read.
const classifyBatch = 512

// refresh indexes what the repository received since the last look. The
// caller holds x.mu.
func (x *repoIndex) refresh(ctx context.Context, nodeUser string) error {
	hashes, last, err := x.repo.Received(ctx, x.mark)
	if err != nil {
		return fmt.Errorf("read what %s received: %w", x.path, err)
	}
	for len(hashes) > 0 {
		batch := hashes[:min(classifyBatch, len(hashes))]
		hashes = hashes[len(batch):]
		infos, err := x.repo.Classify(ctx, batch...)
		if err != nil {
			return fmt.Errorf("classify what %s received: %w", x.path, err)
		}
		for _, info := range infos {
			e, ok, err := x.entry(ctx, info)
			if err != nil {
				return err
			}
			if ok {
				x.add(e, nodeUser)
			}
		}
	}
	if last > x.mark {
		x.mark = last
	}
	return nil
}

// entry reads the note an artifact holds: a post, read as first written (an
// edit changes no note, and one awaiting moderation is not on the record
// yet), or a ticket change's appended comment.
func (x *repoIndex) entry(ctx context.Context, info fossilio.Info) (defEntry, bool, error) {
	e := defEntry{hash: info.Hash, sender: info.Sender, rcvid: info.Rcvid, rid: info.Rid}
	var text string
	switch info.Kind {
	case fossilio.KindPost:
		if info.Edit || info.Pending {
			return e, false, nil
		}
		p, err := x.repo.Post(ctx, info.Hash)
		if err != nil {
			return e, false, fmt.Errorf("read post %s of %s: %w", info.Hash, x.path, err)
		}
		e.record, text = info.Root, p.Text
	case fossilio.KindTicketChange:
		c, err := x.repo.TicketChange(ctx, info.Hash)
		if err != nil {
			return e, false, fmt.Errorf("read ticket change %s of %s: %w", info.Hash, x.path, err)
		}
		e.record, e.ticket, text = info.Ticket, true, c.Comment
	default:
		return e, false, nil
	}
	if !strings.Contains(text, "```") && strings.TrimSpace(text) != messages.StopText {
		return e, false, nil
	}
	note, err := messages.ReadPost([]byte(text))
	if err != nil {
		if !messages.Ignorable(err) {
			e.noteErr, e.claims = err, messages.Claims([]byte(text))
		}
		return e, false, nil
	}
	e.note = note
	// A workspace definition is the first post of its thread.
	if _, ok := note.(*messages.WorkspaceDefinition); ok && (e.ticket || info.InReplyTo != "") {
		return e, false, nil
	}
	return e, true, nil
}

func (x *repoIndex) add(e defEntry, nodeUser string) {
	switch n := e.note.(type) {
	case *messages.ListenNote:
		if n.Kind == messages.ListenBranch && n.Project == x.project && e.sender == n.Login {
			x.listens[listenKey{n.Login, n.Names}] = listenEntry{hash: e.hash, record: e.record, on: true}
		}
	case *messages.UnlistenNote:
		if n.Kind == messages.ListenBranch && n.Project == x.project && e.sender == n.Login {
			x.listens[listenKey{n.Login, n.Names}] = listenEntry{hash: e.hash, record: e.record, on: false}
		}
	case *messages.SessionDefinition:
		x.sessionDefs[e.record] = append(x.sessionDefs[e.record], e)
	case *messages.WorkspaceDefinition:
		x.workspaceDefs[n.Key()] = append(x.workspaceDefs[n.Key()], e)
	case *messages.TerminatedNote:
		x.terminated[n.Key()] = append(x.terminated[n.Key()], e)
	case *messages.EndNote:
		if e.sender == nodeUser {
			x.ends[endKey{n.Launch, messages.ProcID{PID: n.PID, Start: n.StartTime}}] = true
		}
	}
}

// projectCode reads the repository's project code once. The caller holds
// x.mu.
func (x *repoIndex) projectCode(ctx context.Context) (string, error) {
	if x.code != "" {
		return x.code, nil
	}
	c, err := x.repo.ProjectCode(ctx)
	if err != nil {
		return "", fmt.Errorf("read the project code of %s: %w", x.path, err)
	}
	x.code = c
	return c, nil
}

// noteAt reads the note of one post or ticket change, with its place and
// sender, whether or not it is indexed.
func (x *repoIndex) noteAt(ctx context.Context, hash string) (defEntry, error) {
	info, err := x.repo.Info(ctx, hash)
	if err != nil {
		return defEntry{}, err
	}
	e, ok, err := x.entry(ctx, info)
	if err != nil {
		return defEntry{}, err
	}
	if !ok {
		if e.noteErr != nil {
			return defEntry{}, fmt.Errorf("%s does not read as one note: %w", hash, e.noteErr)
		}
		return defEntry{}, fmt.Errorf("%s holds no note that counts (a %s)", hash, info.Kind)
	}
	return e, nil
}

func (x *repoIndex) close() error { return x.repo.Close() }
