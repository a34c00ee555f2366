package hosttest

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

func TestClock(t *testing.T) {
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	c := newClock(start)
	var fired []string
	var at []time.Time
	c.AfterFunc(2*time.Second, func() { fired = append(fired, "b"); at = append(at, c.Now()) })
	c.AfterFunc(time.Second, func() {
		fired = append(fired, "a")
		at = append(at, c.Now())
		// A timer set while firing falls due within the same Advance.
		c.AfterFunc(500*time.Millisecond, func() { fired = append(fired, "a2") })
	})
	stop := c.AfterFunc(time.Second, func() { fired = append(fired, "stopped") })
	if !stop() || stop() {
		t.Fatal("stop did not report once")
	}
	c.Advance(1500 * time.Millisecond)
	if !reflect.DeepEqual(fired, []string{"a", "a2"}) {
		t.Fatalf("fired %v", fired)
	}
	c.Advance(10 * time.Second)
	if !reflect.DeepEqual(fired, []string{"a", "a2", "b"}) || !at[0].Equal(start.Add(time.Second)) || !at[1].Equal(start.Add(2*time.Second)) {
		t.Fatalf("fired %v at %v", fired, at)
	}
	if !c.Now().Equal(start.Add(11500*time.Millisecond)) || c.Pending() != 0 {
		t.Fatalf("now %v pending %d", c.Now(), c.Pending())
	}
}

func TestSpawner(t *testing.T) {
	s := NewSpawner(100)
	var mu sync.Mutex
	var got []host.Exit
	on := func(e host.Exit) { mu.Lock(); got = append(got, e); mu.Unlock() }
	spec := host.SpawnSpec{Path: "/r/workspace", Args: []string{"workspace", "serve", "a/b"}, Dir: "/"}
	a, err := s.Spawn(spec, on)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Spawn(spec, on)
	if a.PID != 100 || b.PID != 101 || a.Start == b.Start {
		t.Fatalf("ids %v %v", a, b)
	}
	s.FailNext(errors.New("no"))
	if _, err := s.Spawn(spec, on); err == nil {
		t.Fatal("FailNext did nothing")
	}
	// TERM ends a process when the test says so.
	s.OnSignal = func(id protocol.ProcID, sig host.Signal) {
		if sig == host.SIGTERM {
			s.End(id, host.Exit{Known: true, Signal: 15})
		}
	}
	if err := s.Signal(a, host.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal(a, host.SIGTERM); !errors.Is(err, host.ErrGone) {
		t.Fatalf("signal after the end = %v", err)
	}
	if err := s.End(a, host.Exit{}); !errors.Is(err, host.ErrGone) {
		t.Fatalf("a second end = %v", err)
	}
	if err := s.Watch(protocol.ProcID{PID: 7, Start: 1}, on); err != nil {
		t.Fatal(err)
	}
	s.End(protocol.ProcID{PID: 7, Start: 1}, host.Exit{At: time.Unix(5, 0)})
	if len(got) != 2 || got[0].ID != a || got[0].Signal != 15 || got[1].Known {
		t.Fatalf("exits %+v", got)
	}
	if r := s.Running(); len(r) != 1 || r[0] != b {
		t.Fatalf("running %v", r)
	}
	if sent := s.Sent(); len(sent) != 1 || sent[0] != (Sent{a, host.SIGTERM}) {
		t.Fatalf("sent %v", sent)
	}
	if sp := s.Spawned(); len(sp) != 2 || sp[1].ID != b {
		t.Fatalf("spawned %v", sp)
	}
}

func TestProcTable(t *testing.T) {
	var p ProcTable
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	if v, err := p.Naming(k); err != nil || v.Named != host.No {
		t.Fatalf("empty table: %s %v", v, err)
	}
	p.Set(host.Table{Procs: []host.Process{{ID: protocol.ProcID{PID: 5, Start: 1}, Names: []host.Naming{{Verb: host.VerbServe, Key: k}}}}})
	if v, _ := p.Naming(k); v.Named != host.Yes {
		t.Fatalf("named: %s", v)
	}
	p.Set(host.Table{Unreadable: []host.Unreadable{{PID: 9, Err: "permission denied"}}})
	if v, _ := p.Naming(k); v.Named != host.Unknown {
		t.Fatalf("unreadable: %s", v)
	}
	p.SetErr(errors.New("broken /proc"))
	if _, err := p.Scan(); err == nil {
		t.Fatal("SetErr did nothing")
	}
}

func TestSpawnerStartRun(t *testing.T) {
	s := NewSpawner(300)
	var _ host.RunStarter = s
	s.Support = host.RunSupport{Memory: "no cgroup"}
	sb := &host.RunSandbox{Proc: "/proc", Dev: "/dev", Tmp: "/tmp"}
	if _, err := s.StartRun(host.RunSpec{Command: []string{"x"}, Dir: "/", Sandbox: sb, Limits: host.RunLimits{Memory: 1}}, func(host.Exit) {}); !errors.Is(err, host.ErrNotProvided) {
		t.Fatalf("memory: %v", err)
	}
	var got []host.Exit
	id, err := s.StartRun(host.RunSpec{Command: []string{"x"}, Dir: "/", Sandbox: sb, Limits: host.RunLimits{CPU: 1}}, func(e host.Exit) { got = append(got, e) })
	if err != nil || id.PID != 300 {
		t.Fatalf("StartRun = %v %v", id, err)
	}
	if st := s.Started(); len(st) != 1 || st[0].ID != id || st[0].Spec.Limits.CPU != 1 {
		t.Fatalf("Started = %+v", st)
	}
	if err := s.End(id, host.Exit{Known: true, Code: 3}); err != nil || len(got) != 1 || got[0].Code != 3 {
		t.Fatalf("End: %v %+v", err, got)
	}
}
