package daemon

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/daemon/reaper"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/procs"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// readCounter counts the artifacts a repository's reads rebuilt, by hash
// (fossilio.Options.ContentRead).
type readCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *readCounter) read(hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[hash]++
}

func (c *readCounter) of(hash string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[hash]
}

// txCounter keeps the read transactions a repository's reads began, by
// operation (fossilio.Options.ReadBegun).
type txCounter struct {
	mu  sync.Mutex
	ops []string
}

func (c *txCounter) begun(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, op)
}

// take returns the operations begun since the last take.
func (c *txCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := c.ops
	c.ops = nil
	return ops
}

// TestLaunchNoteReadOnce: along a `post` line's way through the daemon
// (the classification of the launch note, then the spawn's rebuild of the
// session's listening index), the launch note is read from the node's
// repository once, and each of the two makes one read transaction.
func TestLaunchNoteReadOnce(t *testing.T) {
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{
		{Login: "agent-1", Password: "agent-pw", Caps: fossilio.AgentCaps},
		{Login: "ocx", Password: "ocx-pw", Caps: fossilio.AgentCaps},
	}})
	ctx := context.Background()
	admin := &fossilio.Client{URL: srv.URL, Login: srv.AdminLogin, Password: srv.AdminPassword, ProjectCode: srv.ProjectCode}
	post := func(root, text string) string {
		t.Helper()
		d := fossilio.PostDraft{Date: time.Now(), User: srv.AdminLogin, Title: "t", Text: text}
		if root != "" {
			d.Root, d.InReplyTo, d.Title = root, root, ""
		}
		b, err := d.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		h, err := admin.Push(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	block := func(n messages.Note) string {
		t.Helper()
		b, err := n.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sb := messages.Sandbox{Network: true, ReadOnly: []string{"/usr"}, ReadWrite: []string{}, Homes: []string{}, Path: []string{"/usr/bin"}}
	home := post("", block(&messages.WorkspaceDefinition{Login: "agent-1", Project: "demo", Branch: "trunk", Sandbox: sb}))
	def := post(home, block(&messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"cat"}, Lifetime: messages.Stays}))

	agents := t.TempDir()
	layout, err := host.NewLayout(agents)
	if err != nil {
		t.Fatal(err)
	}
	root, err := unixhost.OpenRoot(agents)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	log := slog.New(slog.DiscardHandler)
	cfg := &messages.NodeConfig{User: "ocx", Projects: map[string]messages.NodeProject{"demo": {Repository: srv.Repo, URL: srv.URL}}}
	reads := &readCounter{n: map[string]int{}}
	repos := noderepos.New(cfg, log)
	repos.ContentRead = reads.read
	txs := &txCounter{}
	repos.ReadBegun = txs.begun
	t.Cleanup(repos.Close)
	rel := procs.NewReleases(t.TempDir(), t.TempDir())
	rec := newRecords(repos, layout, rel, log, recordHost{})
	// The daemon has read its record before the launch note comes.
	x, err := repos.Index("demo")
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Idx.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	launch := post(home, block(&messages.LaunchNote{Login: "agent-1", Project: "demo", Workspace: home, Session: def, Release: messages.ReleaseCurrent}))
	txs.take()

	c, err := rec.Classify(ctx, srv.Repo, launch)
	if err != nil || c.Launch == nil {
		t.Fatalf("classify the launch note: %+v, %v", c, err)
	}
	// Its classification, the verdict and the run engine's look included,
	// is current to one read of what arrived (issue 24 item 5).
	if ops := txs.take(); len(ops) != 1 {
		t.Errorf("classifying the launch note made %d read transactions, want 1: %v", len(ops), ops)
	}
	ws, err := layout.Workspace(c.Launch.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.MkdirAll(ws.Held, 0o700); err != nil {
		t.Fatal(err)
	}
	// A reaper with no launcher: the rebuild spawns nothing.
	rp, err := reaper.New(layout, root, cfg, rel, log, reaper.Host{Launcher: func() (reaper.Launcher, error) { return nil, nil }, RecordAt: repos.RecordAt})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rp.RebuildListening(ctx, ws, *c.Launch); err != nil {
		t.Fatalf("rebuild the listening index: %v", err)
	}
	// The spawn's rebuild reads the record once, under the index's lock:
	// the listen notes and whom the session hears as of one moment.
	if ops := txs.take(); len(ops) != 1 {
		t.Errorf("rebuilding the listening index made %d read transactions, want 1: %v", len(ops), ops)
	}
	if n := reads.of(launch); n != 1 {
		t.Errorf("the launch note was read %d times along its way, want once", n)
	}
}
