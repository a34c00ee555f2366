package protocol_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/strictjson"
)

func dHash(n int) string { return fmt.Sprintf("%010d%030x", n, 0) }

var dW = messages.WorkspaceKey{Login: "ana", Project: "demo"}

func dLaunch(n int) protocol.LaunchSpec {
	return protocol.LaunchSpec{Hash: dHash(n), Repository: "/srv/demo.fossil", Workspace: dW, Record: dHash(900),
		Kind: messages.Mechanical, Lifetime: messages.Stays, Release: messages.ReleaseCurrent, Sandbox: json.RawMessage(`{"network":true}`)}
}

func TestProcID(t *testing.T) {
	p, err := protocol.ParseProcID("700@5000")
	if err != nil {
		t.Fatal(err)
	}
	if p != (protocol.ProcID{PID: 700, Start: 5000}) || p.String() != "700@5000" {
		t.Errorf("ParseProcID(700@5000) = %v (%s)", p, p)
	}
	if !p.Matches(protocol.ProcID{PID: 700}) || !p.Matches(p) || p.Matches(protocol.ProcID{PID: 700, Start: 1}) || p.Matches(protocol.ProcID{PID: 701, Start: 5000}) {
		t.Error("Matches: the same PID with an unknown or equal start time matches, nothing else")
	}
	for _, c := range []struct{ in, fault string }{
		{"700", "not PID@START"},
		{"x@5", "pid"},
		{"7@y", "start"},
		{"0@5", "pid"},
		{"7@0", "start"},
	} {
		_, err := protocol.ParseProcID(c.in)
		var fe *strictjson.FieldError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.fault) {
			t.Errorf("ParseProcID(%q) = %v, want a field error naming %q", c.in, err, c.fault)
		}
	}
}

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		e    messages.ExitStatus
		want string
		ok   bool
	}{
		{messages.ExitStatus{State: messages.EndExited, Code: 2}, "exited 2", true},
		{messages.ExitStatus{State: messages.EndSignaled, Signal: "SIGKILL"}, "signaled SIGKILL", true},
		{messages.ExitStatus{State: messages.EndUnknown}, "unknown", true},
		{messages.ExitStatus{State: messages.EndSandboxFailed, Code: 1}, "sandbox-failed 1", true},
		{messages.ExitStatus{State: messages.EndSignaled}, "signaled ", false},
		{messages.ExitStatus{}, "no status", false},
		{messages.ExitStatus{State: "crashed"}, "crashed", false},
	} {
		if got := c.e.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.e, got, c.want)
		}
		if err := c.e.Validate(); (err == nil) != c.ok {
			t.Errorf("%#v.Validate() = %v, want ok=%v", c.e, err, c.ok)
		}
	}
}

func TestLaunchSpecValidate(t *testing.T) {
	good := dLaunch(1)
	if err := good.Validate(); err != nil {
		t.Fatalf("a good launch refused: %v", err)
	}
	ci := good
	ci.Checkin, ci.Branch = dHash(2), "trunk"
	if err := ci.Validate(); err != nil || !ci.IsCI() {
		t.Fatalf("a good CI launch refused (%v) or not CI", err)
	}
	for _, c := range []struct {
		name, field string
		mod         func(*protocol.LaunchSpec)
	}{
		{"short hash", "hash", func(l *protocol.LaunchSpec) { l.Hash = "abc" }},
		{"no record", "record", func(l *protocol.LaunchSpec) { l.Record = "" }},
		{"bad login", "login", func(l *protocol.LaunchSpec) { l.Workspace.Login = "../x" }},
		{"CI without its branch", "branch", func(l *protocol.LaunchSpec) { l.Checkin = dHash(3) }},
		{"CI check-in not a hash", "checkin", func(l *protocol.LaunchSpec) { l.Checkin, l.Branch = "HEAD", "trunk" }},
	} {
		l := good
		c.mod(&l)
		err := l.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: Validate() = %v, want an error naming %q", c.name, err, c.field)
		}
	}
}

