package unixhost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// TestSpawnedRecords (D76): a spawned record is kept in the workspace's
// held directory, read back, and forgotten; a workspace with none reads
// none; a file that is not the record its name says (another launch's, a
// link, garbage) is passed over with why, and the good ones still read.
func TestSpawnedRecords(t *testing.T) {
	dir := t.TempDir()
	layout, err := host.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	key := messages.WorkspaceKey{Login: "ana", Project: "demo"}
	ws, err := layout.Workspace(key)
	if err != nil {
		t.Fatal(err)
	}
	if got, bad, err := ReadSpawned(root, ws); err != nil || len(got) != 0 || len(bad) != 0 {
		t.Fatalf("a workspace with no held directory: %v %v %v", got, bad, err)
	}
	a := protocol.Spawned{Workspace: key, Launch: strings.Repeat("a", 40), Proc: protocol.ProcID{PID: 10, Start: 100}}
	b := protocol.Spawned{Workspace: key, Launch: strings.Repeat("b", 64), Proc: protocol.ProcID{PID: 11, Start: 110}}
	for _, s := range []protocol.Spawned{b, a} {
		if err := WriteSpawned(root, ws, s); err != nil {
			t.Fatal(err)
		}
	}
	other, _ := layout.Workspace(messages.WorkspaceKey{Login: "bob", Project: "demo"})
	if err := WriteSpawned(root, other, a); err == nil {
		t.Errorf("a record of ana/demo kept in bob/demo's")
	}
	if st, err := os.Stat(ws.SpawnedDir()); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the spawned directory: %v %v", st, err)
	}
	got, bad, err := ReadSpawned(root, ws)
	if err != nil || len(bad) != 0 || len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("read: %+v %v %v", got, bad, err)
	}

	// Planted or broken: another launch's content, a link, garbage, a
	// name that is no hash.
	c := strings.Repeat("c", 40)
	ab, _ := a.Encode()
	for name, write := range map[string]func(p string) error{
		c:                       func(p string) error { return os.WriteFile(p, ab, 0o600) },
		strings.Repeat("d", 40): func(p string) error { return os.Symlink(filepath.Join(ws.SpawnedDir(), a.Launch), p) },
		strings.Repeat("e", 40): func(p string) error { return os.WriteFile(p, []byte("{"), 0o600) },
		"notes.txt":             func(p string) error { return os.WriteFile(p, []byte("x"), 0o600) },
	} {
		if err := write(filepath.Join(ws.SpawnedDir(), name)); err != nil {
			t.Fatal(err)
		}
	}
	got, bad, err = ReadSpawned(root, ws)
	if err != nil || len(got) != 2 || len(bad) != 4 {
		t.Fatalf("with four bad files: %+v %v %v", got, bad, err)
	}
	if !strings.Contains(bad[0].Error(), "names launch "+a.Launch) {
		t.Errorf("another launch's record: %v", bad[0])
	}

	if err := ForgetSpawned(root, ws, a.Launch); err != nil {
		t.Fatal(err)
	}
	if err := ForgetSpawned(root, ws, a.Launch); err != nil {
		t.Errorf("forgetting it twice: %v", err)
	}
	if err := ForgetSpawned(root, ws, "../../password"); err == nil {
		t.Errorf("forgetting a name that is no launch")
	}
	if got, _, _ := ReadSpawned(root, ws); len(got) != 1 || got[0] != b {
		t.Errorf("after forgetting %s: %+v", a.Launch, got)
	}
}
