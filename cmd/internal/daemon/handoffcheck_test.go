package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/reexeccheck"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// TestHandoffCheckArgs: the check's command line is the exec's with
// --handoff-check for --restore, and reads back as such; the two are not
// given together.
func TestHandoffCheckArgs(t *testing.T) {
	o, err := parseArgs([]string{"--agents", "/srv/agents", "--grace", "2s", "--retry-after", "200ms"})
	if err != nil {
		t.Fatal(err)
	}
	argv := o.checkArgv("/r/ocxd")
	if got := strings.Join(argv, " "); got != "/r/ocxd --agents /srv/agents --grace 2s --log-level info --hook-watch 2s --retry-after 200ms --handoff-check" {
		t.Errorf("the check's argv: %s", got)
	}
	again, err := parseArgs(argv[1:])
	if err != nil || !again.HandoffCheck || again.Restore || again.Agents != o.Agents || again.RetryAfter != o.RetryAfter {
		t.Errorf("the check's argv reads back as %+v %v", again, err)
	}
	var ue *usageError
	if _, err := parseArgs([]string{"--agents", "/a", "--restore", "--handoff-check"}); !errors.As(err, &ue) {
		t.Errorf("--restore with --handoff-check: %v", err)
	}
	if _, err := parseArgs([]string{"--handoff-check"}); !errors.As(err, &ue) {
		t.Errorf("--handoff-check with no agents root: %v", err)
	}
}

// TestCheckHandoff: --handoff-check on an agents root reads node.json and
// the hand-off as the new image would, and answers the fixed line; with no
// hand-off, a bad one or none naming the lock, it exits 1 naming why; the
// hand-off is never removed.
func TestCheckHandoff(t *testing.T) {
	agents := t.TempDir()
	layout, err := host.NewLayout(agents)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &messages.NodeConfig{User: "ocx", Projects: map[string]messages.NodeProject{"demo": {Repository: "/srv/demo.fossil", URL: "http://127.0.0.1:8080/"}}}
	data, err := cfg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(layout.NodeJSON(), data, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() (int, string, string) {
		var out, errOut strings.Builder
		code := Main([]string{"--agents", agents, "--handoff-check"}, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := run(); code != 1 || !strings.Contains(errOut, "read the hand-off") {
		t.Errorf("no hand-off: exit %d, %q", code, errOut)
	}
	write := func(f handoffFile) {
		b, err := encodeHandoff(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(layout.Handoff(), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	good := handoffFile{Handoff: protocol.Handoff{OCX: protocol.HandoffKind, Version: protocol.HandoffVersion},
		FDs: map[string]int{fdLock: 3, fdPipeRead: 4, fdPipeWrite: 5}}
	write(good)
	if code, out, errOut := run(); code != 0 || out != protocol.HandoffCheckAnswer+"\n" || errOut != "" {
		t.Errorf("a good hand-off: exit %d, %q %q", code, out, errOut)
	}
	if _, err := os.Stat(layout.Handoff()); err != nil {
		t.Errorf("the check took the hand-off away: %v", err)
	}
	noLock := good
	noLock.FDs = map[string]int{fdPipeRead: 4}
	write(noLock)
	if code, _, errOut := run(); code != 1 || !strings.Contains(errOut, "no lock descriptor") {
		t.Errorf("no lock descriptor: exit %d, %q", code, errOut)
	}
	if err := os.WriteFile(layout.Handoff(), []byte(`{"ocx":"ocxd-handoff","version":99}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(); code != 1 || !strings.Contains(errOut, filepath.Base(layout.Handoff())) {
		t.Errorf("another version: exit %d, %q", code, errOut)
	}
	if err := os.WriteFile(layout.NodeJSON(), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	write(good)
	if code, _, errOut := run(); code != 1 || !strings.Contains(errOut, "node.json") {
		t.Errorf("a bad node.json: exit %d, %q", code, errOut)
	}
}

// TestCheckTarget: the old image's run of the check, on programs standing
// in for a release's ocxd: the right answer passes, a program that exits 1
// is a refusal naming its last line, and one from before the flag is
// exec'd unchecked.
func TestCheckTarget(t *testing.T) {
	dir := t.TempDir()
	opts, err := parseArgs([]string{"--agents", dir})
	if err != nil {
		t.Fatal(err)
	}
	d := &instance{opts: opts}
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := script("good", `[ "$9" = --handoff-check ] && echo '`+protocol.HandoffCheckAnswer+`'`)
	if err := d.checkTarget(context.Background(), good, nil); err != nil {
		t.Errorf("a program answering right: %v", err)
	}
	broken := script("broken", "echo 'ocxd: not a daemon' >&2; exit 1")
	var ref *refusal
	if err := d.checkTarget(context.Background(), broken, nil); !errors.As(err, &ref) || !strings.Contains(err.Error(), "exit status 1: ocxd: not a daemon") {
		t.Errorf("a program exiting 1: %v", err)
	}
	old := script("old", "echo 'ocxd: flag provided but not defined: -handoff-check' >&2; exit 2")
	if err := d.checkTarget(context.Background(), old, nil); !errors.Is(err, reexeccheck.ErrPredatesCheck) {
		t.Errorf("a program from before the check: %v", err)
	}
}
