package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// What the session reads comes from the agent's own clone, pulled first:
// inside the sandbox it is the only repository it can read, and there every
// sender is unknown. The hook on the node already decided who wakes the
// session (D8), and the daemon who may launch it (D7).

// pull brings the clone up to date, trying again a bounded number of times;
// a pull that keeps failing is logged and the clone is read as it is.
func (s *Session) pull(ctx context.Context) bool {
	err := s.try(ctx, "pull", true, func() error { return s.fsl.Pull(ctx, s.ws.Clone) })
	return err == nil
}

// readAt reads a post or a ticket change from the clone.
func (s *Session) readAt(ctx context.Context, hash string) (Post, error) {
	info, err := s.clone.Info(ctx, hash)
	if err != nil {
		return Post{}, err
	}
	var p Post
	switch info.Kind {
	case fossilio.KindPost:
		fp, err := s.clone.Post(ctx, hash)
		if err != nil {
			return Post{}, err
		}
		p = Post{Hash: fp.Hash, Kind: messages.ListenThread, Record: fp.Root, Author: fp.Author, Text: fp.Text, Edit: fp.Edit, Time: fp.Time}
	case fossilio.KindTicketChange:
		tc, err := s.clone.TicketChange(ctx, hash)
		if err != nil {
			return Post{}, err
		}
		p = Post{Hash: tc.Hash, Kind: messages.ListenTicket, Record: tc.Ticket, Author: tc.Author, Text: tc.Comment, Time: tc.Time}
	default:
		return Post{}, fmt.Errorf("%s is a %s, not a forum post or a ticket change", hash, info.Kind)
	}
	if s.node != nil {
		if ni, err := s.node.Info(ctx, hash); err == nil {
			p.Sender = ni.Sender
		}
	}
	return p, nil
}

// readWoken reads the post a wake line names, pulling first: the hook woke
// the session because the node received it, so a clone that lacks it is
// behind and is pulled again, a bounded number of times.
func (s *Session) readWoken(ctx context.Context, hash string) (Post, error) {
	var p Post
	var pulling, reading time.Duration
	err := s.try(ctx, "read post "+hash, true, func() error {
		t0 := time.Now()
		err := s.fsl.Pull(ctx, s.ws.Clone)
		t1 := time.Now()
		pulling += t1.Sub(t0)
		if err != nil {
			return err
		}
		p, err = s.readAt(ctx, hash)
		reading += time.Since(t1)
		return err
	})
	if err == nil {
		s.log.Info("post read", keyEvent, "read", keyPost, hash, "pull", pulling, "read", reading)
	}
	return p, err
}

// readNote reads the note a post or ticket change holds.
func (s *Session) readNote(ctx context.Context, hash, what string) (messages.Note, Post, error) {
	p, err := s.readAt(ctx, hash)
	if err != nil {
		return nil, Post{}, fmt.Errorf("%s %s: %w", what, hash, err)
	}
	n, err := messages.ReadPost([]byte(p.Text))
	if err != nil {
		return nil, Post{}, fmt.Errorf("%s %s: %w", what, hash, err)
	}
	return n, p, nil
}

