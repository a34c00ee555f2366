package runner_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host/runner"
)

func TestStoreContinues(t *testing.T) {
	dir := t.TempDir()
	s, err := runner.OpenStore(dir, "native")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Load(rec)
	if err != nil || c != nil {
		t.Fatalf("a first turn: %v, %v", c, err)
	}
	if err := s.Save(rec, &runner.Conversation{Turns: 1, State: json.RawMessage(`{"m":[1]}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(rec, &runner.Conversation{Turns: 2, State: json.RawMessage(`{"m":[1,2]}`)}); err != nil {
		t.Fatal(err)
	}
	c, err = s.Load(rec)
	if err != nil || c.Turns != 2 || string(c.State) != `{"m":[1,2]}` {
		t.Fatalf("got %+v, %v", c, err)
	}
	p, _ := s.Path(rec)
	if want := filepath.Join(dir, "conversations", "native", rec+".json"); p != want {
		t.Fatalf("path %s, want %s", p, want)
	}
	// Another runner's store is its own.
	o, err := runner.OpenStore(dir, "claude")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if c, err := o.Load(rec); c != nil || err != nil {
		t.Fatalf("claude sees %v, %v", c, err)
	}
	names, _ := os.ReadDir(filepath.Dir(p))
	if len(names) != 1 {
		t.Fatalf("left %v (a temporary file?)", names)
	}
}

func TestStoreCorruptIsAnError(t *testing.T) {
	dir := t.TempDir()
	s, err := runner.OpenStore(dir, "native")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, _ := s.Path(rec)
	os.MkdirAll(filepath.Dir(p), 0o700)
	for _, c := range []struct{ content, want string }{
		{`{"ocx":"conversation","runner":"native","session":"` + rec + `","turns":1,"state":{}`, "corrupt"},
		{`{"ocx":"conversation","runner":"codex","session":"` + rec + `","turns":1,"state":{}}`, `runner "codex"'s`},
		{`{"ocx":"conversation","runner":"native","session":"` + rec + `","turns":1,"state":{},"x":1}`, `unknown field "x"`},
		{`{"ocx":"conversation","runner":"native","session":"` + rec + `","turns":0,"state":{}}`, `0 turns`},
	} {
		os.WriteFile(p, []byte(c.content), 0o600)
		_, err := s.Load(rec)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: got %v, want %q and the path", c.content, err, c.want)
		}
	}
	// A link in the conversation's place is not followed.
	os.Remove(p)
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, []byte(`{}`), 0o600)
	os.Symlink(target, p)
	if _, err := s.Load(rec); err == nil {
		t.Error("a link was followed")
	}
	if _, err := s.Path("../x"); err == nil {
		t.Error("a session name with a slash")
	}
	if _, err := runner.OpenStore(dir, "a/b"); err == nil {
		t.Error("a runner name with a slash")
	}
}
