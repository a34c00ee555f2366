package hosttest

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host"
)

// LockerContract checks what the daemon relies on of a Locker, at a path
// nobody holds yet: one holder at a time, a probe that tells, and a release
// that frees it.
func LockerContract(t *testing.T, l host.Locker, path string) {
	t.Helper()
	if held, err := l.Held(path); err != nil || held {
		t.Fatalf("Held before any Acquire = %v %v", held, err)
	}
	k, err := l.Acquire(path)
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	if held, err := l.Held(path); err != nil || !held {
		t.Fatalf("Held while held = %v %v", held, err)
	}
	if _, err := l.Acquire(path); !errors.Is(err, host.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a second Acquire = %v, want ErrLocked naming the path", err)
	}
	if err := k.Release(); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if held, err := l.Held(path); err != nil || held {
		t.Fatalf("Held after Release = %v %v", held, err)
	}
	k, err = l.Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after Release = %v", err)
	}
	k.Release()
}

// PipeContract checks a Pipe at path: listen makes a reader hold the pipe
// and returns what stops it, and lines returns what the reader got.
func PipeContract(t *testing.T, p host.Pipe, path string, listen func() (lines func() []string, stop func())) {
	t.Helper()
	if err := p.Send(path, "post /srv/demo.fossil abc"); !errors.Is(err, host.ErrNoReader) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Send without a reader = %v, want ErrNoReader naming the path", err)
	}
	lines, stop := listen()
	defer stop()
	want := []string{"post /srv/demo.fossil abc", "stop alice demo", strings.Repeat("x", host.PipeBuf-1)}
	for _, l := range want {
		if err := p.Send(path, l); err != nil {
			t.Fatalf("Send with a reader = %v", err)
		}
	}
	for _, bad := range []string{"two\nlines", strings.Repeat("y", host.PipeBuf)} {
		err := p.Send(path, bad)
		if err == nil || errors.Is(err, host.ErrNoReader) {
			t.Fatalf("Send(%.10q...) = %v, want a refusal", bad, err)
		}
	}
	if err := p.Send(path, strings.Repeat("y", host.PipeBuf)); !errors.Is(err, host.ErrLineTooLong) {
		t.Fatalf("an over-long line = %v, want ErrLineTooLong", err)
	}
	got := lines()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the reader got %d lines %.80q, want %.80q", len(got), got, want)
	}
}

// FilesContract checks Files below root (an existing, empty agents root).
func FilesContract(t *testing.T, f host.Files, root string) {
	t.Helper()
	ws := filepath.Join(root, "alice", "projects", "demo")
	if err := f.WriteFile(filepath.Join(ws, "binding.json"), []byte("{}"), 0o644); err == nil {
		t.Fatal("WriteFile into a directory never made succeeded")
	}
	if err := f.MkdirAll(filepath.Join(ws, "session", "listening"), 0o700); err != nil {
		t.Fatalf("MkdirAll = %v", err)
	}
	if err := f.WriteFile(filepath.Join(ws, "binding.json"), []byte(`{"a":1}`), 0o644); err != nil {
		t.Fatalf("WriteFile = %v", err)
	}
	if err := f.WriteFile(filepath.Join(ws, "binding.json"), []byte(`{"a":2}`), 0o644); err != nil {
		t.Fatalf("WriteFile again = %v", err)
	}
	if b, err := f.ReadFile(filepath.Join(ws, "binding.json")); err != nil || !bytes.Equal(b, []byte(`{"a":2}`)) {
		t.Fatalf("ReadFile = %q %v", b, err)
	}
	if err := f.Mkfifo(filepath.Join(ws, "session", "wake"), 0o600); err != nil {
		t.Fatalf("Mkfifo = %v", err)
	}
	if err := f.Mkfifo(filepath.Join(ws, "session", "wake"), 0o600); err != nil {
		t.Fatalf("Mkfifo again = %v", err)
	}
	if err := f.Mkfifo(filepath.Join(ws, "binding.json"), 0o600); err == nil {
		t.Fatal("Mkfifo over a file succeeded")
	}
	rec := filepath.Join(ws, "session", "listening", "branch-trunk")
	if err := f.WriteFile(rec, []byte("branch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(rec); err != nil {
		t.Fatalf("Remove = %v", err)
	}
	if _, err := f.ReadFile(rec); err == nil {
		t.Fatal("read a removed file")
	}
	if err := f.Remove(rec); err != nil {
		t.Fatalf("Remove of what is gone = %v", err)
	}
	for _, p := range []string{"relative/x", filepath.Join(filepath.Dir(root), "elsewhere"), root, filepath.Join(root, "..", "x")} {
		if err := f.WriteFile(p, []byte("x"), 0o600); err == nil {
			t.Fatalf("WriteFile(%q) outside the root succeeded", p)
		}
	}
	if err := f.RemoveAll(filepath.Join(root, "alice")); err != nil {
		t.Fatalf("RemoveAll = %v", err)
	}
	if _, err := f.ReadFile(filepath.Join(ws, "binding.json")); err == nil {
		t.Fatal("RemoveAll left a file")
	}
}
