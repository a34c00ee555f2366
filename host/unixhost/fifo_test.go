//go:build linux

package unixhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
)

// pipeRoot makes a root with a named pipe at ROOT/ocxd.
func pipeRoot(t testing.TB) (*Root, string) {
	t.Helper()
	dir := t.TempDir()
	root, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	p := filepath.Join(dir, "ocxd")
	if err := root.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return root, p
}

// runReader runs a reader until the test ends, sending each line on the
// returned channel.
func runReader(t testing.TB, r *PipeReader) <-chan string {
	t.Helper()
	lines := make(chan string, 1<<16)
	done := make(chan error, 1)
	go func() { done <- r.Run(func(l []byte) { lines <- string(l) }) }()
	t.Cleanup(func() {
		r.Close()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v after Close", err)
		}
	})
	return lines
}

func TestPipeNoReader(t *testing.T) {
	root, p := pipeRoot(t)
	start := time.Now()
	err := sendLine(root, p, "post /srv/demo.fossil abc")
	if !errors.Is(err, host.ErrNoReader) || !strings.Contains(err.Error(), p) {
		t.Fatalf("Send without a reader = %v", err)
	}
	// It did not wait for a reader: far less than the full-pipe bound.
	if time.Since(start) > 500*time.Millisecond {
		t.Fatalf("Send without a reader took %v", time.Since(start))
	}
	// A regular file or a link where the pipe should be is refused.
	reg := filepath.Join(root.Path(), "regular")
	os.WriteFile(reg, nil, 0o600)
	if err := sendLine(root, reg, "x"); err == nil {
		t.Fatal("Send wrote into a regular file")
	}
	if b, _ := os.ReadFile(reg); len(b) != 0 {
		t.Fatalf("the regular file got %q", b)
	}
	link := filepath.Join(root.Path(), "link")
	os.Symlink(p, link)
	if err := sendLine(root, link, "x"); err == nil || errors.Is(err, host.ErrNoReader) {
		t.Fatalf("Send through a link = %v", err)
	}
}

func TestPipeReaderSurvivesWriters(t *testing.T) {
	root, p := pipeRoot(t)
	r, err := OpenPipeReader(root, p)
	if err != nil {
		t.Fatal(err)
	}
	lines := runReader(t, r)
	// Writers come and go: each Send opens, writes and closes. The reader
	// never sees EOF, so every line arrives and Run keeps running.
	for i := range 200 {
		if err := sendLine(root, p, fmt.Sprintf("stop alice demo%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		if got := await(t, lines, "line"); got != fmt.Sprintf("stop alice demo%d", i) {
			t.Fatalf("line %d = %q", i, got)
		}
	}
	for _, bad := range []string{"two\nlines", strings.Repeat("x", host.PipeBuf)} {
		if err := sendLine(root, p, bad); err == nil {
			t.Fatalf("Send accepted %.20q", bad)
		}
	}
	if err := sendLine(root, p, strings.Repeat("y", host.PipeBuf-1)); err != nil {
		t.Fatalf("a line of PipeBuf bytes with its newline: %v", err)
	}
	if got := await(t, lines, "long line"); len(got) != host.PipeBuf-1 {
		t.Fatalf("long line arrived as %d bytes", len(got))
	}
}

// Many writers at once: every line arrives whole, none lost, none torn.
func TestPipeConcurrentWritersAtomic(t *testing.T) {
	root, p := pipeRoot(t)
	r, err := OpenPipeReader(root, p)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	count := 0
	sentinel := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- r.Run(func(l []byte) {
			if string(l) == "sentinel" {
				close(sentinel)
				return
			}
			mu.Lock()
			seen[string(l)]++
			count++
			mu.Unlock()
		})
	}()
	const writers, each = 16, 500
	// Lines of different lengths, up to nearly PIPE_BUF, so that a torn
	// write would show.
	pad := strings.Repeat("p", host.PipeBuf-64)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lw, err := OpenLineWriter(root, p)
			if err != nil {
				t.Error(err)
				return
			}
			defer lw.Close()
			lw.Wait = time.Minute
			for i := range each {
				line := fmt.Sprintf("w%d %d %s", w, i, pad[:(w*131+i*17)%len(pad)])
				if err := lw.WriteLine([]byte(line)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Every writer has written: a last line comes after all of theirs.
	if err := sendLineWaiting(root, p, "sentinel", time.Minute); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sentinel:
	case <-time.After(2 * time.Minute):
		t.Fatal("the last line never came")
	}
	r.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if count != writers*each || len(seen) != writers*each {
		t.Fatalf("read %d lines, %d distinct, want %d", count, len(seen), writers*each)
	}
	for w := range writers {
		for i := range each {
			line := fmt.Sprintf("w%d %d %s", w, i, pad[:(w*131+i*17)%len(pad)])
			if seen[line] != 1 {
				t.Fatalf("line w%d %d seen %d times", w, i, seen[line])
			}
		}
	}
}

func TestPipeFull(t *testing.T) {
	root, p := pipeRoot(t)
	// A reader that holds the pipe and never reads.
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	lw, err := OpenLineWriter(root, p)
	if err != nil {
		t.Fatal(err)
	}
	defer lw.Close()
	lw.Wait = 50 * time.Millisecond
	line := []byte(strings.Repeat("z", 1000))
	var werr error
	for range 10000 {
		if werr = lw.WriteLine(line); werr != nil {
			break
		}
	}
	if !errors.Is(werr, host.ErrPipeFull) {
		t.Fatalf("writing into a pipe nobody reads ended with %v, want ErrPipeFull", werr)
	}
	// Whatever was written is whole lines.
	buf := make([]byte, 1<<20)
	n, _ := unix.Read(fd, buf)
	if n == 0 || n%1001 != 0 {
		t.Fatalf("read %d bytes, not whole lines", n)
	}
	// The reader leaves: the writer says nobody reads.
	unix.Close(fd)
	fd = -1
	if err := lw.WriteLine([]byte("late")); !errors.Is(err, host.ErrNoReader) {
		t.Fatalf("write after the reader left = %v", err)
	}
}

func TestPipeReaderCloseUnblocks(t *testing.T) {
	root, p := pipeRoot(t)
	r, err := OpenPipeReader(root, p)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(func([]byte) {}) }()
	// Run is blocked in the poller with no writer but its own; Close ends it.
	r.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not unblock Run")
	}
}

