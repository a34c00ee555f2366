package reexeccheck

import (
	"context"
	"errors"
	"os"
	"os/exec"
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
	var p Early
	defer p.Wait()

	p.Start(target)
	p.Start(target) // one under way already: not asked twice
	if err := p.Check(ctx, target); err != nil {
		t.Fatalf("the early probe's answer: %v", err)
	}
	if n := runs(t, asked); n != 1 {
		t.Fatalf("the ocxd was asked %d times, want once", n)
	}
	// The answer served one exec: the next is probed again.
	if err := p.Check(ctx, target); err != nil || runs(t, asked) != 2 {
		t.Fatalf("a second exec: %v after %d asks, want a probe of its own", err, runs(t, asked))
	}

	// The file replaced after the early probe: the exec asks the new one,
	// which reads another hand-off version.
	p.Start(target)
	p.Wait()
	other := filepath.Join(dir, "ocxd.new")
	probeScript(t, other, asked, protocol.HandoffVersion+1)
	if err := os.Rename(other, target); err != nil {
		t.Fatal(err)
	}
	err := p.Check(ctx, target)
	if err == nil || !strings.Contains(err.Error(), "reads hand-off version") {
		t.Fatalf("the exec after the file changed: %v, want the new file's refusal", err)
	}
	if n := runs(t, asked); n != 4 {
		t.Fatalf("the ocxd was asked %d times, want 4 (the changed file asked again)", n)
	}

	// An early probe of another target serves nothing.
	p.Start(target)
	if err := p.Check(ctx, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a probe of a missing ocxd passed")
	}
}

// exitErr is how a program that exited with code ended, as exec.Cmd.Run
// returns it.
func exitErr(t *testing.T, code string) error {
	t.Helper()
	err := exec.Command("/bin/sh", "-c", "exit "+code).Run()
	if err == nil {
		t.Fatal("no exit error")
	}
	return err
}

// TestJudge: only the fixed answer passes; a program that failed is
// refused naming its exit status and its last line of standard error; a
// release from before the flag is told apart by Go's own refusal of it.
func TestJudge(t *testing.T) {
	if err := judge("/r/ocxd", nil, []byte(protocol.HandoffCheckAnswer+"\n"), nil); err != nil {
		t.Errorf("the fixed answer: %v", err)
	}
	err := judge("/r/ocxd", exitErr(t, "1"), nil, []byte("starting\nocxd: cannot run as the daemon\n\n"))
	if err == nil || !strings.Contains(err.Error(), "/r/ocxd --handoff-check: exit status 1: ocxd: cannot run as the daemon") {
		t.Errorf("a program that exits 1: %v", err)
	}
	if err := judge("/r/ocxd", exitErr(t, "1"), nil, nil); err == nil || !strings.Contains(err.Error(), "exit status 1: (it wrote nothing") {
		t.Errorf("a program that exits 1 saying nothing: %v", err)
	}
	if err := judge("/r/ocxd", nil, []byte("ok\n"), nil); err == nil || !strings.Contains(err.Error(), `answered "ok", not`) {
		t.Errorf("another answer: %v", err)
	}
	old := []byte("ocxd: flag provided but not defined: -handoff-check\nusage: ocxd --agents AGENTS\n")
	if err := judge("/r/ocxd", exitErr(t, "2"), nil, old); !errors.Is(err, ErrPredatesCheck) {
		t.Errorf("a release from before the check: %v", err)
	}
	if err := judge("/r/ocxd", exitErr(t, "1"), nil, old); err == nil || errors.Is(err, ErrPredatesCheck) {
		t.Errorf("the words with another exit status: %v", err)
	}
	var tail tailBuffer
	tail.Write([]byte(strings.Repeat("x", 3*checkTail)))
	tail.Write([]byte("\nthe last\n"))
	if len(tail.b) != checkTail || lastLine(tail.b) != "the last" {
		t.Errorf("the tail kept: %d bytes, last line %q", len(tail.b), lastLine(tail.b))
	}
}
