//go:build linux

package unixhost

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
)

// TestLock: at a path nobody holds yet, one holder at a time, a probe
// (through /proc/locks, taking no lock) that tells, and a release that frees
// it.
func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ocxd.lock")
	if _, held, err := LockHolder(path); err != nil || held {
		t.Fatalf("held before any Acquire = %v %v", held, err)
	}
	k, err := AcquireLock(path)
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	if pid, held, err := LockHolder(path); err != nil || !held || pid != os.Getpid() {
		t.Fatalf("holder while held = %d %v %v, want this process", pid, held, err)
	}
	if _, err := AcquireLock(path); !errors.Is(err, host.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a second Acquire = %v, want ErrLocked naming the path", err)
	}
	if err := k.Release(); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if _, held, err := LockHolder(path); err != nil || held {
		t.Fatalf("held after Release = %v %v", held, err)
	}
	k, err = AcquireLock(path)
	if err != nil {
		t.Fatalf("Acquire after Release = %v", err)
	}
	k.Release()
}

// TestLineWriter: a line finds no reader until one holds the pipe, then
// every whole line arrives, and a line that is two or too long is refused.
func TestLineWriter(t *testing.T) {
	root, path := pipeRoot(t)
	if err := sendLine(root, path, "post /srv/demo.fossil abc"); !errors.Is(err, host.ErrNoReader) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Send without a reader = %v, want ErrNoReader naming the path", err)
	}
	lines, stop := listenLines(t, root, path)
	defer stop()
	want := []string{"post /srv/demo.fossil abc", "stop alice demo", strings.Repeat("x", host.PipeBuf-1)}
	for _, l := range want {
		if err := sendLine(root, path, l); err != nil {
			t.Fatalf("Send with a reader = %v", err)
		}
	}
	for _, bad := range []string{"two\nlines", strings.Repeat("y", host.PipeBuf)} {
		err := sendLine(root, path, bad)
		if err == nil || errors.Is(err, host.ErrNoReader) {
			t.Fatalf("Send(%.10q...) = %v, want a refusal", bad, err)
		}
	}
	if err := sendLine(root, path, strings.Repeat("y", host.PipeBuf)); !errors.Is(err, host.ErrLineTooLong) {
		t.Fatalf("an over-long line = %v, want ErrLineTooLong", err)
	}
	got := lines()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the reader got %d lines %.80q, want %.80q", len(got), got, want)
	}
}

// TestRootFiles: writes below an agents root go only below it, into
// directories made, whole; a named pipe is made once and never over a file.
func TestRootFiles(t *testing.T) {
	root := t.TempDir()
	f, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
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
	if b, err := f.ReadFile(filepath.Join(ws, "binding.json"), SmallFile); err != nil || !bytes.Equal(b, []byte(`{"a":2}`)) {
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
	if _, err := f.ReadFile(rec, SmallFile); err == nil {
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
	if _, err := f.ReadFile(filepath.Join(ws, "binding.json"), SmallFile); err == nil {
		t.Fatal("RemoveAll left a file")
	}
}

// sendLine writes one line as the hook does: open without waiting for a
// reader, one write, close.
func sendLine(root *Root, path, line string) error {
	return sendLineWaiting(root, path, line, 0)
}

func sendLineWaiting(root *Root, path, line string, wait time.Duration) error {
	w, err := OpenLineWriter(root, path)
	if err != nil {
		return err
	}
	w.Wait = wait
	err = w.WriteLine([]byte(line))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// listenLines holds the pipe open with a reader, returning what waits for
// three lines and returns all it got, and what stops the reader.
func listenLines(t *testing.T, root *Root, p string) (lines func() []string, stop func()) {
	r, err := OpenPipeReader(root, p)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(func(l []byte) {
			mu.Lock()
			got = append(got, string(l))
			mu.Unlock()
		})
	}()
	lines = func() []string {
		eventually(t, "three lines", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= 3
		})
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	return lines, func() {
		r.Close()
		<-done
	}
}
