package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ocx-go/ocx/actors/turn"

	"github.com/ocx-go/ocx/fossilio"
	onrecord "github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/listening"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// What the session reads at its start comes from the agent's own clone,
// pulled first: inside the sandbox it is the only repository it can read,
// and there every sender is unknown. The post a wake line names is fetched
// alone over sync (fossilio.Client.Fetch), as the agent login: a turn needs
// that post and nothing else of the record. Its sender is the one the wake
// line names: the hook on the node already decided who wakes the session
// and told it who sent each post (D8, D27), and the daemon who may launch
// it (D7). Nothing written inside an artifact is taken for its sender.

// pull brings the clone up to date, trying again a bounded number of times;
// a pull that keeps failing is logged and the clone is read as it is.
func (s *session) pull(ctx context.Context) bool {
	if s.tools != nil {
		s.log.Info("the clone is not pulled: it remembers no password; posts are read through the node's tools", keyEvent, "pull")
		return false
	}
	t0 := time.Now()
	err := s.try(ctx, "pull", true, func() error { return s.fsl.Pull(ctx, s.ws.Clone) })
	if err == nil {
		s.log.Info("clone pulled", keyEvent, "pull", "took", time.Since(t0))
	}
	return err == nil
}

// readAt reads a post or a ticket change from the clone.
func (s *session) readAt(ctx context.Context, hash string) (turn.Post, error) {
	info, err := s.clone.Info(ctx, hash)
	if errors.Is(err, fossilio.ErrNotFound) && s.remote != nil {
		// What the clone lacks (it is never pulled without a password, D39;
		// its pull at the start may have failed), the server sends: one
		// artifact, fetched as the agent, checked against its hash.
		return s.fetchPost(ctx, hash)
	}
	if err != nil {
		return turn.Post{}, err
	}
	var p turn.Post
	switch info.Kind {
	case fossilio.KindPost:
		fp, err := s.clone.Post(ctx, hash)
		if err != nil {
			return turn.Post{}, err
		}
		p = turn.Post{Hash: fp.Hash, Kind: messages.ListenThread, Record: fp.Root, Author: fp.Author, Text: fp.Text, Edit: fp.Edit, Time: fp.Time}
	case fossilio.KindTicketChange:
		tc, err := s.clone.TicketChange(ctx, hash)
		if err != nil {
			return turn.Post{}, err
		}
		p = turn.Post{Hash: tc.Hash, Kind: messages.ListenTicket, Record: tc.Ticket, Author: tc.Author, Text: tc.Comment, Time: tc.Time}
	default:
		return turn.Post{}, fmt.Errorf("%s is a %s, not a forum post or a ticket change", hash, info.Kind)
	}
	return p, nil
}

// How a session reads the post a wake line names (OCX_SESSION_READ).
const (
	// readFetch fetches the post alone over sync: one request.
	readFetch = "fetch"
	// readPull pulls the whole clone, then reads the post there: the way a
	// turn read before the fetch, kept so that a benchmark compares the two
	// in one run, and as a way out should a server refuse the fetch.
	readPull = "pull"
)

// readWoken reads the post a wake line names: fetched alone from the server
// as the agent (the hook woke the session because the node received it), or,
// with OCX_SESSION_READ=pull, from the clone after a pull. A failure to reach
// the server is tried again a bounded number of times; a post the server
// does not hold, or that does not parse, is not.
func (s *session) readWoken(ctx context.Context, hash string) (turn.Post, error) {
	var p turn.Post
	var took time.Duration
	how := readFetch
	if s.readMode == readPull {
		how = readPull
	}
	err := s.try(ctx, "read post "+hash, true, func() error {
		t0 := time.Now()
		var err error
		if how == readPull && s.tools == nil {
			if err = s.fsl.Pull(ctx, s.ws.Clone); err == nil {
				p, err = s.readAt(ctx, hash)
			}
		} else {
			p, err = s.fetchPost(ctx, hash)
		}
		took += time.Since(t0)
		return err
	})
	if err == nil {
		s.log.Info("post read", keyEvent, "read", keyPost, hash, "how", how, "took", took)
	}
	return p, err
}

// fetchPost fetches one post or ticket change from the server and reads it
// from its own cards: its thread's root (G, or the post itself when it opens
// a thread), whether it is an edit (P), its ticket (K) and the comment it
// adds.
func (s *session) fetchPost(ctx context.Context, hash string) (turn.Post, error) {
	data, err := s.remote.fetch(ctx, hash)
	if err != nil {
		if errors.Is(err, fossilio.ErrNotFound) || errors.Is(err, fossilio.ErrMalformed) {
			return turn.Post{}, &permanentError{err}
		}
		return turn.Post{}, err
	}
	a, err := fossilio.Parse(data)
	if err != nil {
		return turn.Post{}, &permanentError{fmt.Errorf("post %s does not parse: %w", hash, err)}
	}
	p, err := turn.PostOf(hash, a)
	if err != nil {
		return turn.Post{}, &permanentError{err}
	}
	return p, nil
}