// TestDaemonStringsAreOneLine renders one of every message and effect: each
// is one non-empty line, as the logs and the transcripts need.
func TestDaemonStringsAreOneLine(t *testing.T) {
	p := protocol.ProcID{PID: 700, Start: 5000}
	l := dLaunch(1)
	info := protocol.ProcInfo{Proc: p, Workspace: dW, Verb: "run", StartedBy: messages.OriginTerminal, Command: "workspace run ana/demo --root /a"}
	st := protocol.SessionState{Workspace: dW, Proc: p, Child: true, Launch: l}
	bs := protocol.BranchState{Workspace: dW, Branch: "trunk", Phase: protocol.BranchIdle}
	ws := protocol.WorkspaceState{Workspace: dW, Sessions: []protocol.SessionState{st}, Branches: []protocol.BranchState{bs}}
	h := protocol.Handoff{OCX: protocol.HandoffKind, Version: protocol.HandoffVersion, Workspaces: []protocol.WorkspaceState{ws}}
	listener := protocol.BranchListener{Workspace: dW, Record: dHash(9), ListenNote: dHash(8), Lifetime: messages.Completes}
	reviewer := listener
	reviewer.Result = messages.ResultVerdict
	boom := errors.New("line one\nline two")
	values := []fmt.Stringer{
		protocol.ClassifyArtifact{Repository: "/srv/demo.fossil", Hash: dHash(1)},
		protocol.ResolveLaunch{Proc: info},
		protocol.WriteRefusal{Launch: l, Holders: []protocol.ProcInfo{info}, Reason: "held"},
		protocol.WriteEnd{Launch: l, Proc: p, End: messages.EndNote{Status: messages.EndExited}, KilledAfterGrace: true, Attempt: 2},
		protocol.ReadResult{Proc: p, Launch: l},
		protocol.FindUntested{Listener: listener, Branch: "trunk"},
		protocol.WriteLaunch{Listener: listener, Branch: "trunk", Checkin: dHash(3)},
		protocol.ScanWorkspace{Workspace: dW, Purpose: protocol.ScanForLaunch, For: dHash(1)},
		protocol.SpawnSession{Launch: l},
		protocol.SignalProcess{Proc: p, Group: true, Signal: protocol.SigTERM},
		protocol.StartTimer{Proc: p, Purpose: protocol.TimerGrace, Seq: 1, After: 10 * time.Second},
		protocol.WatchProcess{Proc: p, Seq: 1},
		protocol.PauseInputs{},
		protocol.ResumeInputs{Remainder: []byte("po")},
		protocol.ExecRelease{Handoff: h},
		protocol.Tell{To: protocol.WorkspaceAddr(dW), Msg: protocol.StopSession{}},
		protocol.StartActor{Addr: protocol.SessionAddr(dW, p), Session: &st},
		protocol.StopActor{Addr: protocol.BranchAddr(dW, "my branch")},
		protocol.ReplySnapshot{Request: 1, Handoff: h},
		protocol.LineRead{Line: pipe.StopLine{Login: "ana", Project: "demo"}},
		protocol.ProcessExited{Proc: p, Status: messages.ExitStatus{State: messages.EndSignaled, Signal: "SIGTERM"}},
		protocol.Boot{Found: []protocol.ProcInfo{info}},
		protocol.Boot{Listeners: []protocol.ListenedBranch{{Branch: "trunk", Listener: listener}}},
		protocol.Restore{Handoff: h, Listeners: []protocol.ListenedBranch{{Branch: "trunk", Listener: reviewer}}},
		protocol.Restore{Handoff: h},
		protocol.SnapshotRequest{Request: 3},
		protocol.ArtifactClassified{Hash: dHash(1), Err: boom},
		protocol.ArtifactClassified{Hash: dHash(1), Launch: &l},
		protocol.ArtifactClassified{Hash: dHash(1), Checkin: &protocol.CheckinSpec{Hash: dHash(2), Branch: "trunk", Listeners: []protocol.BranchListener{listener}}},
		protocol.ArtifactClassified{Hash: dHash(1), Nothing: "a reply"},
		protocol.LaunchResolved{Proc: info, Launch: &l},
		protocol.WorkspaceScanned{Workspace: dW, Purpose: protocol.ScanForStop, Procs: []protocol.ProcInfo{info}},
		protocol.WorkspaceScanned{Workspace: dW, Purpose: protocol.ScanForStop, Err: boom},
		protocol.SessionSpawned{Launch: dHash(1), Proc: p},
		protocol.SessionSpawned{Launch: dHash(1), Err: boom},
		protocol.ProcessSignaled{Proc: p, Signal: "TERM", Err: boom},
		protocol.RefusalWritten{Launch: dHash(1)},
		protocol.TimerFired{Proc: p, Purpose: protocol.TimerGrace, Seq: 2},
		protocol.ProcessGone{Proc: p, Seq: 1},
		protocol.ResultRead{Proc: p, Found: true, Result: "green: ok"},
		protocol.EndWritten{Proc: p, Err: boom},
		protocol.UntestedFound{Branch: "trunk", Newest: dHash(4)},
		protocol.UntestedFound{Branch: "trunk", Newest: dHash(4), Waiting: 2, Skipped: []protocol.SkippedCheckin{{Checkin: dHash(5), Why: "sent by\nthe reviewer"}}},
		protocol.LaunchWritten{Branch: "trunk", Checkin: dHash(4), Launch: &l},
		protocol.InputsPaused{Remainder: []byte("x")},
		protocol.InputsResumed{},
		protocol.ExecFailed{Err: boom},
		protocol.LaunchRequested{Launch: l},
		protocol.CheckinArrived{Checkin: dHash(4), Branch: "trunk", Listener: listener},
		protocol.CheckinArrived{Branch: "trunk", Listener: reviewer},
		protocol.StopWorkspace{Workspace: dW},
		protocol.AdoptSession{Proc: info, Launch: l},
		protocol.StopSession{},
		protocol.SessionEnded{Workspace: dW, Proc: p, Launch: l},
		protocol.SessionFinished{Proc: p},
		protocol.ReserveWorkspace{Branch: "trunk"},
		protocol.ReleaseWorkspace{Branch: "trunk"},
		protocol.ReservationGranted{Branch: "trunk"},
		protocol.ReservationRefused{Branch: "trunk", Why: "busy"},
		protocol.LaunchCI{Launch: l},
		protocol.LaunchSeen{Hash: dHash(1)},
		protocol.LaunchOutcome{Launch: l, Refused: "busy"},
		protocol.WorkspaceFreed{Ended: &protocol.EndedRun{Proc: p, Launch: l}},
		protocol.CollectState{Seq: 1, Ask: 2, Freeze: true},
		protocol.StateCollected{Seq: 1, Ask: 2, From: protocol.WorkspaceAddr(dW), Workspace: &ws},
		protocol.ResumeWork{},
		protocol.ChildStopped{Addr: protocol.NodeAddr()},
	}
	for _, v := range values {
		s := v.String()
		if s == "" || strings.ContainsAny(s, "\n\r") {
			t.Errorf("%T renders %q: not one non-empty line", v, s)
		}
	}
	// A few renderings the transcripts rely on, exactly.
	for _, c := range []struct {
		v    fmt.Stringer
		want string
	}{
		{protocol.SignalProcess{Proc: p, Group: true, Signal: protocol.SigKILL}, "signal KILL group 700@5000"},
		{protocol.ScanWorkspace{Workspace: dW, Purpose: protocol.ScanForLaunch, For: dHash(1)}, "scan ana/demo for launch 0000000001"},
		{protocol.SpawnSession{Launch: l}, "spawn workspace serve ana/demo --launch 0000000001 (release current)"},
		{protocol.BranchAddr(dW, "my branch"), `branch ana/demo "my branch"`},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%T.String() = %q, want %q", c.v, got, c.want)
		}
	}
}

