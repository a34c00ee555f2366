package harness

import (
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Lock is a real `fossil sql` holding a transaction on a repository, as
// another process on a node does (a server's handler writing a post, a
// backoffice run, which takes the write lock even with --nolease), until
// the test releases it.
type Lock struct {
	t        testing.TB
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *syncBuffer
	released bool
}

// The transactions HoldLock takes: a writer in the middle of its
// transaction (RESERVED: readers go on, other writers wait), and an
// exclusive one, which in rollback-journal mode keeps readers out too.
const (
	WriteLock     = "BEGIN IMMEDIATE;\nUPDATE config SET mtime=mtime WHERE name='project-code';\n"
	ExclusiveLock = "BEGIN EXCLUSIVE;\nUPDATE config SET mtime=mtime WHERE name='project-code';\n"
)

// HoldLock starts `fossil sql` on repo, runs begin (WriteLock or
// ExclusiveLock) and returns once fossil has said it holds the transaction.
// The lock lasts until Release, which cleanup calls too.
func HoldLock(t testing.TB, repo, begin string) *Lock {
	t.Helper()
	cmd := exec.Command(FossilPath, "sql", "-R", repo)
	cmd.Env, cmd.Dir = FossilEnv(filepath.Dir(repo), "admin"), filepath.Dir(repo)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	l := &Lock{t: t, cmd: cmd, in: in, out: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = l.out, l.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("harness: start fossil sql: %v", err)
	}
	t.Cleanup(l.Release)
	if _, err := io.WriteString(in, begin+"SELECT 'held';\n"); err != nil {
		t.Fatalf("harness: fossil sql: %v", err)
	}
	l.waitFor("held")
	return l
}

// Release commits the transaction, waits until fossil has said so, and ends
// fossil sql. Again is harmless. Call it from the test's goroutine only.
func (l *Lock) Release() {
	l.t.Helper()
	if l.released {
		return
	}
	l.released = true
	if _, err := io.WriteString(l.in, "COMMIT;\nSELECT 'released';\n"); err == nil {
		l.waitFor("released")
	}
	l.in.Close()
	if err := l.cmd.Wait(); err != nil {
		l.t.Errorf("harness: fossil sql holding the lock: %v\n%s", err, l.out.String())
	}
}

// waitFor waits until fossil sql has printed word, quoted as its shell
// prints a text, on a line of its own.
func (l *Lock) waitFor(word string) {
	l.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains("\n"+l.out.String(), "\n'"+word+"'\n") {
		if time.Now().After(deadline) {
			l.t.Fatalf("harness: fossil sql did not say %s in 30 s:\n%s", word, l.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuffer is a buffer a process writes into while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