// readNote reads the note a post or ticket change holds.
func (s *session) readNote(ctx context.Context, hash, what string) (messages.Note, turn.Post, error) {
	p, err := s.readAt(ctx, hash)
	if err != nil {
		return nil, turn.Post{}, fmt.Errorf("%s %s: %w", what, hash, err)
	}
	n, err := messages.ReadPost([]byte(p.Text))
	if err != nil {
		return nil, turn.Post{}, fmt.Errorf("%s %s: %w", what, hash, err)
	}
	return n, p, nil
}

// readLaunch reads the launch note serve was started for, and the session
// definition it names. The launch note's record is the session's own.
func (s *session) readLaunch(ctx context.Context) error {
	n, p, err := s.readNote(ctx, s.o.Launch, "launch")
	if err != nil {
		return err
	}
	l, ok := n.(*messages.LaunchNote)
	if !ok {
		return fmt.Errorf("launch %s holds a %s note, not a launch note", s.o.Launch, n.NoteKind())
	}
	if l.Key() != s.o.Key {
		return fmt.Errorf("launch %s is for workspace %s, not %s", s.o.Launch, l.Key(), s.o.Key)
	}
	s.launch, s.launchPost = l, p
	s.rec = record{Kind: p.Kind, ID: p.Record}
	dn, _, err := s.readNote(ctx, l.Session, "session definition")
	if err != nil {
		return err
	}
	def, ok := dn.(*messages.SessionDefinition)
	if !ok {
		return fmt.Errorf("launch %s names %s as its session definition, but it holds a %s note", s.o.Launch, l.Session, dn.NoteKind())
	}
	s.def, s.defHash = def, l.Session
	return nil
}

// findDefinition finds a terminal session's definition: the one --session
// names, or the newest on the workspace's record that counts. A definition
// counts only when a user holding admin or setup sent it (D7), which only
// the node's repository tells: without it, a session at a terminal runs only
// the definition its person names with --session. Its record is the
// session's own.
func (s *session) findDefinition(ctx context.Context) error {
	if s.o.Session != "" {
		n, p, err := s.readNote(ctx, s.o.Session, "session definition")
		if err != nil {
			return err
		}
		def, ok := n.(*messages.SessionDefinition)
		if !ok {
			return fmt.Errorf("--session %s holds a %s note, not a session definition", s.o.Session, n.NoteKind())
		}
		if s.node != nil {
			if err := s.counts(ctx, s.o.Session, "--session"); err != nil {
				return err
			}
		}
		s.def, s.defHash = def, s.o.Session
		s.rec = record{Kind: p.Kind, ID: p.Record}
		return nil
	}
	if s.node == nil {
		return fmt.Errorf("the workspace's record %s: a session definition counts only when a user holding admin or setup sent it (D7), which only the node's repository tells, and it cannot be read here; name the definition with --session", s.b.Home)
	}
	posts, err := s.node.Thread(ctx, s.b.Home)
	if err != nil {
		return fmt.Errorf("the workspace's record %s: %w", s.b.Home, err)
	}
	// The newest in the server's order (Thread's order) that counts; a note
	// is read from a post's first version, which is what the receipt names.
	var refused []string
	for _, p := range slices.Backward(posts) {
		if p.First != p.Hash || p.Pending {
			continue
		}
		n, err := messages.ReadPost([]byte(p.Text))
		if err != nil {
			continue
		}
		def, ok := n.(*messages.SessionDefinition)
		if !ok {
			continue
		}
		if err := s.counts(ctx, p.Hash, "session definition"); err != nil {
			refused = append(refused, err.Error())
			continue
		}
		s.def, s.defHash = def, p.Hash
		s.rec = record{Kind: messages.ListenThread, ID: s.b.Home}
		for _, why := range refused {
			s.log.Warn("a newer session definition does not count", keyEvent, "definition", keyWhy, why)
		}
		return nil
	}
	if len(refused) > 0 {
		return fmt.Errorf("the workspace's record %s holds no session definition that counts: %s", s.b.Home, strings.Join(refused, "; "))
	}
	return fmt.Errorf("the workspace's record %s holds no session definition; post one, or name one with --session", s.b.Home)
}

// counts says whether the note at hash counts (D7): its sender, as the
// node's repository recorded it, holds admin or setup (fossilio/record).
func (s *session) counts(ctx context.Context, hash, what string) error {
	e, err := onrecord.At(ctx, s.node, hash)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, hash, err)
	}
	if !onrecord.Privileged(ctx, s.node, e.Sender) {
		return fmt.Errorf("%s %s was sent by %q, who holds neither admin nor setup, so it does not count (D7)", what, hash, e.Sender)
	}
	return nil
}

