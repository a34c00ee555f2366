package workspaces

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/protocol"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/plantest"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

// fakeEffects records, in order, the effects a plan runs, and fails the
// one named in Fail (plantest). It is the effects of every plan here,
// without a host.
type fakeEffects struct{ plantest.Effects }

// startEffects
func (f *fakeEffects) stopHeld(context.Context, *node.Answer) error { return f.Do("stopHeld") }
func (f *fakeEffects) listen(context.Context) (bool, error)         { return true, f.Do("listen") }
func (f *fakeEffects) unlisten(context.Context) error               { return f.Do("unlisten") }
func (f *fakeEffects) hand(_ context.Context, _ *node.Answer, l pipe.Line) error {
	return f.Do("hand " + l.String())
}
func (f *fakeEffects) awaitOutcome(_ context.Context, _ *node.Answer, launch string) error {
	return f.Do("await " + launch[:4])
}
func (f *fakeEffects) post(_ context.Context, text string) (string, error) {
	first, _, _ := strings.Cut(text, "\n")
	return f.Hash(), f.Do("post " + first)
}

// listenerEffects and workspaceEffects
type fakeNodeEffects struct{ *fakeEffects }

func (f fakeNodeEffects) post(_ context.Context, note fossilio.NoteWrite) (string, error) {
	first, _, _ := strings.Cut(note.Text, "\n")
	return f.Hash(), f.Do("post " + first)
}
func (f fakeNodeEffects) make(_ context.Context, _ *messages.WorkspaceDefinition, hash, record string) error {
	return f.Do("make " + hash[:2] + " " + record[:2])
}
func (f fakeNodeEffects) remove(context.Context) error { return f.Do("remove") }
func (f fakeNodeEffects) backoffice(context.Context, *node.Answer) {
	f.Calls = append(f.Calls, "backoffice")
}

type fakeListener struct{ *fakeEffects }

func (f fakeListener) post(_ context.Context, where ownRecord, login, text string) (string, error) {
	first, _, _ := strings.Cut(text, "\n")
	return f.Hash(), f.Do(fmt.Sprintf("post as %s on %s: %s", login, where.ID[:2], first))
}
func (f fakeListener) received(context.Context, string) (int64, error) { return 7, f.Do("received") }
func (f fakeListener) listen(_ context.Context, kind messages.ListenKind, names string, after int64, on bool) error {
	return f.Do(fmt.Sprintf("listen %s %s after %d on %v", kind, names, after, on))
}
func (f fakeListener) backoffice(context.Context, *node.Answer) {
	f.Calls = append(f.Calls, "backoffice")
}

func testKey() messages.WorkspaceKey { return messages.WorkspaceKey{Login: "agent-1", Project: "demo"} }

// TestStartPlan is a start's plan for given facts: the listening index
// first (a host that cannot write it refuses the start with nothing
// done); a second start stops the held session then; the definition,
// then the launch naming it, on the own record; the hand-off; the
// outcome.
func TestStartPlan(t *testing.T) {
	home := strings.Repeat("b", 64)
	f := startFacts{Key: testKey(), Caller: "admin", Release: "current", Workspace: strings.Repeat("c", 64),
		Own: ownRecord{Kind: messages.ListenThread, ID: home}, DefText: "Session of workspace `agent-1/demo`: x.\n\n{}",
		ListenPath: "/agents/agent-1/held/demo/listening/thread-" + home, Repository: "/srv/demo.fossil"}
	fx := &fakeEffects{}
	p := startPlan(f, fx)
	texts := p.Texts()
	if len(texts) != 3 || texts[0] != "write "+f.ListenPath || !strings.HasPrefix(texts[1], `post as "admin" on thread `+home+":\nSession of workspace") ||
		texts[2] != "post the launch note (release current) on the same record and hand `post /srv/demo.fossil LAUNCH` to the daemon" {
		t.Errorf("texts:\n%s", strings.Join(texts, "\n"))
	}
	_, real := plantest.Run(t, p)
	launch := strings.Repeat("2", 64)
	want := []string{"listen", "post Session of workspace `agent-1/demo`: x.", "post Launch of the session 1111111111 in workspace `agent-1/demo`.",
		"hand " + pipe.PostLine{Repository: f.Repository, Hash: launch}.String(), "await 2222"}
	if !slices.Equal(fx.Calls, want) || !real.OK() || *real.Result != launch {
		t.Errorf("ran %q (result %v, stopped %v), want %q", fx.Calls, real.Result, real.Log, want)
	}

	f.Held = &daemonSession{Proc: host.Process{ID: protocol.ProcID{PID: 42}}, Launch: strings.Repeat("l", 64)}
	fx = &fakeEffects{plantest.Effects{Fail: "stopHeld"}}
	p = startPlan(f, fx)
	if texts := p.Texts(); len(texts) != 4 || !strings.HasPrefix(texts[1], "hand `stop agent-1 demo` to the daemon, which runs the session of launch "+f.Held.Launch) {
		t.Errorf("texts of a second start:\n%s", strings.Join(texts, "\n"))
	}
	if _, real := plantest.Run(t, p); real.OK() || !slices.Equal(fx.Calls, []string{"listen", "stopHeld", "unlisten"}) {
		t.Errorf("a stop that fails writes nothing and takes the index's entry back: ran %q, stopped %v", fx.Calls, real.Stopped)
	}
}

