//go:build linux

package unixhost

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// lookAlikeSetup is alice's sandbox (newSandboxSetup) and bob's workspace
// beside it, with a helper in alice's sandbox whose command line says it is
// bob's session: `workspace serve bob/demo --root AGENTS --launch HASH`.
type lookAlikeSetup struct {
	sandboxSetup
	bob   host.Workspace
	l     *Launcher
	x     *exits
	alice protocol.ProcID // alice's bwrap
}

var bobKey = messages.WorkspaceKey{Login: "bob", Project: "demo"}

func newLookAlike(t *testing.T) *lookAlikeSetup {
	t.Helper()
	s := &lookAlikeSetup{sandboxSetup: newSandboxSetup(t)}
	var err error
	if s.bob, err = s.layout.Workspace(bobKey); err != nil {
		t.Fatal(err)
	}
	if err := s.root.MkdirAll(s.bob.Tree, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.root.MkdirAll(s.bob.Session, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.root.Mkfifo(s.bob.Wake, 0o600); err != nil {
		t.Fatal(err)
	}
	readyP, lines := readyPipe(t, s.ws.Dir)
	s.l = newLauncher(t, s.root)
	s.x = newExits()
	spec := s.spec(false, "serve", "HELPER_READY="+readyP)
	// The sandbox is alice's (its bwrap binds her workspace); what runs
	// in it claims bob's.
	spec.Args = []string{"workspace", "serve", bobKey.String(), "--root", s.layout.Root(), "--launch", launchHash}
	if s.alice, err = s.l.Spawn(spec, s.x.on); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.l.Signal(s.alice, host.SIGKILL)
		s.x.wait(t, s.alice)
	})
	await(t, lines, "the look-alike ready")
	return s
}

// A process in alice's sandbox whose command line names bob's workspace is
// not bob's session: neither a full scan nor the index counts it, so bob's
// workspace is named by nothing; alice's is named by her sandbox.
func TestLookAlikeInAnotherSandbox(t *testing.T) {
	s := newLookAlike(t)
	full, err := NewProcTable(ProcOptions{Layout: s.layout})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	indexed, err := NewProcTable(ProcOptions{Layout: s.layout})
	if err != nil {
		t.Fatal(err)
	}
	defer indexed.Close()
	if err := indexed.Watch(); err != nil {
		t.Fatal(err)
	}
	for name, pt := range map[string]*ProcTable{"full scan": full, "index": indexed} {
		tab, err := pt.Scan()
		if err != nil {
			t.Fatal(err)
		}
		if v := tab.Naming(bobKey); v.Named != host.No {
			t.Errorf("%s: bob's workspace: %s; want no process (the one naming it is in alice's sandbox)", name, v)
		}
		if v := tab.Naming(s.ws.Key); v.Named != host.Yes {
			t.Errorf("%s: alice's workspace: %s; want her sandbox", name, v)
		}
		v, err := pt.Naming(bobKey)
		if err != nil || v.Named != host.No {
			t.Errorf("%s: Naming(bob) = %s, %v; want no process", name, v, err)
		}
		for _, p := range tab.Procs {
			if named, _ := p.NamesKey(bobKey); named {
				t.Errorf("%s: the table lists %s (%q) as naming bob's workspace", name, p.ID, p.Argv)
			}
		}
		// It is kept as a look-alike, named with where it runs.
		if len(tab.LookAlikes) != 1 || !tab.LookAlikes[0].Claims(bobKey) || tab.LookAlikes[0].PIDNS == 0 ||
			!strings.Contains(tab.LookAlikes[0].Why, "not the sandbox the node made for bob/demo") {
			t.Errorf("%s: look-alikes %+v; want the one claiming bob's workspace", name, tab.LookAlikes)
		}
		if len(v.LookAlikes) != 1 || !strings.Contains(v.String(), "only looks like a session of bob/demo") {
			t.Errorf("%s: the verdict on bob's workspace does not name the look-alike: %s", name, v)
		}
	}

	// bob's own session beside it: his sandbox is his (by its bwrap, a
	// process of the host binding his workspace), the look-alike is not.
	readyP, lines := readyPipe(t, s.bob.Dir)
	spec := s.spec(false, "serve", "HELPER_READY="+readyP)
	spec.Args = []string{"workspace", "serve", bobKey.String(), "--root", s.layout.Root(), "--launch", launchHash}
	spec.Dir, spec.Log = s.bob.Tree, s.bob.Log
	spec.Sandbox.Sandbox.ReadWrite = []string{s.bob.Dir}
	spec.Sandbox.Workspace = s.bob.Dir
	bob, err := s.l.Spawn(spec, s.x.on)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		s.l.Signal(bob, host.SIGKILL)
		s.x.wait(t, bob)
	}()
	await(t, lines, "bob's session ready")
	rec, err := s.l.SandboxOf(bob, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for name, pt := range map[string]*ProcTable{"full scan": full, "index": indexed} {
		tab, err := pt.Scan()
		if err != nil {
			t.Fatal(err)
		}
		v := tab.Naming(bobKey)
		var inner []int
		for _, p := range tab.Procs {
			if named, _ := p.NamesKey(bobKey); named && p.PIDNS == rec.PIDNamespace {
				inner = append(inner, p.ID.PID)
			}
		}
		if v.Named != host.Yes || len(v.By) != 3 || len(inner) != 2 || len(v.LookAlikes) != 1 {
			t.Errorf("%s: bob's workspace beside his session: %s; inside his sandbox %v; want bwrap, its init and his serve, and the look-alike ignored", name, v, inner)
		}
		if iv, err := pt.Naming(bobKey); err != nil || iv.Named != host.Yes || len(iv.By) != 3 {
			t.Errorf("%s: Naming(bob) = %s, %v", name, iv, err)
		}
	}
}

