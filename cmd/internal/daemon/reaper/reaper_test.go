package reaper

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/hosttest"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// fakeLauncher is hosttest's Spawner with the re-exec half a launcher
// also has.
type fakeLauncher struct {
	*hosttest.Spawner
	closed bool
}

func (f *fakeLauncher) Detach() ([]unixhost.ChildHandoff, error) { return nil, nil }
func (f *fakeLauncher) Adopt(unixhost.ChildHandoff, func(host.Exit)) error {
	return errors.New("fake: adopt")
}
func (f *fakeLauncher) Close() error { f.closed = true; return nil }
func (f *fakeLauncher) SandboxOf(protocol.ProcID, time.Duration) (host.SandboxRecord, error) {
	return host.SandboxRecord{}, errors.New("fake: no sandbox")
}

type sentOne struct {
	id  protocol.ProcID
	sig host.Signal
}

// fakeReaper is a reaper on hosttest's Spawner, its single-process
// signals recorded.
func fakeReaper(t *testing.T) (*Reaper, *fakeLauncher, *[]sentOne) {
	t.Helper()
	f := &fakeLauncher{Spawner: hosttest.NewSpawner(100)}
	r, err := New(host.Layout{}, nil, &messages.NodeConfig{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)),
		Host{Launcher: func() (Launcher, error) { return f, nil }})
	if err != nil {
		t.Fatal(err)
	}
	var ones []sentOne
	r.signalOne = func(id protocol.ProcID, s host.Signal) error {
		ones = append(ones, sentOne{id, s})
		return nil
	}
	return r, f, &ones
}

// TestReaperSignal: a group signal goes to the launcher (which signals
// the group its child leads, or inside its sandbox), a single one to the
// process alone; a signal the daemon does not send is refused by name.
func TestReaperSignal(t *testing.T) {
	r, f, ones := fakeReaper(t)
	ctx := context.Background()
	id, err := f.Spawn(host.SpawnSpec{Path: "/w", Args: []string{"w"}}, r.exitTo(messages.WorkspaceKey{Login: "ana", Project: "demo"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Signal(ctx, id, true, protocol.SigTERM); err != nil {
		t.Fatal(err)
	}
	if got := f.Sent(); len(got) != 1 || got[0].ID != id || got[0].Sig != host.SIGTERM {
		t.Fatalf("group signal sent %+v, want TERM to %s", got, id)
	}
	other := protocol.ProcID{PID: 7, Start: 70}
	if err := r.Signal(ctx, other, false, protocol.SigKILL); err != nil {
		t.Fatal(err)
	}
	if len(*ones) != 1 || (*ones)[0] != (sentOne{other, host.SIGKILL}) || len(f.Sent()) != 1 {
		t.Fatalf("single signal: one %+v, group %+v", *ones, f.Sent())
	}
	err = r.Signal(ctx, id, true, "HUP")
	if err == nil || !strings.Contains(err.Error(), `"HUP"`) {
		t.Fatalf("signal HUP: %v, want a refusal naming it", err)
	}
	f.End(id, host.Exit{})
	if err := r.Signal(ctx, id, true, protocol.SigTERM); !errors.Is(err, host.ErrGone) {
		t.Fatalf("signal after the end: %v, want ErrGone", err)
	}
}

// TestReaperGate: exits are held while the gate is shut (from the start
// until the node opens it, and around a re-exec), then sent in order, each
// naming the workspace its child was spawned for.
func TestReaperGate(t *testing.T) {
	r, f, _ := fakeReaper(t)
	var ids []protocol.ProcID
	ws := []messages.WorkspaceKey{{Login: "ana", Project: "demo"}, {Login: "bob", Project: "demo"}, {Login: "ana", Project: "web"}}
	for i := range 3 {
		id, err := f.Spawn(host.SpawnSpec{Path: "/w", Args: []string{"w"}}, r.exitTo(ws[i]))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var got []protocol.ProcessExited
	send := func(m protocol.ProcessExited) { got = append(got, m) }

	f.End(ids[0], host.Exit{Known: true, Code: 3})
	if len(got) != 0 {
		t.Fatalf("sent before the gate opened: %+v", got)
	}
	r.Open(send)
	if len(got) != 1 || got[0].Proc != ids[0] || got[0].Status.State != messages.EndExited || got[0].Status.Code != 3 {
		t.Fatalf("held exit sent as %+v", got)
	}
	r.Pause()
	f.End(ids[1], host.Exit{Known: true})
	if len(got) != 1 {
		t.Fatalf("sent while paused: %+v", got)
	}
	held := r.TakeHeld()
	if len(held) != 1 || held[0].Proc != ids[1] {
		t.Fatalf("held %+v", held)
	}
	// A failed exec puts them back, ahead of any exit since.
	f.End(ids[2], host.Exit{Known: true})
	r.Hold(held)
	r.Open(nil)
	if len(got) != 3 || got[1].Proc != ids[1] || got[2].Proc != ids[2] {
		t.Fatalf("after reopening: %+v", got)
	}
	for i, m := range got {
		if m.Workspace != ws[i] {
			t.Fatalf("the exit of %s names workspace %s, want %s", m.Proc, m.Workspace, ws[i])
		}
	}
}

// TestReaperWatch: a watch returns once the process ends; one asked again
// meanwhile waits on the same watch (the launcher follows the process
// once), and one given up returns the context's error.
func TestReaperWatch(t *testing.T) {
	r, f, _ := fakeReaper(t)
	id := protocol.ProcID{PID: 9, Start: 90}
	done := make(chan error, 1)
	go func() { done <- r.Watch(context.Background(), id) }()
	for deadline := time.Now().Add(10 * time.Second); len(f.Running()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the watch never reached the launcher")
		}
		time.Sleep(time.Millisecond)
	}
	// Arming it again would make the fake answer "already followed".
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Watch(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("watch asked again, given up: %v, want context.Canceled", err)
	}
	if err := f.End(id, host.Exit{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("watch: %v", err)
	}
}