// TestStartPlanOnAFullDisk: a start whose listening index cannot be
// written (the agents root full) does nothing else and says so; one that
// fails after it says each step done before, and takes the index's entry
// back while no launch note is on the record; a launch note on the record
// is awaited even when handing it over failed (the hook hands it too), so
// the answer says what the daemon made of it (issue 38).
func TestStartPlanOnAFullDisk(t *testing.T) {
	home := strings.Repeat("b", 64)
	f := startFacts{Key: testKey(), Caller: "admin", Release: "current", Workspace: strings.Repeat("c", 64),
		Own: ownRecord{Kind: messages.ListenThread, ID: home}, DefText: "Session of workspace `agent-1/demo`: x.\n\n{}",
		ListenPath: "/agents/agent-1/held/demo/listening/thread-" + home, Repository: "/srv/demo.fossil",
		Held: &daemonSession{Proc: host.Process{ID: protocol.ProcID{PID: 42}}, Launch: strings.Repeat("l", 64)}}
	launch := strings.Repeat("2", 64)
	for _, c := range []struct {
		fail   string
		calls  []string
		ok     bool
		said   []string
		result bool
	}{
		{fail: "listen", calls: []string{"listen"}, said: []string{"listen failed; nothing was done"}},
		{fail: "post Launch", calls: []string{"listen", "stopHeld", "post Session of workspace `agent-1/demo`: x.", "post Launch of the session 1111111111 in workspace `agent-1/demo`.", "unlisten"},
			said: []string{"post the launch note: ", "done before it stopped: wrote " + f.ListenPath + "; stopped the session of launch " + f.Held.Launch + "; posted the session definition " + strings.Repeat("1", 64)}},
		{fail: "hand", calls: []string{"listen", "stopHeld", "post Session of workspace `agent-1/demo`: x.", "post Launch of the session 1111111111 in workspace `agent-1/demo`.", "hand " + pipe.PostLine{Repository: f.Repository, Hash: launch}.String(), "await 2222"},
			ok: true, result: true},
		{fail: "await", calls: []string{"listen", "stopHeld", "post Session of workspace `agent-1/demo`: x.", "post Launch of the session 1111111111 in workspace `agent-1/demo`.", "hand " + pipe.PostLine{Repository: f.Repository, Hash: launch}.String(), "await 2222"},
			said: []string{"await 2222 failed; done before it stopped: ", "posted the launch note " + launch + ", which is the daemon's to launch"}, result: true},
	} {
		fx := &fakeEffects{plantest.Effects{Fail: c.fail}}
		_, real := plantest.Run(t, startPlan(f, fx))
		if !slices.Equal(fx.Calls, c.calls) || real.OK() != c.ok || (real.Result != nil) != c.result {
			t.Errorf("%s failing: ran %q (result %v, stopped %v), want %q", c.fail, fx.Calls, real.Result, real.Stopped, c.calls)
			continue
		}
		for _, s := range c.said {
			if real.Stopped == nil || !strings.Contains(*real.Stopped, s) {
				t.Errorf("%s failing: stopped %v, want it to say %q", c.fail, real.Stopped, s)
			}
		}
	}
}