// The record the reaper writes: bwrap's init, its start time and the
// namespace, as the init itself shows them.
func TestSandboxOf(t *testing.T) {
	s := newSandboxSetup(t)
	readyP, lines := readyPipe(t, s.ws.Dir)
	l := newLauncher(t, s.root)
	x := newExits()
	id, err := l.Spawn(s.spec(false, "serve", "HELPER_READY="+readyP), x.on)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		l.Signal(id, host.SIGKILL)
		x.wait(t, id)
	}()
	await(t, lines, "session ready")
	rec, err := l.SandboxOf(id, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStat(rec.Init.PID)
	if err != nil || st.PPID != id.PID || st.Start != rec.Init.Start || rec.Bwrap != id {
		t.Fatalf("record %+v; the init's stat %+v %v", rec, st, err)
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", rec.Init.PID))
	if err != nil || link != fmt.Sprintf("pid:[%d]", rec.PIDNamespace) {
		t.Fatalf("the init's namespace %q %v, the record's %d", link, err, rec.PIDNamespace)
	}
	self, _ := os.Readlink("/proc/self/ns/pid")
	if self == link {
		t.Fatalf("the sandbox runs in the test's own PID namespace %s", self)
	}
	if err := WriteSandboxRecord(s.root, s.ws, rec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(s.ws.Sandbox)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := host.DecodeSandboxRecord(b); err != nil || got != rec {
		t.Fatalf("the record on disk %s: %+v %v", b, got, err)
	}
	// The record of a sandbox that runs is kept; of another bwrap, too.
	for _, b := range []protocol.ProcID{id, {PID: id.PID, Start: id.Start + 1}} {
		if err := ForgetSandbox(s.root, s.ws, b); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(s.ws.Sandbox); err != nil {
			t.Fatalf("ForgetSandbox(%s) removed the record of a sandbox that runs", b)
		}
	}
	// Not a child of the launcher, or not sandboxed: no record.
	if _, err := l.SandboxOf(protocol.ProcID{PID: os.Getpid(), Start: 1}, 0); err == nil {
		t.Error("SandboxOf accepted a process that is not the launcher's child")
	}
}