// genHandoff draws a valid hand-off.
func genHandoff(t *rapid.T) protocol.Handoff {
	h := protocol.Handoff{OCX: protocol.HandoffKind, Version: protocol.HandoffVersion, Recent: []string{}, Pending: []string{}, Held: []protocol.ProcessExited{}, Workspaces: []protocol.WorkspaceState{}}
	for i := rapid.IntRange(0, 3).Draw(t, "recent"); i > 0; i-- {
		h.Recent = append(h.Recent, dHash(rapid.IntRange(0, 99).Draw(t, "hash")))
	}
	for i := rapid.IntRange(0, 3).Draw(t, "pending"); i > 0; i-- {
		h.Pending = append(h.Pending, rapid.SampledFrom([]string{"post /srv/demo.fossil " + dHash(5), "stop ana demo", "reexec"}).Draw(t, "line"))
	}
	for i := rapid.IntRange(0, 2).Draw(t, "parked"); i > 0; i-- {
		var w messages.WorkspaceKey
		if rapid.Bool().Draw(t, "heldWorkspace") {
			w = messages.WorkspaceKey{Login: "ana", Project: "demo"}
		}
		h.Held = append(h.Held, protocol.ProcessExited{Proc: protocol.ProcID{PID: rapid.IntRange(1, 9999).Draw(t, "pid"), Start: 7}, Workspace: w,
			Status: messages.ExitStatus{State: messages.EndExited, Code: rapid.IntRange(0, 255).Draw(t, "code")}, At: time.Unix(int64(rapid.IntRange(0, 1<<30).Draw(t, "at")), 0).UTC()})
	}
	if rapid.Bool().Draw(t, "remainder") {
		h.PipeRemainder = []byte(rapid.StringMatching(`[a-z /.]{1,20}`).Draw(t, "bytes"))
	}
	logins := []string{"ana", "bob", "ci"}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "workspaces"); i < n; i++ {
		w := messages.WorkspaceKey{Login: logins[i], Project: "demo"}
		ws := protocol.WorkspaceState{Workspace: w, Sessions: []protocol.SessionState{}, Branches: []protocol.BranchState{}}
		for j := rapid.IntRange(0, 2).Draw(t, "sessions"); j > 0; j-- {
			l := dLaunch(rapid.IntRange(0, 99).Draw(t, "launch"))
			l.Workspace = w
			s := protocol.SessionState{Workspace: w, Proc: protocol.ProcID{PID: rapid.IntRange(1, 9999).Draw(t, "pid"), Start: uint64(rapid.IntRange(1, 1<<40).Draw(t, "start"))},
				Child: rapid.Bool().Draw(t, "child"), Launch: l, KillSent: rapid.Bool().Draw(t, "kill"), EndAttempts: rapid.IntRange(0, 4).Draw(t, "attempts")}
			if rapid.Bool().Draw(t, "stopping") {
				at := time.Unix(int64(rapid.IntRange(0, 1<<30).Draw(t, "stopAt")), 0).UTC()
				s.StopRequestedAt = &at
			}
			if rapid.Bool().Draw(t, "ended") {
				s.Ended, s.Exit, s.EndedAt = true, messages.ExitStatus{State: messages.EndUnknown}, time.Unix(5, 0).UTC()
			}
			ws.Sessions = append(ws.Sessions, s)
		}
		if rapid.Bool().Draw(t, "branch") {
			ws.Branches = append(ws.Branches, protocol.BranchState{Workspace: w, Branch: "trunk", Phase: protocol.BranchIdle, Waiting: rapid.Bool().Draw(t, "waiting"),
				Listener: protocol.BranchListener{Workspace: w, Repository: "/srv/demo.fossil", Record: dHash(9), ListenNote: dHash(8), Lifetime: messages.Completes}})
		}
		h.Workspaces = append(h.Workspaces, ws)
	}
	return h
}