// TestListenerPlan is a listener's plan: the note as the agent login where
// it goes, then its file, written after the note's receipt or removed.
func TestListenerPlan(t *testing.T) {
	root := strings.Repeat("r", 64)
	f := listenerFacts{Key: testKey(), Kind: messages.ListenBranch, Names: "feature", Where: ownRecord{Kind: messages.ListenThread, ID: root}, Path: "/held/listening/branch-feature", On: true}
	fx := fakeListener{&fakeEffects{}}
	p, err := listenerPlan(f, fx)
	if err != nil {
		t.Fatal(err)
	}
	dry, real := plantest.Run(t, p)
	if len(dry.Log) != 2 || !strings.HasPrefix(dry.Log[0], `would post as "agent-1" on thread `+root+":\nListening to branch `feature` in workspace `agent-1/demo`.") || dry.Log[1] != "would write "+f.Path {
		t.Errorf("dry run:\n%s", strings.Join(dry.Log, "\n"))
	}
	want := []string{"post as agent-1 on rr: Listening to branch `feature` in workspace `agent-1/demo`.", "received", "listen branch feature after 7 on true", "backoffice"}
	if !slices.Equal(fx.Calls, want) || !real.OK() || real.Log[len(real.Log)-1] != "wrote "+f.Path {
		t.Errorf("ran %q, log %q", fx.Calls, real.Log)
	}

	// A file that cannot be written (a full disk) after the note: the
	// answer says the note is on the record and when it counts.
	fx = fakeListener{&fakeEffects{plantest.Effects{Fail: "listen"}}}
	p, _ = listenerPlan(f, fx)
	if _, real := plantest.Run(t, p); real.OK() || !strings.Contains(*real.Stopped, "the listen note 1111111111111111111111111111111111111111111111111111111111111111 is on the record, so the session hears branch feature from its next launch") {
		t.Errorf("a listen whose file fails: stopped %v", real.Stopped)
	}

	f.On = false
	fx = fakeListener{&fakeEffects{}}
	p, _ = listenerPlan(f, fx)
	dry, real = plantest.Run(t, p)
	if dry.Log[1] != "would remove "+f.Path || !strings.Contains(dry.Log[0], "No longer listening to branch") {
		t.Errorf("dry run of a remove:\n%s", strings.Join(dry.Log, "\n"))
	}
	want = []string{"post as agent-1 on rr: No longer listening to branch `feature` in workspace `agent-1/demo`.", "listen branch feature after 0 on false", "backoffice"}
	if !slices.Equal(fx.Calls, want) || real.Log[len(real.Log)-1] != "removed "+f.Path {
		t.Errorf("ran %q, log %q", fx.Calls, real.Log)
	}
}

// TestAddPlan is a workspace add's plan: made from the definition that
// counts when only the record has it; refused when the host has it; else
// the definition posted, then the workspace made, the backoffice run even
// when the making fails.
func TestAddPlan(t *testing.T) {
	ws := host.Workspace{Key: testKey(), Dir: "/agents/agent-1/demo", Clone: "/c", Tree: "/t", Binding: "/b", Wake: "/w"}
	def := &messages.WorkspaceDefinition{Login: "agent-1", Project: "demo", Branch: "trunk", Sandbox: messages.Sandbox{ReadWrite: []string{ws.Dir}}}
	defined := &node.Workspace{Key: testKey(), Definition: def, Hash: strings.Repeat("d", 64), Record: strings.Repeat("e", 64)}
	f := addFacts{Key: testKey(), Caller: "admin", Branch: "feature", Def: def, WS: ws, URL: "http://127.0.0.1:8080/", Defined: defined}
	fx := fakeNodeEffects{&fakeEffects{}}
	p, err := addPlan(f, fx)
	if err != nil {
		t.Fatal(err)
	}
	dry, real := plantest.Run(t, p)
	if len(dry.Log) != 3 || !strings.Contains(dry.Log[1], `says branch "trunk", not "feature"`) || dry.Log[2] != "would make workspace agent-1/demo on the host at "+ws.Dir {
		t.Errorf("dry run of a reuse:\n%s", strings.Join(dry.Log, "\n"))
	}
	if !slices.Equal(fx.Calls, []string{"make dd ee"}) || *real.Result != defined.Hash {
		t.Errorf("a reuse ran %q", fx.Calls)
	}
	f.OnHost = true
	if _, err := addPlan(f, fx); err == nil || !strings.Contains(err.Error(), "exists: defined at") {
		t.Errorf("a workspace on the host and the record: %v", err)
	}
	f.Defined = nil
	if _, err := addPlan(f, fx); err == nil || !strings.Contains(err.Error(), "`ocx workspace gc` removes it") {
		t.Errorf("a workspace on the host only: %v", err)
	}

	f.OnHost, f.Thread = false, strings.Repeat("9", 64)
	fx = fakeNodeEffects{&fakeEffects{plantest.Effects{Fail: "make"}}}
	p, _ = addPlan(f, fx)
	dry, real = plantest.Run(t, p)
	if len(dry.Log) != 2 || !strings.HasPrefix(dry.Log[0], `would post as "admin" in thread `+f.Thread+":\nWorkspace `agent-1/demo`") ||
		dry.Log[1] != `would clone http://127.0.0.1:8080/ as "agent-1" into /c, open its tree on "feature" in /t, write /b and make /w` {
		t.Errorf("dry run of a new workspace:\n%s", strings.Join(dry.Log, "\n"))
	}
	want := []string{"post Workspace `agent-1/demo`: agent login `agent-1` on project `demo`, branch `feature`.", "make 11 99", "backoffice"}
	if !slices.Equal(fx.Calls, want) || real.OK() || !strings.Contains(*real.Stopped, "the host is left clean and the definition stays on the record at 1111") {
		t.Errorf("ran %q, stopped %v", fx.Calls, real.Stopped)
	}
	f.Thread = ""
	p, _ = addPlan(f, fakeNodeEffects{&fakeEffects{}})
	if texts := p.Texts(); !strings.HasPrefix(texts[0], `post as "admin" the first post of a new thread:`) {
		t.Errorf("a new thread: %q", texts[0])
	}
}

