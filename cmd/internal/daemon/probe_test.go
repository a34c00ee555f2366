package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/protocol"
)

// probeScript writes an ocxd stand-in that answers version v to
// --handoff-version and counts its runs in the file asked.
func probeScript(t *testing.T, path, asked string, v int) {
	t.Helper()
	script := "#!/bin/sh\necho x >> " + asked + "\necho " + strconv.Itoa(v) + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func runs(t *testing.T, asked string) int {
	t.Helper()
	data, err := os.ReadFile(asked)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// An early probe's answer serves the exec once, for the very file it asked;
// a file changed since, or no early probe, is probed at the exec.
func TestEarlyProbe(t *testing.T) {
	dir := t.TempDir()
	target, asked := filepath.Join(dir, "ocxd"), filepath.Join(dir, "asked")
	probeScript(t, target, asked, protocol.HandoffVersion)
	ctx := context.Background()
	var p earlyProbe
	defer p.wait()

	p.start(target)
	p.start(target) // one under way already: not asked twice
	if err := p.check(ctx, target); err != nil {
		t.Fatalf("the early probe's answer: %v", err)
	}
	if n := runs(t, asked); n != 1 {
		t.Fatalf("the ocxd was asked %d times, want once", n)
	}
	// The answer served one exec: the next is probed again.
	if err := p.check(ctx, target); err != nil || runs(t, asked) != 2 {
		t.Fatalf("a second exec: %v after %d asks, want a probe of its own", err, runs(t, asked))
	}

	// The file replaced after the early probe: the exec asks the new one,
	// which reads another hand-off version.
	p.start(target)
	p.wait()
	other := filepath.Join(dir, "ocxd.new")
	probeScript(t, other, asked, protocol.HandoffVersion+1)
	if err := os.Rename(other, target); err != nil {
		t.Fatal(err)
	}
	err := p.check(ctx, target)
	if err == nil || !strings.Contains(err.Error(), "reads hand-off version") {
		t.Fatalf("the exec after the file changed: %v, want the new file's refusal", err)
	}
	if n := runs(t, asked); n != 4 {
		t.Fatalf("the ocxd was asked %d times, want 4 (the changed file asked again)", n)
	}

	// An early probe of another target serves nothing.
	p.start(target)
	if err := p.check(ctx, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a probe of a missing ocxd passed")
	}
}
