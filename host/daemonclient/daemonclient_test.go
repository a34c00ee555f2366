package daemonclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
)

func TestRelease(t *testing.T) {
	got, err := Release(&messages.NodeConfig{Release: "/var/lib/ocx/release"})
	if err != nil || got != "/var/lib/ocx/release/current" {
		t.Fatalf("with a release root: %q %v", got, err)
	}
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	if got, err := Release(nil); err != nil || got != filepath.Dir(exe) {
		t.Fatalf("a developer's build: %q %v, want %s", got, err, filepath.Dir(exe))
	}
}

// TestEnsureNamesWhatIsMissing: with no daemon and no program to start, the
// error names the program; with a program that never reads the pipe, the
// wait ends naming the pipe.
func TestEnsureNamesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	l, err := host.NewLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "no-ocxd")
	if _, err := Ensure(context.Background(), l, missing, time.Second); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Ensure with no program: %v, want an error naming %s", err, missing)
	}
	idle := filepath.Join(dir, "idle-ocxd")
	if err := os.WriteFile(idle, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	started, err := Ensure(context.Background(), l, idle, 300*time.Millisecond)
	if !started || err == nil || !strings.Contains(err.Error(), l.Pipe()) {
		t.Fatalf("Ensure with a program that reads nothing: started %v, %v; want it started and an error naming %s", started, err, l.Pipe())
	}
	if pid, err := PID(l); err != nil || pid != 0 {
		t.Fatalf("PID with no daemon: %d %v", pid, err)
	}
	if err := Send(l, []pipe.Line{pipe.ReexecLine{}}); !errors.Is(err, host.ErrNoReader) && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Send with nobody reading: %v", err)
	}
}