func TestPipeReaderDropsOverlongLines(t *testing.T) {
	root, p := pipeRoot(t)
	r, err := OpenPipeReader(root, p)
	if err != nil {
		t.Fatal(err)
	}
	r.maxLine = 10
	lines := runReader(t, r)
	// A writer that ignores the protocol writes one long line in pieces.
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(fd, []byte("short\n"+strings.Repeat("x", 500)+"\nafter\n"))
	big := make([]byte, 600<<10)
	for i := range big {
		big[i] = 'b'
	}
	go func() {
		unix.Write(fd, big)
		unix.Write(fd, []byte("\nlast\n"))
		unix.Close(fd)
	}()
	for _, want := range []string{"short", "after", "last"} {
		if got := await(t, lines, want); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if r.Dropped() != 2 {
		t.Fatalf("Dropped = %d, want 2", r.Dropped())
	}
}

// The reader's descriptors survive an exec; lines written while the image
// is replaced wait in the pipe and none is lost.
func TestPipeReaderSurvivesExec(t *testing.T) {
	root, p := pipeRoot(t)
	dir := root.Path()
	readyP, rl := readyPipe(t, dir)
	out := filepath.Join(dir, "out")
	cmd := startHelper(t, "pipe", out, "HELPER_ROOT="+dir, "HELPER_PIPE="+p, "HELPER_READY="+readyP)
	// Write while the helper opens, execs and adopts: a line may find no
	// reader only before the first open.
	sent := 0
	for sent < 100 {
		if err := sendLine(root, p, fmt.Sprintf("line %d", sent)); err != nil {
			if errors.Is(err, host.ErrNoReader) && sent == 0 {
				continue
			}
			t.Fatalf("line %d: %v", sent, err)
		}
		sent++
	}
	if got := await(t, rl, "adoption"); got != fmt.Sprintf("adopted %d", cmd.Process.Pid) {
		t.Fatalf("helper said %q: %s", got, readFile(t, out))
	}
	for sent < 200 {
		if err := sendLine(root, p, fmt.Sprintf("line %d", sent)); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	eventually(t, "the helper printed every line", func() bool {
		b, _ := os.ReadFile(out)
		return strings.Contains(string(b), "line 199\n")
	})
	cmd.Process.Signal(unix.SIGTERM)
	cmd.Wait()
	got := readFile(t, out)
	for i := range 200 {
		if !strings.Contains(got, fmt.Sprintf("line %d\n", i)) {
			t.Fatalf("line %d lost; output:\n%s", i, got)
		}
	}
	if !strings.Contains(got, "lines 200 err <nil>") {
		t.Fatalf("helper output:\n%s", got)
	}
}

func TestAdoptPipeReaderRefusesStrangers(t *testing.T) {
	root, p := pipeRoot(t)
	r, err := OpenPipeReader(root, p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := os.Create(filepath.Join(root.Path(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rfd, _, err := r.KeepOnExec()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AdoptPipeReader(rfd, int(f.Fd()), p, nil); err == nil {
		t.Fatal("adopted a pipe and a file as one pipe")
	}
	var pe *fs.PathError
	if _, err := OpenPipeReader(root, filepath.Join(root.Path(), "file")); !errors.As(err, &pe) {
		t.Fatalf("OpenPipeReader on a regular file = %v", err)
	}
}

// Stop ends Run and keeps the pipe open; the start of a line read but not
// yet complete, and the lines still in the pipe, reach the reader that
// adopts the descriptors.
func TestPipeReaderStopHandsOver(t *testing.T) {
	root, p := pipeRoot(t)
	r, err := OpenPipeReader(root, p)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	done := make(chan error, 1)
	go func() { done <- r.Run(func(l []byte) { got <- string(l) }) }()
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// A writer that splits a line (only one ignoring the protocol does).
	unix.Write(fd, []byte("first\npost /srv/de"))
	if l := await(t, got, "first line"); l != "first" {
		t.Fatalf("got %q", l)
	}
	eventually(t, "the partial line read", func() bool {
		var n int
		rc, _ := r.r.SyscallConn()
		rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
		return n == 0
	})
	rest := r.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if string(rest) != "post /srv/de" {
		t.Fatalf("Stop returned %q", rest)
	}
	// Lines written now wait in the pipe.
	unix.Write(fd, []byte("mo.fossil abc\nsecond\n"))
	rfd, wfd, err := r.KeepOnExec()
	if err != nil {
		t.Fatal(err)
	}
	// In one process, the adopting reader gets copies of the descriptors.
	rfd2, _ := unix.Dup(rfd)
	wfd2, _ := unix.Dup(wfd)
	r.Close()
	r2, err := AdoptPipeReader(rfd2, wfd2, p, rest)
	if err != nil {
		t.Fatal(err)
	}
	lines := runReader(t, r2)
	for _, want := range []string{"post /srv/demo.fossil abc", "second"} {
		if l := await(t, lines, want); l != want {
			t.Fatalf("got %q, want %q", l, want)
		}
	}
}

// Reopen goes on reading a stopped reader's pipe in the same process (a
// re-exec that did not happen): lines written meanwhile wait in the pipe,
// and the split line is completed.
func TestPipeReaderReopen(t *testing.T) {
	root, p := pipeRoot(t)
	r, err := OpenPipeReader(root, p)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	done := make(chan error, 1)
	go func() { done <- r.Run(func(l []byte) { got <- string(l) }) }()
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Write(fd, []byte("first\npost /srv/de"))
	if l := await(t, got, "first line"); l != "first" {
		t.Fatalf("got %q", l)
	}
	eventually(t, "the partial line read", func() bool {
		var n int
		rc, _ := r.r.SyscallConn()
		rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
		return n == 0
	})
	rest := r.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	unix.Write(fd, []byte("mo.fossil abc\nsecond\n"))
	r2, err := r.Reopen(rest)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	lines := runReader(t, r2)
	for _, want := range []string{"post /srv/demo.fossil abc", "second"} {
		if l := await(t, lines, want); l != want {
			t.Fatalf("got %q, want %q", l, want)
		}
	}
}

// OpenFIFO opens a pipe nobody writes without waiting, reads it with a
// deadline, and refuses a file or a link where the pipe should be.
func TestRootOpenFIFO(t *testing.T) {
	root, p := pipeRoot(t)
	f, err := root.OpenFIFO(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("post\n")
	f.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	buf := make([]byte, 16)
	if n, err := f.Read(buf); err != nil || string(buf[:n]) != "post\n" {
		t.Fatalf("Read = %q %v", buf[:n], err)
	}
	// The writer still holds it: no end, the deadline.
	if _, err := f.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with a writer and nothing written = %v", err)
	}
	w.Close()
	file := filepath.Join(root.Path(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root.Path(), "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{file, link} {
		if g, err := root.OpenFIFO(bad); err == nil || !strings.Contains(err.Error(), bad) {
			if g != nil {
				g.Close()
			}
			t.Errorf("OpenFIFO(%s) = %v", bad, err)
		}
	}
}
