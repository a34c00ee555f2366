package daemon

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages/protocol"
)

// earlyProbe asks the release's ocxd for its hand-off version as soon as a
// re-exec is asked for (its line read, or HUP), while the node pauses its
// inputs and gathers its actors' state, so that the exec does not wait for
// the probe after them. Exec takes the answer only for the very file that
// was asked: the same device and inode, size and modification time as when
// the probe began, asked at most a while ago; anything else is probed again.
type earlyProbe struct {
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

// start probes target in the background, unless a probe of it is under way.
func (p *earlyProbe) start(target string) {
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

// check is the probe of target for the exec: the early one's answer when it
// was of this very file and is fresh, else a probe now.
func (p *earlyProbe) check(ctx context.Context, target string) error {
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

// wait returns once no early probe runs.
func (p *earlyProbe) wait() { p.wg.Wait() }

// sameFile says whether a and b are the same file, unchanged.
func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
}

// execTimeout bounds the probe of the release's ocxd, as the host checks
// bound it.
const execTimeout = host.ProbeTimeout

// probe asks the target which hand-off version it reads.
func probe(ctx context.Context, target string) error {
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
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
