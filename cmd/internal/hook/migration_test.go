package hook_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/host/unixhost"
)

// TestHookLooksUpOnlyTheListeningIndex is seed 000's migration row 2
// (issue 27 item 9, D57): the hook (the seed's bin/wake) finds whom to wake
// in the listening index alone; this node never had the per-record
// workspaces of AGENTS/LOGIN/workspaces/RECORD, so it has no second
// lookup: a wake pipe planted there, for the very thread a post arrives
// on, gets nothing, whether or not its login's session listens there.
func TestHookLooksUpOnlyTheListeningIndex(t *testing.T) {
	f := newFix(t)
	person := f.client(person, personPW)
	th, err := person.NewThread(f.ctx, "A question", "Hello?")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(th)
	must(t, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
	f.hears(agent, person.Login)
	f.hears(agent2, person.Login)
	w1 := f.listen(agent)
	f.hook(lastArtifact(f))

	root, err := unixhost.OpenRoot(f.agents)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	var old []*lines
	var oldPaths []string
	for _, login := range []string{agent, agent2} {
		p := filepath.Join(f.agents, login, "workspaces", th, "wake")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := root.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		old = append(old, readPipe(t, root, p))
		oldPaths = append(oldPaths, p)
	}

	p1, err := person.Reply(f.ctx, th, th, "Anyone there?")
	if err != nil {
		t.Fatal(err)
	}
	f.hook(p1)
	if got := f.upTo(w1, agent); len(got) != 1 || got[0] != line(p1, person.Login) {
		t.Fatalf("the listening session read %q, want [%s]", got, line(p1, person.Login))
	}
	// The hook has returned: a marker written now comes after anything it
	// wrote into the planted pipes.
	for i, p := range oldPaths {
		if got := upToMarker(t, root, old[i], p); len(got) != 0 {
			t.Errorf("the per-record wake pipe %s read %q; the hook looks there no more", p, got)
		}
	}
}

// upToMarker writes a marker into the pipe at path and returns what its
// reader read before it.
func upToMarker(t *testing.T, root *unixhost.Root, l *lines, path string) []string {
	t.Helper()
	lw, err := unixhost.OpenLineWriter(root, path)
	if err != nil {
		t.Fatal(err)
	}
	defer lw.Close()
	marker := strings.Repeat("f", 64)
	if err := lw.WriteLine([]byte(marker)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		got := append([]string(nil), l.got...)
		l.mu.Unlock()
		for i, s := range got {
			if s == marker {
				return got[:i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the marker never came through %s: %q", path, got)
		}
		time.Sleep(time.Millisecond)
	}
}