// TestHandoffRoundTrip: every valid hand-off decodes to what was encoded.
func TestHandoffRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHandoff(t)
		b, err := protocol.EncodeHandoff(h)
		if err != nil {
			t.Fatalf("encode a valid hand-off: %v", err)
		}
		got, err := protocol.DecodeHandoff(b)
		if err != nil {
			t.Fatalf("decode: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(got, h) {
			t.Fatalf("round trip changed the hand-off:\n got %+v\nwant %+v", got, h)
		}
	})
}

// TestHandoffRefusals: a hand-off this image cannot read whole is refused, and
// the error names what is wrong; nothing is dropped silently.
func TestHandoffRefusals(t *testing.T) {
	good := protocol.Handoff{OCX: protocol.HandoffKind, Version: protocol.HandoffVersion,
		Workspaces: []protocol.WorkspaceState{{Workspace: dW, Sessions: []protocol.SessionState{{Workspace: dW, Proc: protocol.ProcID{PID: 7, Start: 9}, Child: true, Launch: dLaunch(1)}}}}}
	b, err := protocol.EncodeHandoff(good)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	session := func(m map[string]any) map[string]any {
		return m["workspaces"].([]any)[0].(map[string]any)["sessions"].([]any)[0].(map[string]any)
	}
	for _, c := range []struct {
		name  string
		data  []byte
		fault string
	}{
		{"not JSON", []byte("{"), "not JSON"},
		{"another kind", edit(func(m map[string]any) { m["ocx"] = "node" }), "ocx"},
		{"a newer version", edit(func(m map[string]any) { m["version"] = 2 }), "version: is 2"},
		{"an unknown key", edit(func(m map[string]any) { m["pidfds"] = []int{3} }), `"pidfds"`},
		{"an unknown key in a session", edit(func(m map[string]any) { session(m)["pidfd"] = 5 }), `"pidfd"`},
		{"a session without a start time", edit(func(m map[string]any) { session(m)["proc"] = map[string]any{"pid": 7, "start": 0} }), "start"},
		{"a bad pending line", edit(func(m map[string]any) { m["pending"] = []string{"launch now"} }), "pending[0]"},
		{"a bad recent hash", edit(func(m map[string]any) { m["recent"] = []string{"xyz"} }), "recent[0]"},
		{"a workspace twice", edit(func(m map[string]any) {
			ws := m["workspaces"].([]any)
			m["workspaces"] = append(ws, ws[0])
		}), "appears twice"},
		{"a workspace key that is not LOGIN/PROJECT", edit(func(m map[string]any) {
			m["workspaces"].([]any)[0].(map[string]any)["workspace"] = "../x"
		}), "workspace key"},
		{"trailing data", append(append([]byte{}, b...), []byte(` {}`)...), "after top-level value"},
		// The reaper's state is the wiring's, read by the daemon around this.
		{"the wiring's reaper state, to the actors' reader", edit(func(m map[string]any) {
			m["reaper"] = []any{map[string]any{"proc": map[string]any{"pid": 7, "start": 9}, "status_fd": 5}}
		}), `unknown field "reaper"`},
		{"a relative release directory", edit(func(m map[string]any) { session(m)["launch"].(map[string]any)["release_dir"] = "releases/a" }), "release_dir"},
	} {
		_, err := protocol.DecodeHandoff(c.data)
		if err == nil || !strings.Contains(err.Error(), c.fault) {
			t.Errorf("%s: DecodeHandoff = %v, want an error naming %q", c.name, err, c.fault)
		}
	}
	if _, err := protocol.EncodeHandoff(protocol.Handoff{OCX: protocol.HandoffKind, Version: 9}); err == nil {
		t.Error("EncodeHandoff wrote a version it does not know")
	}
}

