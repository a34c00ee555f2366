package workspaces_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/nodetest"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/messages"
)

func TestListenersOnAThreadATicketAndABranch(t *testing.T) {
	f := newFix(t)
	def := *f.AddWorkspace().Result
	th := *f.OK(f.Open(person, personPW).Thread(f.Ctx, node.PostInput{Title: "A question", Text: "Does it work?"})).Result
	reply := *f.OK(f.Open(person, personPW).Post(f.Ctx, node.PostInput{To: th, Text: "More details."})).Result
	ticket := *f.OK(f.Open(person, personPW).Ticket(f.Ctx, node.PostInput{Title: "It crashes", Text: "On start."})).Result
	key := agent + "/demo"

	// A thread is named by any of its posts; the listener names its root.
	a := f.OK(workspaces.Of(f.N).ListenerAdd(f.Ctx, workspaces.ListenerInput{Workspace: key, Kind: "thread", Names: reply[:12]}))
	p := f.Post(*a.Result)
	if p.Sender != agent || p.Root != th {
		t.Errorf("the listen note was sent by %q in thread %s; want the agent, in %s", p.Sender, p.Root, th)
	}
	// The file says the listen note's receipt: the hook wakes the session
	// only for what the node received after it.
	if got := readListening(t, f, th); got != fmt.Sprintf("thread %d\n", p.Rcvid) || p.Rcvid == 0 {
		t.Errorf("listening/%s holds %q; the listen note's receipt is %d", th, got, p.Rcvid)
	}
	// A ticket, by a prefix of its id: the note is a change of the ticket.
	a = f.OK(workspaces.Of(f.N).ListenerAdd(f.Ctx, workspaces.ListenerInput{Workspace: key, Kind: "ticket", Names: ticket[:12]}))
	c, err := f.Repo().TicketChange(f.Ctx, *a.Result)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sender != agent || c.Ticket != ticket || !strings.Contains(c.Comment, `"ocx": "listen"`) {
		t.Errorf("ticket listen note: sender %q ticket %s comment %q", c.Sender, c.Ticket, c.Comment)
	}
	if got := readListening(t, f, ticket); got != fmt.Sprintf("ticket %d\n", c.Rcvid) {
		t.Errorf("listening/%s holds %q; the listen note's receipt is %d", ticket, got, c.Rcvid)
	}
	// A branch: the note goes on the session's own record, by default the
	// workspace's.
	a = f.OK(workspaces.Of(f.N).ListenerAdd(f.Ctx, workspaces.ListenerInput{Workspace: key, Kind: "branch", Names: "release/2.0"}))
	bp := f.Post(*a.Result)
	if bp.Root != def {
		t.Errorf("the branch listen note is in %s, want the workspace's record %s", bp.Root, def)
	}
	if got := readListening(t, f, "branch-release%2F2.0"); got != fmt.Sprintf("branch %d\n", bp.Rcvid) {
		t.Errorf("listening/branch-release%%2F2.0 holds %q", got)
	}

	st, err := f.N.Status(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Listeners) != 3 {
		t.Errorf("status listeners: %v", st.Listeners)
	}

	// Removing the thread's listener: the unlisten note, the file gone, and
	// the status no longer lists it.
	a = f.OK(workspaces.Of(f.N).ListenerRemove(f.Ctx, workspaces.ListenerInput{Workspace: key, Kind: "thread", Names: th}))
	if note, _ := messages.ReadPost([]byte(f.Post(*a.Result).Text)); note == nil || note.NoteKind() != messages.KindUnlisten {
		t.Errorf("remove wrote %v", note)
	}
	if nodetest.Exists(filepath.Join(f.ListeningDir(), th)) {
		t.Errorf("the thread's listening file is still there")
	}
	st, err = f.N.Status(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range st.Listeners {
		if l.Kind == messages.ListenThread {
			t.Errorf("the status still lists %v", l)
		}
	}
	// A listen note sent by someone else than the agent does not count.
	forged := &messages.ListenNote{Listener: messages.Listener{Login: agent, Project: "demo", Kind: messages.ListenThread, Names: th}}
	block, _ := forged.Encode()
	c2 := &fossilio.Client{URL: f.Srv.URL, Login: person, Password: personPW, ProjectCode: f.Srv.ProjectCode}
	if _, err := c2.Reply(f.Ctx, th, th, string(block)); err != nil {
		t.Fatal(err)
	}
	st, _ = f.N.Status(f.Ctx)
	for _, l := range st.Listeners {
		if l.Kind == messages.ListenThread {
			t.Errorf("a listen note by %s counts: %v", person, l)
		}
	}
}

func TestListenerRefusals(t *testing.T) {
	f := newFix(t)
	f.AddWorkspace()
	before := f.Posts()
	key := agent + "/demo"
	for _, tc := range []struct {
		in   workspaces.ListenerInput
		want string
	}{
		{workspaces.ListenerInput{Workspace: "../x/demo", Kind: "thread", Names: "x"}, "workspace"},
		{workspaces.ListenerInput{Workspace: "agent-9/demo", Kind: "thread", Names: "x"}, "does not exist on the host"},
		{workspaces.ListenerInput{Workspace: key, Kind: "wiki", Names: "Home"}, `"wiki" is not a kind of listener`},
		{workspaces.ListenerInput{Workspace: key, Kind: "thread", Names: ""}, "names"},
		{workspaces.ListenerInput{Workspace: key, Kind: "thread", Names: "0123456789abcdef"}, "names"},
		{workspaces.ListenerInput{Workspace: key, Kind: "thread", Names: trunkCheckin(f)}, "not a forum post"},
		{workspaces.ListenerInput{Workspace: key, Kind: "ticket", Names: "0123456789abcdef"}, "not a ticket of demo"},
		{workspaces.ListenerInput{Workspace: key, Kind: "branch", Names: "bad\nname"}, "names: holds the control character"},
	} {
		f.Refused(workspaces.Of(f.N).ListenerAdd(f.Ctx, tc.in), tc.want)
	}
	if f.Posts() != before {
		t.Errorf("refused listeners posted")
	}
	entries, _ := os.ReadDir(f.ListeningDir())
	if len(entries) != 0 {
		t.Errorf("refused listeners wrote the index: %v", entries)
	}
}

func TestStatusIsValidAndDerived(t *testing.T) {
	f := newFix(t)
	def := *f.AddWorkspace().Result
	f.OK(f.N.HookInstall(f.Ctx, false))
	st, err := f.N.Status(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, err := st.Encode()
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.Validate("state.schema.json", data); err != nil {
		t.Fatalf("the status is not valid: %v\n%s", err, data)
	}
	if len(st.Hooks) != 1 || !st.Hooks[0].Installed || st.Hooks[0].Repository != f.Srv.Repo {
		t.Errorf("hooks: %v", st.Hooks)
	}
	if len(st.Logins) != 1 || st.Logins[0].Login != agent || len(st.Logins[0].Accounts) != 1 || st.Logins[0].Accounts[0].Capabilities != fossilio.AgentCaps {
		t.Errorf("logins (the node user is not an agent login): %v", st.Logins)
	}
	if len(st.Workspaces) != 1 || st.Workspaces[0].Record != def || st.Workspaces[0].State != messages.WorkspaceIdle {
		t.Errorf("workspaces: %v", st.Workspaces)
	}
	if len(st.Sessions) != 0 {
		t.Errorf("sessions: %v", st.Sessions)
	}
	if st.Daemon == nil || st.Daemon.Running || st.Daemon.Reexec != nil {
		t.Errorf("the daemon, none running and never re-exec'd: %+v", st.Daemon)
	}
	// Not on the host: missing. Terminated: terminated.
	if err := os.RemoveAll(f.WS()); err != nil {
		t.Fatal(err)
	}
	st, _ = f.N.Status(f.Ctx)
	if st.Workspaces[0].State != messages.WorkspaceMissing {
		t.Errorf("a workspace not on the host is %s", st.Workspaces[0].State)
	}
	f.OK(workspaces.Of(f.N).WorkspaceTerminate(f.Ctx, agent+"/demo", "", false))
	st, _ = f.N.Status(f.Ctx)
	if st.Workspaces[0].State != messages.WorkspaceTerminated {
		t.Errorf("a terminated workspace is %s", st.Workspaces[0].State)
	}
	// A definition sent by a user without admin or setup does not count.
	forged := &messages.WorkspaceDefinition{Login: "agent-x", Project: "demo", Branch: "trunk", Sandbox: f.N.DefaultSandbox("/tmp/x")}
	block, _ := forged.Encode()
	c := &fossilio.Client{URL: f.Srv.URL, Login: person, Password: personPW, ProjectCode: f.Srv.ProjectCode}
	if _, err := c.NewThread(f.Ctx, "forged", string(block)); err != nil {
		t.Fatal(err)
	}
	st, _ = f.N.Status(f.Ctx)
	if len(st.Workspaces) != 1 {
		t.Errorf("a definition by %s counts: %v", person, st.Workspaces)
	}
}

func TestHookInstallStatusRemove(t *testing.T) {
	f := newFix(t)
	hooks, a := f.N.HookStatus(f.Ctx)
	f.OK(a)
	if len(hooks) != 1 || hooks[0].Installed {
		t.Fatalf("before install: %v", hooks)
	}
	f.OK(f.N.HookInstall(f.Ctx, true))
	if hooks, _ := f.N.HookStatus(f.Ctx); hooks[0].Installed {
		t.Fatalf("a dry run installed the hook")
	}
	f.OK(f.N.HookInstall(f.Ctx, false))
	st, err := (&fossilio.Admin{Repository: f.Srv.Repo}).Hook(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "'" + filepath.Join(f.Release, "ocx") + "' hook --agents '" + f.Agents + "' --repo %R"
	if !st.Installed || st.Command != want {
		t.Errorf("installed %v with %q, want %q", st.Installed, st.Command, want)
	}
	mark, err := os.ReadFile(filepath.Join(f.Agents, "hook.mark.demo"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(mark)) != strconv.FormatInt(st.LastRcvid, 10) {
		t.Errorf("the hook's mark %q is not the newest receipt %d", mark, st.LastRcvid)
	}
	// The status shows the mark against the newest receipt, and Fossil's
	// embargo while one holds.
	hooks, _ = f.N.HookStatus(f.Ctx)
	if h := hooks[0]; h.Mark == nil || int64(*h.Mark) != st.LastRcvid || int64(h.Newest) != st.Newest || h.HeldUntil != nil {
		t.Errorf("status after install: %+v; want mark = newest = %d, nothing held", h, st.LastRcvid)
	}
	if _, err := f.Srv.Fossil("sql", "-R", f.Srv.Repo, "REPLACE INTO config(name, value, mtime) VALUES('hook-embargo', now()+3600, now())"); err != nil {
		t.Fatal(err)
	}
	hooks, a = f.N.HookStatus(f.Ctx)
	if h := hooks[0]; h.HeldUntil == nil || time.Until(*h.HeldUntil) < 59*time.Minute || time.Until(*h.HeldUntil) > time.Hour {
		t.Errorf("status during an embargo of an hour: %+v", h)
	}
	if !strings.Contains(strings.Join(a.Log, "\n"), "Fossil holds its hooks back until") {
		t.Errorf("the status does not say Fossil holds the hooks back: %q", a.Log)
	}
	if _, err := f.Srv.Fossil("sql", "-R", f.Srv.Repo, "DELETE FROM config WHERE name='hook-embargo'"); err != nil {
		t.Fatal(err)
	}
	f.OK(f.N.HookInstall(f.Ctx, false)) // again: replaces it
	f.OK(f.N.HookRemove(f.Ctx, false))
	if hooks, _ := f.N.HookStatus(f.Ctx); hooks[0].Installed {
		t.Errorf("still installed after remove")
	}
	if nodetest.Exists(filepath.Join(f.Agents, "hook.mark.demo")) {
		t.Errorf("remove left the mark")
	}
}

func TestSessionRefusalsBeforeAnyWrite(t *testing.T) {
	f := newFix(t)
	f.AddWorkspace()
	before := f.Posts()
	key := agent + "/demo"
	mech := func(in workspaces.SessionStartInput) workspaces.SessionStartInput {
		if in.Kind == "" {
			in.Kind = "mechanical"
		}
		if in.Lifetime == "" {
			in.Lifetime = "stays"
		}
		if in.Command == nil && in.Kind == "mechanical" {
			in.Command = []string{"cat"}
		}
		return in
	}
	for _, tc := range []struct {
		n    *node.Node
		in   workspaces.SessionStartInput
		want string
	}{
		{f.N, mech(workspaces.SessionStartInput{Workspace: "../x/demo"}), "workspace"},
		{f.N, mech(workspaces.SessionStartInput{Workspace: "agent-9/demo"}), "does not exist on the host"},
		{f.N, mech(workspaces.SessionStartInput{Workspace: key, Kind: "robot"}), "kind"},
		{f.N, mech(workspaces.SessionStartInput{Workspace: key, Lifetime: "forever"}), "lifetime"},
		{f.N, workspaces.SessionStartInput{Workspace: key, Kind: "llm", Lifetime: "stays", Runner: "gpt", Model: "m"}, "runner"},
		// E9: a runner the protocol knows but the release does not hold.
		{f.N, workspaces.SessionStartInput{Workspace: key, Kind: "llm", Lifetime: "stays", Runner: "codex", Model: "m"}, `runner: "codex" is not offered by this node`},
		{f.N, mech(workspaces.SessionStartInput{Workspace: key, Release: "previous"}), "no release root"},
		{f.N, mech(workspaces.SessionStartInput{Workspace: key, Record: "0123456789abcdef"}), "names no forum post and no ticket"},
		{f.Open(person, personPW), mech(workspaces.SessionStartInput{Workspace: key}), "without admin"},
	} {
		f.Refused(workspaces.Of(tc.n).SessionStart(f.Ctx, tc.in), tc.want)
	}
	f.Refused(workspaces.Of(f.N).SessionStop(f.Ctx, key, false), "no session runs in workspace agent-1/demo: no process names it")
	f.Refused(workspaces.Of(f.N).SessionStop(f.Ctx, "agent-9/demo", false), "no session runs")
	f.Refused(workspaces.Of(f.N).SessionStop(f.Ctx, "agent-1/other", false), "not a repository of this node")
	a := f.OK(workspaces.Of(f.N).SessionStart(f.Ctx, mech(workspaces.SessionStartInput{Workspace: key, DryRun: true})))
	if log := strings.Join(a.Log, "\n"); !strings.Contains(log, `"ocx": "session"`) || !strings.Contains(log, "would post the launch note") {
		t.Errorf("dry run: %s", log)
	}
	// A dry run of a start that would make its workspace (D57) says so and
	// makes nothing.
	f.OK(f.N.LoginAdd(f.Ctx, "agent-8", false))
	d := f.OK(workspaces.Of(f.N).SessionStart(f.Ctx, mech(workspaces.SessionStartInput{Workspace: "agent-8/demo", DryRun: true})))
	if log := strings.Join(d.Log, "\n"); !strings.Contains(log, "would make workspace agent-8/demo first") || !strings.Contains(log, "workspace add: ") {
		t.Errorf("dry run of a start without a workspace: %s", log)
	}
	if _, err := os.Stat(filepath.Join(f.Agents, "agent-8", "projects")); err == nil {
		t.Errorf("a dry run made the workspace")
	}
	if f.Posts() != before {
		t.Errorf("refused starts posted")
	}
	if entries, _ := os.ReadDir(f.ListeningDir()); len(entries) != 0 {
		t.Errorf("refused starts wrote the index")
	}
	if pid, _ := daemonclient.PID(f.N.Layout); pid != 0 {
		t.Errorf("a refused start left a daemon running (pid %d)", pid)
	}
}

func readListening(t *testing.T, f *fix, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.ListeningDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSessionStartWritesWhomItHears (issue 10, item 9): the session
// definition `session start` posts names whom the session hears, written
// out: by default every user holding admin or setup now (here the
// repository's admin, not alice); as given otherwise, [] for nobody; a
// hears list that names a user twice is refused before anything is written.
func TestSessionStartWritesWhomItHears(t *testing.T) {
	f := newFix(t)
	f.AddWorkspace()
	key := agent + "/demo"
	in := workspaces.SessionStartInput{Workspace: key, Kind: "mechanical", Lifetime: "stays", Command: []string{"cat"}, DryRun: true}
	for _, c := range []struct {
		hears, want []string
	}{
		{nil, []string{f.Srv.AdminLogin}},
		{[]string{"alice", "bob"}, []string{"alice", "bob"}},
		{[]string{"*"}, []string{"*"}},
		{[]string{}, []string{}},
	} {
		in.Hears = c.hears
		a := f.OK(workspaces.Of(f.N).SessionStart(f.Ctx, in))
		log := strings.Join(a.Log, "\n")
		n, err := messages.ReadPost([]byte(log[strings.Index(log, "```json"):]))
		if err != nil {
			t.Fatalf("hears %q: %v\n%s", c.hears, err, log)
		}
		if d := n.(*messages.SessionDefinition); d.Hears == nil || strings.Join(d.Hears, ",") != strings.Join(c.want, ",") {
			t.Errorf("hears %q: the definition it would post hears %q, want %q\n%s", c.hears, d.Hears, c.want, log)
		}
	}
	before := f.Posts()
	in.Hears, in.DryRun = []string{"alice", "alice"}, false
	f.Refused(workspaces.Of(f.N).SessionStart(f.Ctx, in), "hears[1]", "named twice")
	if after := f.Posts(); after != before {
		t.Errorf("a refused start wrote %d posts", after-before)
	}
}
