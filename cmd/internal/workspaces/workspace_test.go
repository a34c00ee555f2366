package workspaces_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/nodetest"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

func TestWorkspaceAddMakesItOnTheRecordAndTheHost(t *testing.T) {
	f := newFix(t)
	a := f.AddWorkspace()
	def := *a.Result
	p := f.Post(def)
	if p.Sender != f.Srv.AdminLogin || p.InReplyTo != "" {
		t.Errorf("the definition was sent by %q (in reply to %q); want the caller, as a thread's first post", p.Sender, p.InReplyTo)
	}
	note, err := messages.ReadPost([]byte(p.Text))
	if err != nil {
		t.Fatal(err)
	}
	wd, ok := note.(*messages.WorkspaceDefinition)
	if !ok || wd.Login != agent || wd.Project != "demo" || wd.Branch != "trunk" {
		t.Fatalf("the post holds %v", note)
	}
	// The default template: the workspace read-write, the release read-only
	// and first on PATH, no network (D49: the session reaches the server
	// through the node).
	ws := f.WS()
	if wd.Sandbox.Network || len(wd.Sandbox.ReadWrite) != 1 || wd.Sandbox.ReadWrite[0] != ws ||
		wd.Sandbox.Path[0] != f.Release || !contains(wd.Sandbox.ReadOnly, f.Release) || !contains(wd.Sandbox.ReadOnly, "/usr") {
		t.Errorf("sandbox: %v", wd.Sandbox)
	}

	// On the host: the clone, remembering the agent and its password; the
	// tree on trunk; binding.json; the wake pipe.
	rem, err := fossilio.Remembered(f.Ctx, filepath.Join(ws, "clone"))
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := fossilio.ReadPasswordFile(filepath.Join(f.Agents, agent, "password"))
	if rem.Login != agent || rem.URL != f.Srv.URL || (rem.Password != pw && rem.Password != fossilio.SharedSecret(f.Srv.ProjectCode, agent, pw)) {
		t.Errorf("the clone remembers %+v", rem)
	}
	if !nodetest.Exists(filepath.Join(ws, "tree", ".fslckout")) {
		t.Errorf("no check-out in the tree")
	}
	data, err := os.ReadFile(filepath.Join(ws, "binding.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := messages.DecodeBinding(data)
	if err != nil {
		t.Fatal(err)
	}
	want := messages.Binding{Login: agent, Project: "demo", ProjectCode: f.Srv.ProjectCode, Remote: f.Srv.URL, Branch: "trunk", Home: def, Workspace: def}
	if *b != want {
		t.Errorf("binding.json: %+v, want %+v", *b, want)
	}
	// The node keeps its own copy, out of the agent's reach (D44).
	if held, err := os.ReadFile(filepath.Join(f.Agents, agent, "held", "demo", "binding.json")); err != nil || string(held) != string(data) {
		t.Errorf("the held binding: %q, %v; want the workspace's %q", held, err, data)
	}
	st, err := os.Lstat(filepath.Join(ws, "session", "wake"))
	if err != nil || st.Mode()&os.ModeNamedPipe == 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("the wake pipe: %v %v", st, err)
	}
	if !nodetest.Exists(filepath.Join(f.Agents, agent, "held", "demo", "listening")) {
		t.Errorf("no listening directory")
	}
	// The clone was made over the network as the agent: the server
	// recorded no receipt for it, and the clone is not the node's file.
	if same, _ := sameFile(filepath.Join(ws, "clone"), f.Srv.Repo); same {
		t.Errorf("the clone is the node's file")
	}

	// A second add is refused: it exists, on the record and on the host.
	before := f.Posts()
	f.Refused(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk"}), "workspace agent-1/demo exists", def)
	if f.Posts() != before {
		t.Errorf("a refused add posted")
	}

	// Gone from the host (say, a host reinstalled): add again makes it from
	// the definition on the record, posting nothing.
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	a = f.OK(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk"}))
	if *a.Result != def || f.Posts() != before || !nodetest.Exists(filepath.Join(ws, "binding.json")) {
		t.Errorf("re-adding: result %s, posts %d -> %d", *a.Result, before, f.Posts())
	}
}

func TestWorkspaceAddRefusals(t *testing.T) {
	f := newFix(t)
	f.OK(f.N.LoginAdd(f.Ctx, agent, false))
	sandbox := func(s string) []byte { return []byte(s) }
	good := `{"network": true, "read_only": ["/usr"], "read_write": ["` + f.WS() + `"], "homes": [], "path": ["/usr/bin"]}`
	before := f.Posts()
	for _, tc := range []struct {
		name string
		n    *node.Node
		in   workspaces.WorkspaceAddInput
		want []string
	}{
		{"bad login", f.N, workspaces.WorkspaceAddInput{Login: "../x", Project: "demo", Branch: "trunk"}, []string{`login: "../x" is not a login`}},
		{"not an agent", f.N, workspaces.WorkspaceAddInput{Login: "stranger", Project: "demo", Branch: "trunk"}, []string{"not an agent login of this node"}},
		{"unknown project", f.N, workspaces.WorkspaceAddInput{Login: agent, Project: "other", Branch: "trunk"}, []string{`project "other" is not a repository of this node`}},
		{"no branch", f.N, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: ""}, []string{"branch"}},
		{"branch without check-ins", f.N, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "nowhere"}, []string{`"nowhere" has no check-in`}},
		{"unknown sandbox key", f.N, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk",
			SandboxJSON: sandbox(`{"network": true, "read_only": [], "read_write": [], "homes": [], "path": [], "memory": "4G"}`)},
			[]string{"sandbox.memory", "an unknown key there may be a limit"}},
		{"sandbox not JSON", f.N, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk", SandboxJSON: sandbox(`{"network": tru`)}, []string{"sandbox: the file is not JSON"}},
		{"sandbox list left out", f.N, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk", SandboxJSON: sandbox(`{"network": true, "read_only": [], "read_write": [], "homes": []}`)}, []string{"sandbox.path"}},
		{"sandbox reaches the node's files", f.N, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk",
			SandboxJSON: sandbox(`{"network": true, "read_only": ["` + f.Agents + `"], "read_write": [], "homes": [], "path": []}`)}, []string{f.Agents}},
		{"sandbox reaches the repository", f.N, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk",
			SandboxJSON: sandbox(`{"network": true, "read_only": ["` + filepath.Dir(f.Srv.Repo) + `"], "read_write": [], "homes": [], "path": []}`)}, []string{filepath.Dir(f.Srv.Repo)}},
		{"no caller", f.Open("", ""), workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk", SandboxJSON: sandbox(good)}, []string{"no --user given"}},
		{"caller without admin", f.Open(person, personPW), workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk", SandboxJSON: sandbox(good)}, []string{`"alice" has capabilities`, "without admin (a) or setup (s)"}},
		{"record not a post", f.N, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk", Record: trunkCheckin(f)}, []string{"a workspace's record is a forum thread"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.T = t
			f.Refused(workspaces.Of(tc.n).WorkspaceAdd(f.Ctx, tc.in), tc.want...)
			if nodetest.Exists(f.WS()) {
				t.Errorf("a refused add left %s", f.WS())
			}
		})
	}
	f.T = t
	if f.Posts() != before {
		t.Errorf("refused adds posted %d notes", f.Posts()-before)
	}
	// A dry run with a good sandbox says what it would post, and posts
	// nothing.
	a := f.OK(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk", SandboxJSON: sandbox(good), DryRun: true}))
	if log := strings.Join(a.Log, "\n"); !strings.Contains(log, `would post as "admin"`) || !strings.Contains(log, `"ocx": "workspace"`) {
		t.Errorf("dry run log: %s", log)
	}
	if f.Posts() != before || nodetest.Exists(f.WS()) {
		t.Errorf("a dry run wrote")
	}
}

func TestWorkspaceAddLeavesTheHostCleanWhenTheCloneFails(t *testing.T) {
	f := newFix(t)
	f.OK(f.N.LoginAdd(f.Ctx, agent, false))
	// The repository holds another password than the agent's file: the
	// definition is posted (by the admin) but the clone as the agent is
	// refused by the server.
	admin := &fossilio.Admin{Repository: f.Srv.Repo, Fossil: &fossilio.Fossil{Home: t.TempDir()}}
	if err := admin.SetPassword(f.Ctx, agent, "not-the-kept-one"); err != nil {
		t.Fatal(err)
	}
	a := workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk"})
	f.Refused(a, "the host is left clean and the definition stays on the record at "+*a.Result)
	if nodetest.Exists(f.WS()) {
		t.Errorf("the failed add left %s", f.WS())
	}
	// Once the password is right, adding again reuses the definition.
	before := f.Posts()
	f.OK(f.N.LoginAdd(f.Ctx, agent, false))
	b := f.OK(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk"}))
	if *b.Result != *a.Result || f.Posts() != before {
		t.Errorf("the second add posted again: %s vs %s", *b.Result, *a.Result)
	}
}

func TestWorkspaceInAGivenThread(t *testing.T) {
	f := newFix(t)
	f.OK(f.N.LoginAdd(f.Ctx, agent, false))
	th := f.OK(f.N.Thread(f.Ctx, node.PostInput{Title: "Port to arm64", Text: "Let us port it."}))
	root := *th.Result
	a := f.OK(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk", Record: root[:12]}))
	p := f.Post(*a.Result)
	if p.Root != root || p.InReplyTo != root {
		t.Errorf("the definition is in thread %s replying to %s, want %s", p.Root, p.InReplyTo, root)
	}
	data, _ := os.ReadFile(filepath.Join(f.WS(), "binding.json"))
	b, err := messages.DecodeBinding(data)
	if err != nil {
		t.Fatal(err)
	}
	if b.Home != root || b.Workspace != *a.Result {
		t.Errorf("binding: home %s workspace %s", b.Home, b.Workspace)
	}
}

func TestWorkspaceTerminateAndGC(t *testing.T) {
	f := newFix(t)
	def := *f.AddWorkspace().Result
	f.Refused(workspaces.Of(f.Open(person, personPW)).WorkspaceTerminate(f.Ctx, agent+"/demo", "", false), "without admin")
	f.Refused(workspaces.Of(f.N).WorkspaceTerminate(f.Ctx, "../x/demo", "", false), "workspace")
	f.Refused(workspaces.Of(f.N).WorkspaceTerminate(f.Ctx, "agent-2/demo", "", false), "does not exist")
	a := f.OK(workspaces.Of(f.N).WorkspaceTerminate(f.Ctx, agent+"/demo", "done with it", false))
	p := f.Post(*a.Result)
	note, err := messages.ReadPost([]byte(p.Text))
	if err != nil {
		t.Fatal(err)
	}
	if tn, ok := note.(*messages.TerminatedNote); !ok || tn.Reason != "done with it" || p.Root != def || p.Sender != f.Srv.AdminLogin {
		t.Errorf("terminated note: %v in %s by %s", note, p.Root, p.Sender)
	}
	if nodetest.Exists(f.WS()) {
		t.Errorf("terminate left %s", f.WS())
	}
	f.Refused(workspaces.Of(f.N).WorkspaceTerminate(f.Ctx, agent+"/demo", "", false), "already terminated")

	// gc: a workspace whose record ended it (terminated while its directory
	// came back, as after a restore) is collected; a live one is not.
	f.OK(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: agent, Project: "demo", Branch: "trunk"}))
	live := f.WS()
	f.OK(f.N.LoginAdd(f.Ctx, "agent-2", false))
	f.OK(workspaces.Of(f.N).WorkspaceAdd(f.Ctx, workspaces.WorkspaceAddInput{Login: "agent-2", Project: "demo", Branch: "trunk"}))
	other := filepath.Join(f.Agents, "agent-2", "projects", "demo")
	keep := filepath.Join(t.TempDir(), "kept")
	if err := os.Rename(other, keep); err != nil {
		t.Fatal(err)
	}
	f.OK(workspaces.Of(f.N).WorkspaceTerminate(f.Ctx, "agent-2/demo", "", false))
	if err := os.Rename(keep, other); err != nil {
		t.Fatal(err)
	}
	dry := f.OK(workspaces.Of(f.N).WorkspaceGC(f.Ctx, true))
	if log := strings.Join(dry.Log, "\n"); !strings.Contains(log, "would remove "+other) || strings.Contains(log, live) {
		t.Errorf("gc dry run: %s", log)
	}
	if !nodetest.Exists(other) {
		t.Fatalf("a gc dry run removed %s", other)
	}
	f.OK(workspaces.Of(f.N).WorkspaceGC(f.Ctx, false))
	if nodetest.Exists(other) || !nodetest.Exists(live) {
		t.Errorf("gc: %s exists %v, %s exists %v", other, nodetest.Exists(other), live, nodetest.Exists(live))
	}
}

func trunkCheckin(f *fix) string {
	for _, i := range f.Artifacts() {
		if i.Kind == fossilio.KindCheckin {
			return i.Hash
		}
	}
	f.T.Fatal("no check-in")
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
