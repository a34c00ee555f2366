// Package reexeccheck checks a release's ocxd before the daemon execs it
// (D73): Early asks its hand-off version as soon as a re-exec is asked
// for, and Run has it check the very hand-off written.
package reexeccheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages/protocol"
)

// Early asks the release's ocxd for its hand-off version as soon as a
// re-exec is asked for (its line read, or HUP), while the node pauses its
// inputs and gathers its actors' state, so that the exec does not wait for
// the probe after them. Exec takes the answer only for the very file that
// was asked: the same device and inode, size and modification time as when
// the probe began, asked at most a while ago; anything else is probed again.
type Early struct {
	mu  sync.Mutex
	run *probeRun
	wg  sync.WaitGroup
}

type probeRun struct {
	target string
	asked  time.Time
	file   os.FileInfo // the target as it was when the probe began
	done   chan struct{}
	err    error
}

// probeFresh bounds how old an early probe's answer may be when the exec
// takes it.
const probeFresh = 30 * time.Second

// Start probes target in the background, unless a probe of it is under way.
func (p *Early) Start(target string) {
	fi, err := os.Stat(target)
	if err != nil {
		return // the exec finds the target missing and says so
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.run; r != nil && r.target == target && sameFile(r.file, fi) {
		select {
		case <-r.done:
		default:
			return // under way
		}
	}
	r := &probeRun{target: target, asked: time.Now(), file: fi, done: make(chan struct{})}
	p.run = r
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		r.err = probe(context.Background(), target)
		close(r.done)
	}()
}

// Check is the probe of target for the exec: the early one's answer when it
// was of this very file and is fresh, else a probe now.
func (p *Early) Check(ctx context.Context, target string) error {
	p.mu.Lock()
	r := p.run
	p.run = nil // an answer serves one exec
	p.mu.Unlock()
	if r != nil && r.target == target && time.Since(r.asked) < probeFresh {
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if fi, err := os.Stat(target); err == nil && sameFile(r.file, fi) {
			return r.err
		}
	}
	return probe(ctx, target)
}

// Wait returns once no early probe runs.
func (p *Early) Wait() { p.wg.Wait() }

// sameFile says whether a and b are the same file, unchanged.
func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
}

// timeout bounds the probe of the release's ocxd and its check, as the
// host's checks bound them.
const timeout = host.ProbeTimeout

// probe asks the target which hand-off version it reads.
func probe(ctx context.Context, target string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, target, "--handoff-version")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("ask %s for its hand-off version: %w", target, err)
	}
	v, err := strconv.Atoi(string(bytes.TrimSpace(out)))
	if err != nil || v != protocol.HandoffVersion {
		return fmt.Errorf("%s reads hand-off version %q, not %d", target, bytes.TrimSpace(out), protocol.HandoffVersion)
	}
	return nil
}

// ErrPredatesCheck says the release's ocxd was built before
// --handoff-check: Go's flag package refused the flag by name. Such a
// release is exec'd unchecked, as before the check; should its daemon end
// before it records its outcome, the next ensure rolls it back.
var ErrPredatesCheck = errors.New("the release's ocxd predates --handoff-check")

// checkTail bounds what is kept of the check's output.
const checkTail = 4096

// judge decides the check from how the program ended (err, as
// exec.Cmd.Run returns it) and what it wrote.
func judge(program string, err error, stdout, stderr []byte) error {
	var exit *exec.ExitError
	switch {
	case err == nil && string(bytes.TrimSpace(stdout)) == protocol.HandoffCheckAnswer:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 2 && bytes.Contains(stderr, []byte("flag provided but not defined: -handoff-check")):
		return ErrPredatesCheck
	case err != nil:
		return fmt.Errorf("%s --handoff-check: %v: %s", program, err, lastLine(stderr))
	}
	return fmt.Errorf("%s --handoff-check answered %q, not %q", program, shorten(string(bytes.TrimSpace(stdout))), protocol.HandoffCheckAnswer)
}

// lastLine is the last line a program wrote that holds anything.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return "(it wrote nothing on its standard error)"
	}
	return shorten(last)
}

func shorten(s string) string {
	if len(s) > 300 {
		return strings.ToValidUTF8(s[:300], "") + "..."
	}
	return s
}

// tailBuffer keeps the last checkTail bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > checkTail {
		t.b = append(t.b[:0], t.b[len(t.b)-checkTail:]...)
	}
	return len(p), nil
}

// Run runs target's check, the command line argv (the exec's, with
// --handoff-check), on the hand-off written, bounded by Timeout: nil when
// it answered protocol.HandoffCheckAnswer, ErrPredatesCheck, or why it
// cannot take the hand-off over.
func Run(ctx context.Context, target string, argv []string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, target, argv[1:]...)
	cmd.Env = os.Environ()
	var stdout, stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("%w (after %s)", err, timeout)
	}
	return judge(target, err, stdout.b, stderr.b)
}