// TestHandoffReleaseRoundTrip: a launch's release directory and name come
// back as written.
func TestHandoffReleaseRoundTrip(t *testing.T) {
	l := dLaunch(1)
	l.ReleaseDir, l.ReleaseName = "/var/lib/ocx/release/releases/2026-11-30.1", "2026-11-30.1"
	h := protocol.Handoff{OCX: protocol.HandoffKind, Version: protocol.HandoffVersion,
		Workspaces: []protocol.WorkspaceState{{Workspace: dW, Sessions: []protocol.SessionState{{Workspace: dW, Proc: protocol.ProcID{PID: 7, Start: 9}, Child: true, Launch: l}}}}}
	b, err := protocol.EncodeHandoff(h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := protocol.DecodeHandoff(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Workspaces[0].Sessions[0].Launch.ReleaseDir != l.ReleaseDir || got.Workspaces[0].Sessions[0].Launch.ReleaseName != l.ReleaseName {
		t.Errorf("round trip: %+v", got)
	}
}

// TestHandoffChildren lists the children a re-exec keeps: running children,
// by PID; not adopted processes, not ended ones.
func TestHandoffChildren(t *testing.T) {
	s := func(pid int, child, ended bool) protocol.SessionState {
		return protocol.SessionState{Workspace: dW, Proc: protocol.ProcID{PID: pid, Start: 1}, Child: child, Ended: ended}
	}
	h := protocol.Handoff{Workspaces: []protocol.WorkspaceState{
		{Workspace: dW, Sessions: []protocol.SessionState{s(30, true, false), s(10, false, false)}},
		{Workspace: messages.WorkspaceKey{Login: "bob", Project: "demo"}, Sessions: []protocol.SessionState{s(20, true, false), s(40, true, true)}},
	}}
	want := []protocol.ProcID{{PID: 20, Start: 1}, {PID: 30, Start: 1}}
	if got := h.Children(); !reflect.DeepEqual(got, want) {
		t.Errorf("Children() = %v, want %v", got, want)
	}
}

// TestEffectsAnswerWithTheirResults: each effect that asks names a result.
// with its result on its type, and the deps answer each with that type.
func TestEffectsAnswerWithTheirResults(t *testing.T) {
	for _, e := range []protocol.Asking{protocol.ClassifyArtifact{}, protocol.ResolveLaunch{}, protocol.WriteRefusal{}, protocol.WriteEnd{},
		protocol.ReadResult{}, protocol.FindUntested{}, protocol.WriteLaunch{}, protocol.ScanWorkspace{}, protocol.SpawnSession{},
		protocol.SignalProcess{}, protocol.PauseInputs{}, protocol.ResumeInputs{}} {
		if e.Answer() == nil {
			t.Errorf("%T answers with nothing", e)
		}
	}
}
