package runs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The run user of the fixtures: a Fossil user with an agent's capabilities,
// no admin or setup.
const (
	runUser   = "claude-1"
	otherUser = "runner-2" // on the server with a password a node's file holds
	otherPW   = "file-pw-0123456789"
	nodeUser  = "lab-1"
	// A run's hash, in full; Prepare takes it as it is.
	runHash = "8f2c5a0e4b1d7c9a3e6f8b2d4a1c7e9f0b3d5a7c9e1f3b5d7a9c1e3f5b7d9a1c"
)

// fixture is a real fossil server with a check-in on trunk beyond the first,
// a run root and a release directory outside /tmp (which a sandbox's own tmp
// hides), and a Preparer for the server's node.
type fixture struct {
	srv     *harness.Server
	base    string // holds root and release; removed at the end
	root    string
	release string
	trunk   string // trunk's check-in, in full
	p       *Layers
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := harness.StartServer(t, harness.Options{Users: []harness.User{
		{Login: runUser, Password: "first-pw-0123456789", Caps: fossilio.AgentCaps},
		{Login: otherUser, Password: otherPW, Caps: fossilio.AgentCaps},
	}})
	f := &fixture{srv: srv}
	f.trunk = commitFile(t, srv, "README.txt", "hello from trunk\n")
	base, err := os.MkdirTemp("/var/tmp", "ocx-runprep-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	f.base = base
	f.root = filepath.Join(base, "runs")
	f.release = filepath.Join(base, "release")
	for _, d := range []string{f.root, f.release} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.p = &Layers{
		Values:     NodeValues{Root: f.root, Project: "demo", Node: nodeUser, Server: srv.URL, Release: f.release},
		Repository: srv.Repo,
		Files:      nodeFiles(srv.Repo, base),
	}
	return f
}

// commitFile commits a file on trunk in the server's repository and returns
// the check-in's full hash.
func commitFile(t *testing.T, srv *harness.Server, name, text string) string {
	t.Helper()
	dir := t.TempDir()
	fossil := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(harness.FossilPath, args...)
		cmd.Dir = dir
		cmd.Env = harness.FossilEnv(srv.Home, srv.AdminLogin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("fossil %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	fossil("open", srv.Repo, "trunk", "--nosync")
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	fossil("add", name)
	fossil("commit", "-m", "add "+name, "--no-warnings")
	fossil("close")
	return fullHash(t, srv, "trunk")
}

// fullHash is what the server's repository resolves name to, in full, as
// fossil whatis says: the answer the checkout step is checked against.
func fullHash(t *testing.T, srv *harness.Server, name string) string {
	t.Helper()
	out, err := srv.Fossil("whatis", name, "-R", srv.Repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "artifact:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("fossil whatis %s: no artifact line:\n%s", name, out)
	return ""
}

// nodeFiles are the node's own files of a fixture: its repository, and a
// state directory and file of passwords in base's node directory.
func nodeFiles(repo, base string) host.NodeFiles {
	return host.NodeFiles{Repositories: []string{repo}, State: filepath.Join(base, "node", "runs"),
		Passwords: filepath.Join(base, "node", PasswordsFileName)}
}

// seedPattern is section 5's pattern, the steps most runs take.
const seedPattern = `[
    {"step": "directory", "at": "$$root$$/$$user$$/projects/$$project$$/$$run$$"},
    {"step": "password"},
    {"step": "clone", "into": "$$workspace$$/clone"},
    {"step": "checkout", "of": "trunk", "into": "$$workspace$$/tree"}]`

// readRun reads a run message's JSON as the node reads a post's block.
func readRun(t *testing.T, j string) *runmsg.Run {
	t.Helper()
	m, err := runmsg.ReadMessage([]byte("```json\n" + j + "\n```\n"))
	if err != nil {
		t.Fatalf("read run: %v\n%s", err, j)
	}
	r, ok := m.(*runmsg.Run)
	if !ok {
		t.Fatalf("read run: a %T", m)
	}
	return r
}

// echoRun is an unconfined run of user with the given workspace steps.
func echoRun(t *testing.T, user, workspace string) *runmsg.Run {
	t.Helper()
	ws := ""
	if workspace != "" {
		ws = `"workspace": ` + workspace + `,`
	}
	return readRun(t, `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "Say hello.", `+ws+`
  "process": {"user": "`+user+`", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"}}}`)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// mustRefuse asserts err is a *prepareError of row, whose note holds every
// one of parts.
func mustRefuse(t *testing.T, err error, row runmsg.RefusalRow, step int, parts ...string) *prepareError {
	t.Helper()
	pe, ok := err.(*prepareError)
	if !ok {
		t.Fatalf("want a refusal of row %d, got %T %v", row, err, err)
	}
	if pe.Row != row || pe.Step != step {
		t.Fatalf("want row %d step %d, got row %d step %d: %s", row, step, pe.Row, pe.Step, pe.Note)
	}
	for _, p := range parts {
		if !strings.Contains(pe.Note, p) {
			t.Errorf("the note %q does not say %q", pe.Note, p)
		}
	}
	if r := pe.Refusal(); r.Row != row || r.Note != pe.Note {
		t.Errorf("Refusal() = %v", r)
	}
	t.Logf("row %d: %s", pe.Row, pe.Note)
	return pe
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