// readRecord reads the record's first post: its hash and its text, the
// objective of a completes session's first turn. A protocol v1 record's
// objective is "Record HASH: OBJECTIVE" (E4), its own field in full.
func (s *session) readRecord(ctx context.Context) error {
	switch s.rec.Kind {
	case messages.ListenThread:
		root, err := s.clone.Post(ctx, s.rec.ID)
		if err != nil {
			return fmt.Errorf("the session's record %s: %w", s.rec.ID, err)
		}
		s.rec.First, s.rec.Objective = root.Hash, root.Text
		if rec, err := runmsg.ReadTaskRecord([]byte(root.Text)); err == nil {
			s.rec.Objective = "Record " + root.Hash + ": " + rec.Objective
		}
	case messages.ListenTicket:
		changes, err := s.clone.TicketChanges(ctx, s.rec.ID)
		if err != nil {
			return fmt.Errorf("the session's record, ticket %s: %w", s.rec.ID, err)
		}
		if len(changes) == 0 {
			return fmt.Errorf("the session's record, ticket %s, has no change", s.rec.ID)
		}
		first, err := s.firstChange(ctx, changes)
		if err != nil {
			return fmt.Errorf("the session's record, ticket %s: %w", s.rec.ID, err)
		}
		s.rec.First, s.rec.Objective = first.Hash, first.Comment
		if strings.TrimSpace(first.Comment) == "" {
			for _, f := range first.Fields {
				if f.Name == "title" {
					s.rec.Objective = f.Value
				}
			}
		}
	default:
		return fmt.Errorf("the session's record %s is a %s", s.rec.ID, s.rec.Kind)
	}
	return nil
}

// firstChange is the ticket's first change in the server's order (D47),
// its objective: the change the daemon named (protocol.RecordFirstEnv,
// read from the node's repository when it spawned the session), else,
// where the node's repository can be read (a terminal on the node's
// host), its first there. Never the change whose D card is the earliest:
// anyone who may push backdates one. Without either, the clone's own
// order (its receipts, then rows) is taken, and the log says so. changes
// are the clone's.
func (s *session) firstChange(ctx context.Context, changes []fossilio.TicketChange) (fossilio.TicketChange, error) {
	want := os.Getenv(protocol.RecordFirstEnv)
	if want != "" && messages.ValidateHash(want) != nil {
		return fossilio.TicketChange{}, fmt.Errorf("%s=%q is not a full hash", protocol.RecordFirstEnv, want)
	}
	if want == "" && s.node != nil {
		if nc, err := s.node.TicketChanges(ctx, s.rec.ID); err == nil && len(nc) > 0 {
			want = nc[0].Hash
		}
	}
	if want == "" {
		s.log.Warn("the ticket's first change is taken in the clone's own order: neither the daemon nor the node's repository said", keyEvent, "objective")
		return changes[0], nil
	}
	for _, c := range changes {
		if c.Hash == want {
			return c, nil
		}
	}
	p, err := s.readAt(ctx, want)
	if err != nil {
		return fossilio.TicketChange{}, fmt.Errorf("its first change %s: %w", want, err)
	}
	if p.Kind != messages.ListenTicket || p.Record != s.rec.ID {
		return fossilio.TicketChange{}, fmt.Errorf("its first change %s is not a change of it", want)
	}
	return fossilio.TicketChange{Info: fossilio.Info{Hash: p.Hash, Kind: fossilio.KindTicketChange, Ticket: p.Record}, Comment: p.Text}, nil
}

// isAnswered says whether a session of this workspace answered the post
// (WS/session/answered), or this process already handled it.
func (s *session) isAnswered(hash string) bool {
	return s.answered[hash] || s.answeredLog.has(hash)
}

// markAnswered records that the post was answered, in this process and in
// WS/session/answered for the sessions after it.
func (s *session) markAnswered(hash string) {
	s.answered[hash] = true
	if err := s.answeredLog.add(hash); err != nil {
		s.log.Warn("the answered post is not recorded on the host", keyEvent, "answered-file", keyPost, hash, keyErr, err)
	}
}

// indexFromNode rebuilds the listening index from the node's repository
// when this process can read it (run and start on the node's host):
// there the node tells who sent each listen note (D7). `serve` runs in the
// sandbox, where it cannot; the daemon rebuilt the index just before it
// started it.
func (s *session) indexFromNode(ctx context.Context) error {
	// The scan of the clone's listen notes sessions once kept is no longer
	// read by anyone.
	_ = s.root.Remove(filepath.Join(s.ws.Session, "index-scan.json"))
	if s.o.Verb == verbServe {
		return nil
	}
	if s.node == nil {
		s.log.Warn("the node's repository is not readable here; the listening index is left as it is", keyEvent, "index")
		return nil
	}
	hears, err := listening.ResolveHears(ctx, s.node, s.def.Hears)
	if err != nil {
		return err
	}
	res, err := listening.Rebuild(ctx, s.root, s.ws, s.node, listening.Own{Kind: s.rec.Kind, ID: s.rec.ID}, hears)
	if err != nil {
		return err
	}
	if err := listening.WriteCheckins(ctx, s.root, s.ws, s.def.Checkins); err != nil {
		return err
	}
	s.log.Info("listening index rebuilt from the node's repository", keyEvent, "index", keyFiles, strings.Join(res.Files, ","), "notes", res.Notes, "hears", strings.Join(res.Hears, ","))
	return nil
}
