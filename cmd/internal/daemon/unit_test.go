package daemon

import (
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

func TestParseArgs(t *testing.T) {
	o, err := parseArgs([]string{"--agents", "/srv/agents/", "--grace", "2s", "--log-level", "debug"})
	if err != nil || o.Agents != "/srv/agents" || o.Grace != 2*time.Second || o.Level != slog.LevelDebug || o.Restore || o.HookWatch != defaultHookWatch {
		t.Fatalf("%+v %v", o, err)
	}
	if got := strings.Join(o.argv("/r/ocxd"), " "); got != "/r/ocxd --agents /srv/agents --grace 2s --log-level debug --hook-watch 2s --restore" {
		t.Errorf("the re-exec's argv: %s", got)
	}
	if o, err := parseArgs([]string{"--agents", "/a", "--retry-after", "200ms"}); err != nil || o.RetryAfter != 200*time.Millisecond ||
		!strings.Contains(strings.Join(o.argv("/r/ocxd"), " "), "--retry-after 200ms --restore") {
		t.Errorf("--retry-after 200ms: %+v %v, argv %v", o, err, o.argv("/r/ocxd"))
	}
	if o, err := parseArgs([]string{"--agents", "/a", "--drain", "2m"}); err != nil || o.Drain != 2*time.Minute ||
		!strings.Contains(strings.Join(o.argv("/r/ocxd"), " "), "--drain 2m0s --restore") {
		t.Errorf("--drain 2m: %+v %v, argv %v", o, err, o.argv("/r/ocxd"))
	}
	if o, err := parseArgs([]string{"--agents", "/a", "--hook-watch", "0"}); err != nil || o.HookWatch != 0 {
		t.Errorf("--hook-watch 0: %+v %v", o, err)
	}
	if again, err := parseArgs(o.argv("/r/ocxd")[1:]); err != nil || again.Agents != o.Agents || again.Grace != o.Grace || again.Level != o.Level || again.HookWatch != o.HookWatch || !again.Restore {
		t.Errorf("the re-exec's argv reads back as %+v %v", again, err)
	}
	if o, err := parseArgs([]string{"--agents", "/a", "--cpu-profile", "/tmp/ocxd.prof"}); err != nil || o.CPUProfile != "/tmp/ocxd.prof" || strings.Contains(strings.Join(o.argv("/r/ocxd"), " "), "profile") {
		t.Errorf("--cpu-profile: %+v %v (the new image of a re-exec does not go on with it)", o, err)
	}
	if o, err := parseArgs([]string{"--handoff-version"}); err != nil || !o.HandoffVersion {
		t.Errorf("--handoff-version: %+v %v", o, err)
	}
	if o, err := parseArgs([]string{"--version"}); err != nil || !o.Version {
		t.Errorf("--version: %+v %v", o, err)
	}
	var out, errOut strings.Builder
	if code := Main([]string{"--version"}, &out, &errOut); code != 0 || out.String() != "ocxd version dev checkin dev\n" {
		t.Errorf("ocxd --version: exit %d, %q %q", code, out.String(), errOut.String())
	}
	if _, err := parseArgs([]string{"--help"}); !errors.Is(err, errHelp) {
		t.Errorf("--help: %v", err)
	}
	for _, bad := range [][]string{
		{},
		{"--agents", "/a", "--grace", "0s"},
		{"--agents", "/a", "--grace", "soon"},
		{"--agents", "/a", "--log-level", "loud"},
		{"--agents", "/a", "--hook-watch", "-1s"},
		{"--agents", "/a", "--hook-watch", "often"},
		{"--agents", "/a", "--retry-after", "0s"},
		{"--agents", "/a", "--drain", "0s"},
		{"--agents", "/a", "extra"},
		{"--frobnicate"},
	} {
		var ue *usageError
		if _, err := parseArgs(bad); !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
}

// TestParseEnv: the tests' re-exec delay is read from the environment, and
// a value that is not a duration is refused, naming the variable.
func TestParseEnv(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == envReexecDelay {
				return v
			}
			return ""
		}
	}
	var o options
	if err := o.ParseEnv(env("")); err != nil || o.ReexecDelay != 0 {
		t.Errorf("no delay set: %v %v", o.ReexecDelay, err)
	}
	if err := o.ParseEnv(env("2500ms")); err != nil || o.ReexecDelay != 2500*time.Millisecond {
		t.Errorf("2500ms: %v %v", o.ReexecDelay, err)
	}
	if err := o.ParseEnv(env("2s@exec")); err != nil || o.ReexecDelay != 2*time.Second || o.ReexecDelayAt != "exec" {
		t.Errorf("2s@exec: %v at %q, %v", o.ReexecDelay, o.ReexecDelayAt, err)
	}
	for _, bad := range []string{"soon", "-1s", "3"} {
		var ue *usageError
		if err := (&options{}).ParseEnv(env(bad)); !errors.As(err, &ue) || !strings.Contains(err.Error(), envReexecDelay) {
			t.Errorf("%q: %v, want a usage error naming %s", bad, err, envReexecDelay)
		}
	}
}

