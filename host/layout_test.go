package host

import (
	"errors"
	"testing"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

func TestLayout(t *testing.T) {
	if _, err := NewLayout("agents"); err == nil {
		t.Fatal("a relative root was accepted")
	}
	if _, err := NewLayout(""); err == nil {
		t.Fatal("an empty root was accepted")
	}
	l := mustLayout(t, "/var/lib/ocx//agents/")
	checks := map[string]string{
		l.Root():     "/var/lib/ocx/agents",
		l.NodeJSON(): "/var/lib/ocx/agents/node.json",
		l.Lock():     "/var/lib/ocx/agents/ocxd.lock",
		l.Pipe():     "/var/lib/ocx/agents/ocxd",
		l.Log():      "/var/lib/ocx/agents/ocxd.log",
		l.Handoff():  "/var/lib/ocx/agents/ocxd.handoff",
	}
	for got, want := range checks {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	pw, err := l.Password("alice")
	if err != nil || pw != "/var/lib/ocx/agents/alice/password" {
		t.Fatalf("Password = %q %v", pw, err)
	}
	if _, err := l.Password("../etc"); !errors.Is(err, strictjson.ErrInvalid) {
		t.Fatalf("Password(../etc) = %v", err)
	}
	w, err := l.Workspace(messages.WorkspaceKey{Login: "alice", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	d := "/var/lib/ocx/agents/alice/projects/demo"
	want := Workspace{Key: messages.WorkspaceKey{Login: "alice", Project: "demo"}, Dir: d, Clone: d + "/clone", Tree: d + "/tree", Binding: d + "/binding.json",
		Session: d + "/session", Wake: d + "/session/wake", Log: d + "/session/log", ListeningDir: "/var/lib/ocx/agents/alice/held/demo/listening", Held: "/var/lib/ocx/agents/alice/held/demo",
		Hears: "/var/lib/ocx/agents/alice/held/demo/hears", Checkins: "/var/lib/ocx/agents/alice/held/demo/checkins", HeldBinding: "/var/lib/ocx/agents/alice/held/demo/binding.json", Sandbox: "/var/lib/ocx/agents/alice/held/demo/sandbox", Woken: "/var/lib/ocx/agents/alice/held/demo/woken", Disk: "/var/lib/ocx/agents/alice/held/demo/disk", MCPDir: "/var/lib/ocx/agents/alice/mcp/demo", MCPLog: "/var/lib/ocx/agents/alice/mcp/demo.log"}
	if w != want {
		t.Fatalf("Workspace = %+v", w)
	}
	if s := w.MCPSocket(); s != "/var/lib/ocx/agents/alice/mcp/demo/mcp.sock" {
		t.Fatalf("MCPSocket = %q", s)
	}
	rec, err := w.Listening("branch-trunk")
	if err != nil || rec != "/var/lib/ocx/agents/alice/held/demo/listening/branch-trunk" {
		t.Fatalf("Listening = %q %v", rec, err)
	}
	if _, err := w.Listening("../../password"); !errors.Is(err, strictjson.ErrInvalid) {
		t.Fatalf("Listening(../../password) = %v", err)
	}
	if _, err := l.Workspace(messages.WorkspaceKey{Login: "alice", Project: ".."}); !errors.Is(err, strictjson.ErrInvalid) {
		t.Fatalf("Workspace(alice/..) = %v", err)
	}
}

func TestLayoutKeyOf(t *testing.T) {
	l := mustLayout(t, "/a")
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	for p, want := range map[string]bool{
		"/a/alice/projects/demo":      true,
		"/a/alice/projects/demo/":     true,
		"/a//alice/projects/./demo":   true,
		"/a/alice/projects/demo/tree": false,
		"/a/alice/projects":           false,
		"/a/alice/other/demo":         false,
		"/b/alice/projects/demo":      false,
		"alice/projects/demo":         false,
		"/a/nobody/projects/demo":     false,
	} {
		got, ok := l.KeyOf(p)
		if ok != want || (ok && got != k) {
			t.Errorf("KeyOf(%q) = %v %v, want %v", p, got, ok, want)
		}
	}
	for p, want := range map[string]string{
		"/a/alice/projects/demo":            "alice/demo",
		"/a/alice/projects/demo/tree/x/y":   "alice/demo",
		"/a/alice/projects/demo/../x":       "alice/x",
		"/a/alice/projects/demo2/tree":      "alice/demo2",
		"/a/alice/projects/demo/../../demo": "",
		"/a/alice/password":                 "",
	} {
		got, ok := l.KeyWithin(p)
		if (want == "") == ok || (ok && got.String() != want) {
			t.Errorf("KeyWithin(%q) = %v %v, want %q", p, got, ok, want)
		}
	}
	if !l.Contains("/a") || !l.Contains("/a/x") || l.Contains("/ab") || l.Contains("/") {
		t.Error("Contains is wrong")
	}
	root := mustLayout(t, "/")
	if k, ok := root.KeyOf("/alice/projects/demo"); !ok || k.Login != "alice" {
		t.Errorf("root / KeyOf = %v %v", k, ok)
	}
}

// TestReadHookMark: a read without the hook's lock may see part of one
// write; ReadHookMark takes a mark only when two reads in a row agree and
// parse, so a torn read, even one that parses ("19" while "99" becomes
// "100"), is never taken.
func TestReadHookMark(t *testing.T) {
	reads := func(seq ...string) func() ([]byte, error) {
		return func() ([]byte, error) {
			if len(seq) == 0 {
				return nil, errors.New("no more reads")
			}
			b := seq[0]
			seq = seq[1:]
			return []byte(b), nil
		}
	}
	for _, c := range []struct {
		name string
		seq  []string
		mark int64
		ok   bool
	}{
		{"steady", []string{"100\n", "100\n"}, 100, true},
		{"torn, parsing", []string{"19\n", "100\n", "100\n"}, 100, true},
		{"torn, not parsing", []string{"9\n1\n", "100\n", "100\n"}, 100, true},
		{"working", []string{"99 120\n", "99 120\n"}, 99, true},
		{"never settles", []string{"1\n", "2\n", "3\n", "4\n", "5\n", "6\n", "7\n", "8\n", "9\n", "9\n"}, 0, false},
		{"settled on no mark", []string{"x\n", "x\n"}, 0, false},
		{"unreadable", nil, 0, false},
	} {
		if v, _, ok := ReadHookMark(reads(c.seq...)); v != c.mark || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", c.name, v, ok, c.mark, c.ok)
		}
	}
}