// TestTerminatePlan is a terminate's plan: the terminated note unless it
// is there, then the workspace removed if it is on the host.
func TestTerminatePlan(t *testing.T) {
	ws := host.Workspace{Key: testKey(), Dir: "/agents/agent-1/demo"}
	w := &node.Workspace{Key: testKey(), Hash: strings.Repeat("d", 64), Record: strings.Repeat("e", 64)}
	f := terminateFacts{Key: testKey(), Caller: "admin", Reason: "done", WS: ws, Defined: w, OnHost: true}
	fx := fakeNodeEffects{&fakeEffects{}}
	p, err := terminatePlan(f, fx)
	if err != nil {
		t.Fatal(err)
	}
	dry, real := plantest.Run(t, p)
	if len(dry.Log) != 2 || !strings.HasPrefix(dry.Log[0], `would post as "admin" in record `+w.Record+":\nWorkspace `agent-1/demo` is terminated.") || dry.Log[1] != "would remove "+ws.Dir {
		t.Errorf("dry run:\n%s", strings.Join(dry.Log, "\n"))
	}
	if want := []string{"post Workspace `agent-1/demo` is terminated.", "remove", "backoffice"}; !slices.Equal(fx.Calls, want) || !real.OK() {
		t.Errorf("ran %q, stopped %v", fx.Calls, real.Stopped)
	}

	w.Terminated, f.OnHost = strings.Repeat("t", 64), true
	fx = fakeNodeEffects{&fakeEffects{}}
	p, _ = terminatePlan(f, fx)
	dry, _ = plantest.Run(t, p)
	if len(dry.Log) != 2 || !strings.HasPrefix(dry.Log[0], "workspace agent-1/demo is already terminated") || !slices.Equal(fx.Calls, []string{"remove"}) {
		t.Errorf("an already terminated workspace: %q, ran %q", dry.Log, fx.Calls)
	}
	f.OnHost = false
	if _, err := terminatePlan(f, fx); err == nil || !strings.Contains(err.Error(), "already terminated") {
		t.Errorf("terminated and gone: %v", err)
	}
	w.Terminated = ""
	p, _ = terminatePlan(f, fx)
	if dry, _ := plantest.Run(t, p); dry.Log[len(dry.Log)-1] != "workspace agent-1/demo was not on the host" {
		t.Errorf("not on the host: %q", dry.Log)
	}
	f.Defined = nil
	if _, err := terminatePlan(f, fx); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("no workspace: %v", err)
	}
}

// fakeDaemon records the lines a plan hands the daemon.
type fakeDaemon struct{ *fakeEffects }

func (f fakeDaemon) send(_ context.Context, _ *node.Answer, lines ...pipe.Line) error {
	for _, l := range lines {
		if err := f.Do("send " + l.String()); err != nil {
			return err
		}
	}
	return nil
}

