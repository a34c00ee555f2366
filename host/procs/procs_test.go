package procs

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/hosttest"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// TestProcsScan: a scan lists the processes naming the workspace, and one
// that cannot be read makes the answer an error, never "none".
func TestProcsScan(t *testing.T) {
	k := messages.WorkspaceKey{Login: "alice", Project: "main"}
	other := messages.WorkspaceKey{Login: "bob", Project: "main"}
	pt := &hosttest.ProcTable{}
	p := &Table{t: pt, argv: map[protocol.ProcID][]string{}}
	a := host.Process{ID: protocol.ProcID{PID: 10, Start: 1}, Argv: []string{"workspace", "serve", "alice/main"},
		Names: []host.Naming{{Verb: "serve", Key: k, Launch: "abc"}}}
	b := host.Process{ID: protocol.ProcID{PID: 11, Start: 1}, Names: []host.Naming{{Verb: "serve", Key: other}}}
	pt.Set(host.Table{Procs: []host.Process{a, b}})
	got, err := p.Scan(context.Background(), k)
	if err != nil || len(got) != 1 || got[0].Proc != a.ID || got[0].Launch != "abc" || got[0].Command != "workspace serve alice/main" {
		t.Fatalf("scan: %+v %v", got, err)
	}
	if argv, ok := p.ArgvOf(a.ID); !ok || len(argv) != 3 {
		t.Fatalf("argv kept: %q %v", argv, ok)
	}
	pt.Set(host.Table{Procs: []host.Process{b}, Unreadable: []host.Unreadable{{PID: 12, Err: "permission denied"}}})
	if got, err := p.Scan(context.Background(), k); err == nil || !strings.Contains(err.Error(), "12") {
		t.Fatalf("scan with an unreadable process: %+v %v, want an error naming it", got, err)
	}
	pt.SetErr(errors.New("no /proc"))
	if _, err := p.Scan(context.Background(), k); err == nil || !strings.Contains(err.Error(), "no /proc") {
		t.Fatalf("scan of a table that failed: %v", err)
	}
}

// TestProcsStarted: a process found in the table says when it started, its
// start ticks after the host's boot, so that a session found at start (a
// daemon restarted without a hand-off) counts its wall limit from its own
// start, not from the daemon's (D40). Our own process is checked against
// the real table and boot time.
func TestProcsStarted(t *testing.T) {
	boot := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	if got := startedAt(boot, 250); !got.Equal(boot.Add(2500 * time.Millisecond)) {
		t.Errorf("250 ticks after boot: %s", got)
	}
	if got := startedAt(time.Time{}, 250); !got.IsZero() {
		t.Errorf("with no boot time: %s, want zero", got)
	}
	b, err := unixhost.BootTime()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	st, err := host.ParseStat(data)
	if err != nil {
		t.Fatal(err)
	}
	p := &Table{boot: b, argv: map[protocol.ProcID][]string{}}
	k := messages.WorkspaceKey{Login: "alice", Project: "main"}
	info := p.info(host.Process{ID: protocol.ProcID{PID: os.Getpid(), Start: st.Start}}, host.Naming{Verb: "serve", Key: k})
	if age := time.Since(info.Started); age < 0 || age > 10*time.Minute {
		t.Errorf("this test's process started %s ago, by the table (%s)", age, info.Started)
	}
}