// readLaunch reads the launch note serve was started for, and the session
// definition it names. The launch note's record is the session's own.
func (s *Session) readLaunch(ctx context.Context) error {
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
// names, or the newest on the workspace's record. Its record is the
// session's own.
func (s *Session) findDefinition(ctx context.Context) error {
	if s.o.Session != "" {
		n, p, err := s.readNote(ctx, s.o.Session, "session definition")
		if err != nil {
			return err
		}
		def, ok := n.(*messages.SessionDefinition)
		if !ok {
			return fmt.Errorf("--session %s holds a %s note, not a session definition", s.o.Session, n.NoteKind())
		}
		s.def, s.defHash = def, s.o.Session
		s.rec = record{Kind: p.Kind, ID: p.Record}
		return nil
	}
	posts, err := s.clone.Thread(ctx, s.b.Home)
	if err != nil {
		return fmt.Errorf("the workspace's record %s: %w", s.b.Home, err)
	}
	// The newest is told by the time written in each post: a clone
	// receives in one pull what the node received one by one.
	var newest fossilio.ForumPost
	for _, p := range posts {
		first := p
		if p.First != p.Hash {
			// A note is read from a post's first version.
			if first, err = s.clone.Post(ctx, p.First); err != nil {
				continue
			}
		}
		n, err := messages.ReadPost([]byte(first.Text))
		if err != nil {
			continue
		}
		def, ok := n.(*messages.SessionDefinition)
		if !ok || (s.def != nil && !first.Time.After(newest.Time)) {
			continue
		}
		s.def, s.defHash, newest = def, first.Hash, first
	}
	if s.def != nil {
		s.rec = record{Kind: messages.ListenThread, ID: s.b.Home}
		return nil
	}
	return fmt.Errorf("the workspace's record %s holds no session definition; post one, or name one with --session", s.b.Home)
}

// readRecord reads the record's first post: its hash and its text, the
// objective of a completes session's first turn.
func (s *Session) readRecord(ctx context.Context) error {
	switch s.rec.Kind {
	case messages.ListenThread:
		root, err := s.clone.Post(ctx, s.rec.ID)
		if err != nil {
			return fmt.Errorf("the session's record %s: %w", s.rec.ID, err)
		}
		s.rec.First, s.rec.Objective = root.Hash, root.Text
	case messages.ListenTicket:
		changes, err := s.clone.TicketChanges(ctx, s.rec.ID)
		if err != nil {
			return fmt.Errorf("the session's record, ticket %s: %w", s.rec.ID, err)
		}
		if len(changes) == 0 {
			return fmt.Errorf("the session's record, ticket %s, has no change", s.rec.ID)
		}
		// A clone receives in one pull what the node received one by one,
		// in an order of its own; the time written in each change tells
		// which came first.
		first := changes[0]
		for _, c := range changes[1:] {
			if c.Time.Before(first.Time) {
				first = c
			}
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

// hasAnswered says whether the record already holds the agent's reply to p:
// a forum reply to it, or a ticket comment that says it answers it.
func (s *Session) hasAnswered(ctx context.Context, p Post) (bool, error) {
	switch p.Kind {
	case messages.ListenThread:
		posts, err := s.clone.Thread(ctx, p.Record)
		if err != nil {
			return false, err
		}
		for _, q := range posts {
			if q.InReplyTo == p.Hash && q.Author == s.b.Login {
				return true, nil
			}
		}
	case messages.ListenTicket:
		changes, err := s.clone.TicketChanges(ctx, p.Record)
		if err != nil {
			return false, err
		}
		for _, c := range changes {
			if c.Author == s.b.Login && RepliesTo(c.Comment, p.Hash) {
				return true, nil
			}
		}
	}
	return false, nil
}

// rebuildIndex rewrites WS/session/listening/ from the agent's listen and
// unlisten notes in the clone, plus the session's own record (contracts 7).
// New files are written before stale ones go, so the hook never finds a
// listener missing that the notes still name.
func (s *Session) rebuildIndex(ctx context.Context) error {
	events, err := s.listenEvents(ctx)
	if err != nil {
		return fmt.Errorf("rebuild the listening index: %w", err)
	}
	want, err := Listening(s.o.Key, s.rec.Kind, s.rec.ID, events)
	if err != nil {
		return fmt.Errorf("rebuild the listening index: %w", err)
	}
	if err := s.root.MkdirAll(s.ws.ListeningDir, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(want))
	for name, kind := range want {
		if err := s.root.WriteFile(filepath.Join(s.ws.ListeningDir, name), messages.ListeningFileContent(kind), 0o644); err != nil {
			return err
		}
		names = append(names, name)
	}
	sort.Strings(names)
	entries, err := os.ReadDir(s.ws.ListeningDir)
	if err != nil {
		return fmt.Errorf("rebuild the listening index: %w", err)
	}
	for _, e := range entries {
		if _, ok := want[e.Name()]; ok {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().After(s.pulledAt) {
			// `ocx listener add` wrote it after this session's pull began:
			// the note it stands for may not be in the clone yet.
			s.log.Info("listening file kept: newer than the notes read", keyEvent, "index", "file", e.Name())
			continue
		}
		if err := s.root.RemoveAll(filepath.Join(s.ws.ListeningDir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	s.log.Info("listening index rebuilt", keyEvent, "index", keyFiles, strings.Join(names, ","), "notes", len(events))
	return nil
}

// listenEvents finds the listen and unlisten notes the agent wrote, in every
// post and ticket change of the clone. The clone cannot tell who sent a
// post, so the name written inside it stands for the sender. What was found
// is kept in WS/session/index-scan.json with the clone's receipt it reached,
// so the next session reads only what arrived since: a clone of a large
// project holds tens of thousands of artifacts, and a CI session starts for
// every check-in.
func (s *Session) listenEvents(ctx context.Context) ([]ListenEvent, error) {
	scan := s.loadScan(ctx)
	hashes, _, err := s.clone.Received(ctx, scan.Mark)
	if err != nil {
		return nil, err
	}
	infos, err := s.clone.Classify(ctx, hashes...)
	if err != nil {
		return nil, err
	}
	events := scan.Events
	for _, in := range infos {
		if in.Author != s.b.Login || (in.Kind != fossilio.KindPost && in.Kind != fossilio.KindTicketChange) || in.Edit {
			continue
		}
		p, err := s.readAt(ctx, in.Hash)
		if err != nil {
			continue
		}
		n, err := messages.ReadPost([]byte(p.Text))
		if err != nil {
			continue
		}
		e := ListenEvent{Time: in.Time, Rcvid: in.Rcvid, Rid: in.Rid}
		switch n := n.(type) {
		case *messages.ListenNote:
			e.Listener, e.On = n.Listener, true
		case *messages.UnlistenNote:
			e.Listener = n.Listener
		default:
			continue
		}
		events = append(events, e)
	}
	if len(infos) > 0 {
		last := infos[len(infos)-1]
		s.saveScan(indexScan{Clone: s.b.ProjectCode, Mark: last.Rcvid, MarkHash: last.Hash, Events: events})
	}
	s.log.Info("listen notes read", keyEvent, "scan", "from", scan.Mark, "artifacts", len(infos), "notes", len(events))
	return events, nil
}

// indexScan is WS/session/index-scan.json: the agent's listen and unlisten
// notes found in the clone up to receipt Mark, whose last artifact is
// MarkHash. It is a cache: when it does not match the clone it is ignored
// and the whole clone is read again.
type indexScan struct {
	Clone    string        `json:"clone"` // the project code
	Mark     int64         `json:"mark"`
	MarkHash string        `json:"mark_hash"`
	Events   []ListenEvent `json:"events"`
}

func (s *Session) scanFile() string { return filepath.Join(s.ws.Session, "index-scan.json") }

// loadScan returns the kept scan when it is this clone's: the artifact it
// ends on is still there, at the receipt it says. A clone made anew numbers
// its receipts from the start, and then the scan starts from the start too.
func (s *Session) loadScan(ctx context.Context) indexScan {
	data, err := s.root.ReadFile(s.scanFile())
	if err != nil {
		return indexScan{}
	}
	var scan indexScan
	if err := json.Unmarshal(data, &scan); err != nil || scan.Clone != s.b.ProjectCode || scan.Mark <= 0 {
		return indexScan{}
	}
	info, err := s.clone.Info(ctx, scan.MarkHash)
	if err != nil || info.Rcvid != scan.Mark {
		return indexScan{}
	}
	return scan
}

func (s *Session) saveScan(scan indexScan) {
	data, err := json.Marshal(scan)
	if err == nil {
		err = s.root.WriteFile(s.scanFile(), data, 0o600)
	}
	if err != nil {
		s.log.Warn("the scan of listen notes is not kept", keyEvent, "scan", keyErr, err)
	}
}

// listenOn returns the latest listen or unlisten note of this workspace for
// the record p is on, read from that record's posts or changes whose author
// is the agent; nil when p is on the session's own record, or there is none.
func (s *Session) listenOn(ctx context.Context, p Post) (*ListenEvent, error) {
	if p.Record == s.rec.ID {
		return nil, nil
	}
	var events []ListenEvent
	add := func(in fossilio.Info, text string) {
		if in.Author != s.b.Login {
			return
		}
		n, err := messages.ReadPost([]byte(text))
		if err != nil {
			return
		}
		e := ListenEvent{Time: in.Time, Rcvid: in.Rcvid, Rid: in.Rid}
		switch n := n.(type) {
		case *messages.ListenNote:
			e.Listener, e.On = n.Listener, true
		case *messages.UnlistenNote:
			e.Listener = n.Listener
		default:
			return
		}
		events = append(events, e)
	}
	switch p.Kind {
	case messages.ListenThread:
		posts, err := s.clone.Thread(ctx, p.Record)
		if err != nil {
			return nil, err
		}
		for _, q := range posts {
			if q.First == q.Hash {
				add(q.Info, q.Text)
			}
		}
	case messages.ListenTicket:
		changes, err := s.clone.TicketChanges(ctx, p.Record)
		if err != nil {
			return nil, err
		}
		for _, c := range changes {
			add(c.Info, c.Comment)
		}
	}
	return LatestListen(events, s.o.Key, p.Kind, p.Record), nil
}
