package procs

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// Table is the process table as the actors ask it (actors.WorkspaceProcs):
// every process that names a workspace, read from host's table (the real
// one, unixhost's, reads through its index of the kernel's process events
// when it could subscribe, by a full scan otherwise).
type Table struct {
	t host.ProcTable
	// boot is when the host booted (zero when unknown): a process's start
	// time in clock ticks since then is when it started, from which a
	// session's wall limit counts (D40).
	boot time.Time

	mu   sync.Mutex
	argv map[protocol.ProcID][]string
}

// NewTable reads t; boot is when the host booted, zero when unknown.
func NewTable(t host.ProcTable, boot time.Time) *Table {
	return &Table{t: t, boot: boot, argv: map[protocol.ProcID][]string{}}
}

// maxArgvKept bounds the command lines remembered for refusal notes.
const maxArgvKept = 4096

// Scan returns every process that names w. A process that might name it
// and could not be read makes the answer unknown: an error, never "none".
func (p *Table) Scan(ctx context.Context, w messages.WorkspaceKey) ([]protocol.ProcInfo, error) {
	tab, err := p.t.Scan()
	if err != nil {
		return nil, fmt.Errorf("read the process table: %w", err)
	}
	k := w
	v := tab.Naming(k)
	if v.Named == host.Unknown {
		return nil, fmt.Errorf("read the process table: %s", v)
	}
	var out []protocol.ProcInfo
	for _, pr := range tab.Procs {
		for _, n := range pr.Names {
			if n.Key == k && !n.Unsure {
				out = append(out, p.info(pr, n))
				break
			}
		}
	}
	return out, nil
}

// Found lists every process naming a workspace of the agents root, for the
// daemon's start (Boot), with the release directory each runs, and the
// look-alikes, which are not adopted (D45).
func (p *Table) Found(rel *Releases) ([]protocol.ProcInfo, map[protocol.ProcID]string, []host.LookAlike, error) {
	tab, err := p.t.Scan()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read the process table: %w", err)
	}
	var out []protocol.ProcInfo
	dirs := map[protocol.ProcID]string{}
	for _, pr := range tab.Procs {
		for _, n := range pr.Names {
			if n.Unsure {
				continue
			}
			pi := p.info(pr, n)
			out = append(out, pi)
			if d := releaseDir(pr, rel); d != "" {
				dirs[pi.Proc] = d
			}
		}
	}
	return out, dirs, tab.LookAlikes, nil
}

// releaseDir is the directory of the release a process runs.
func releaseDir(pr host.Process, rel *Releases) string {
	switch {
	case pr.Release == "":
		return ""
	case filepath.IsAbs(pr.Release):
		return pr.Release
	case rel.root != "":
		return filepath.Join(rel.root, "releases", pr.Release)
	}
	return ""
}

func (p *Table) info(pr host.Process, n host.Naming) protocol.ProcInfo {
	id := pr.ID
	p.mu.Lock()
	if len(p.argv) >= maxArgvKept {
		p.argv = map[protocol.ProcID][]string{}
	}
	p.argv[id] = pr.Argv
	p.mu.Unlock()
	return protocol.ProcInfo{
		Proc:      id,
		Workspace: n.Key,
		Verb:      string(n.Verb),
		Launch:    n.Launch,
		StartedBy: pr.Origin,
		Started:   startedAt(p.boot, id.Start),
		Command:   messages.ClipText(messages.CleanText(strings.Join(pr.Argv, " ")), 1024),
	}
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's start
// time: 100 on every Linux the daemon runs on (sysconf(_SC_CLK_TCK)).
const clockTicks = 100

// startedAt is when a process that started ticks after boot started; zero
// when the boot time is unknown.
func startedAt(boot time.Time, ticks uint64) time.Time {
	if boot.IsZero() || ticks == 0 {
		return time.Time{}
	}
	return boot.Add(time.Duration(ticks) * (time.Second / clockTicks)).UTC()
}

// ArgvOf is a process's command line as a scan last read it.
func (p *Table) ArgvOf(id protocol.ProcID) ([]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.argv[id]
	return a, ok
}