// TestStopPlan is a stop's plan: refused when no process names the
// workspace; else the stop line handed to the daemon, even when the table
// cannot tell (the daemon decides); a hand-off that fails stops it.
func TestStopPlan(t *testing.T) {
	k := testKey()
	if _, err := stopPlan(k, host.Verdict{Key: k, Named: host.No}, fakeDaemon{&fakeEffects{}}); err == nil || err.Error() != "no session runs in workspace agent-1/demo: no process names it" {
		t.Errorf("nothing names it: %v", err)
	}
	for _, v := range []host.Verdict{
		{Key: k, Named: host.Yes, By: []protocol.ProcID{{PID: 7, Start: 9}}},
		{Key: k, Named: host.Unknown, Unsure: []int{8}},
	} {
		fx := fakeDaemon{&fakeEffects{}}
		p, err := stopPlan(k, v, fx)
		if err != nil {
			t.Fatal(err)
		}
		dry, real := plantest.Run(t, p)
		if want := []string{"would hand `stop agent-1 demo` to the daemon (" + v.String() + ")"}; !slices.Equal(dry.Log, want) {
			t.Errorf("dry run %q, want %q", dry.Log, want)
		}
		if !real.OK() || !slices.Equal(fx.Calls, []string{"send stop agent-1 demo"}) || real.Log[0] != "the daemon sends TERM to the session and records its end on the record" {
			t.Errorf("real run ran %q, logged %q, stopped %v", fx.Calls, real.Log, real.Stopped)
		}
	}
	fx := fakeDaemon{&fakeEffects{plantest.Effects{Fail: "send"}}}
	p, _ := stopPlan(k, host.Verdict{Key: k, Named: host.Yes}, fx)
	if _, real := plantest.Run(t, p); real.OK() || len(real.Log) != 0 {
		t.Errorf("a failed hand-off: stopped %v, logged %q", real.Stopped, real.Log)
	}
}

type fakeGC struct{ *fakeEffects }

func (f fakeGC) removeWorkspace(_ context.Context, ws host.Workspace) error {
	return f.Do("remove " + ws.Key.String())
}

// TestGCPlan is a gc's plan for given facts: a workspace whose record
// terminated it, or no longer defines it, or defines it anew, is removed
// unless a process names it; one without the node's binding is left to
// the record; each left alone is said, in the order read.
func TestGCPlan(t *testing.T) {
	def := func(hash, terminated string) *node.Workspace {
		return &node.Workspace{Hash: hash, Terminated: terminated}
	}
	fact := func(login string, defined *node.Workspace, made string, bindingErr error, named host.Evidence) gcFact {
		k := messages.WorkspaceKey{Login: login, Project: "demo"}
		f := gcFact{Key: k, WS: host.Workspace{Key: k, Dir: "/a/" + login}, Defined: defined, BindingErr: bindingErr, Named: host.Verdict{Key: k, Named: named}}
		if bindingErr == nil {
			f.Binding = &messages.Binding{Workspace: made}
		}
		return f
	}
	facts := []gcFact{
		fact("kept", def("d1", ""), "d1", nil, host.No),
		fact("ended", def("d1", "t1"), "d1", nil, host.No),
		fact("gone", nil, "d1", nil, host.No),
		fact("anew", def("d2", ""), "d1", nil, host.No),
		fact("busy", def("d1", "t1"), "d1", nil, host.Yes),
		fact("adding", def("d1", ""), "", fs.ErrNotExist, host.No),
		fact("unread", nil, "", errors.New("permission denied"), host.No),
		{Key: messages.WorkspaceKey{Login: "odd", Project: "x"}, Unread: errors.New(`project "x" is not on this node`)},
	}
	fx := fakeGC{&fakeEffects{plantest.Effects{Fail: "remove anew/demo"}}}
	dry, real := plantest.Run(t, gcPlan(facts, fx))
	want := []string{
		"would remove /a/ended (terminated at t1)",
		"would remove /a/gone (no definition on the record counts for it)",
		"would remove /a/anew (made from definition d1, which d2 replaced)",
		"busy/demo: terminated at t1, but a running process names it (workspace busy/demo is named by ); left alone",
		"adding/demo: the node kept no binding of it (being added, half made, or made by an earlier release) and its definition d1 counts; left alone",
		"unread/demo: the node's binding of it does not read (permission denied); left alone",
		`odd/x: project "x" is not on this node; left alone`,
	}
	if !slices.Equal(dry.Log, want) {
		t.Errorf("dry run:\n%s\nwant:\n%s", strings.Join(dry.Log, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(fx.Calls, []string{"remove ended/demo", "remove gone/demo", "remove anew/demo"}) || real.OK() {
		t.Errorf("real run ran %q, stopped %v", fx.Calls, real.Stopped)
	}
	if dry, _ := plantest.Run(t, gcPlan(facts[:1], fx)); !slices.Equal(dry.Log, []string{"nothing to collect"}) {
		t.Errorf("nothing to collect: %q", dry.Log)
	}
}