func TestHolder(t *testing.T) {
	bind := protocol.ProcInfo{Proc: protocol.ProcID{PID: 1, Start: 1}, Verb: "bind"}
	run := protocol.ProcInfo{Proc: protocol.ProcID{PID: 2, Start: 2}, Verb: "run"}
	if h, ok := holder([]protocol.ProcInfo{bind, run}); !ok || h.Proc.PID != 2 {
		t.Errorf("the holder of bwrap and a session: %v", h)
	}
	if h, ok := holder([]protocol.ProcInfo{bind}); !ok || h.Proc.PID != 1 {
		t.Errorf("the holder of bwrap alone: %v", h)
	}
	if _, ok := holder(nil); ok {
		t.Errorf("a holder of nothing")
	}
}

// TestHandoffFileRoundTrip: the wiring's part of the hand-off (the kept
// descriptors, each child's bwrap status descriptor and what was read of
// it) rides beside the actors' in one JSON object, as version 1 wrote it,
// and a key neither part knows refuses the file.
func TestHandoffFileRoundTrip(t *testing.T) {
	w := messages.WorkspaceKey{Login: "ci", Project: "demo"}
	l := protocol.LaunchSpec{Hash: strings.Repeat("a", 64), Workspace: w, Record: strings.Repeat("b", 64)}
	f := handoffFile{
		Handoff: protocol.Handoff{OCX: protocol.HandoffKind, Version: protocol.HandoffVersion,
			Workspaces: []protocol.WorkspaceState{{Workspace: w, Sessions: []protocol.SessionState{{Workspace: w, Proc: protocol.ProcID{PID: 7, Start: 9}, Child: true, Launch: l}}}}},
		FDs:    map[string]int{fdLock: 3, fdPipeRead: 4, fdPipeWrite: 5},
		Reaper: []unixhost.ChildHandoff{{ID: protocol.ProcID{PID: 7, Start: 9}, StatusFD: 6, Status: `{"child-pid": 8}`}, {ID: protocol.ProcID{PID: 11, Start: 12}, StatusFD: -1}},
	}
	b, err := encodeHandoff(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"fds":{`) || !strings.Contains(string(b), `"reaper":[{"proc":{"pid":7,"start":9},"status_fd":6`) || !strings.HasPrefix(string(b), `{"ocx":"ocxd-handoff","version":1,`) {
		t.Errorf("the file: %s", b)
	}
	got, err := decodeHandoff(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, f)
	}
	// The actors' reader alone refuses the wiring's keys: nothing is dropped.
	if _, err := protocol.DecodeHandoff(b); err == nil || !strings.Contains(err.Error(), "fds") {
		t.Errorf("protocol.DecodeHandoff of the whole file: %v", err)
	}
	if _, err := decodeHandoff([]byte(strings.Replace(string(b), `"fds":`, `"fdz":`, 1))); err == nil {
		t.Error("a key neither part knows was read")
	}
	for field, child := range map[string]unixhost.ChildHandoff{
		"status_fd": {ID: protocol.ProcID{PID: 7, Start: 9}, StatusFD: -2},
		"proc":      {ID: protocol.ProcID{PID: 7}, StatusFD: 5},
	} {
		bad := f
		bad.Reaper = []unixhost.ChildHandoff{child}
		if _, err := encodeHandoff(bad); err == nil || !strings.Contains(err.Error(), "reaper[0]."+field) {
			t.Errorf("a bad %s: %v", field, err)
		}
		data, _ := json.Marshal(bad)
		if _, err := decodeHandoff(data); err == nil || !strings.Contains(err.Error(), "reaper[0]."+field) {
			t.Errorf("a bad %s read: %v", field, err)
		}
	}
}
