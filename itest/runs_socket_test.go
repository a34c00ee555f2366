package itest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages/runmsg"
	"github.com/ocx-go/ocx/messages/wire"
)

// waitEndedAndReleased waits for a run's ended on the record, then for the
// node to release it from its care, which it does once ended is written:
// a read between the two sees the run ended and in care.
func (n *testNode) waitEndedAndReleased(run string) {
	n.t.Helper()
	n.waitFor("the run's ended, and its release from the node's care", func() bool {
		_, err := os.Stat(filepath.Join(n.agents, "ocxd.runs", run+".json"))
		return n.endedOf(run) != nil && os.IsNotExist(err)
	})
}

// TestRunsFromTheDaemonAreAFreshRead: the runs the daemon answers on its
// socket from its live run log (a runs ask, D66) are what `ocx run status
// --json` reads from the repository itself, for every run and for one
// named by a prefix, and follow the record after a start; an ask naming
// a project the node has not is refused naming it; and with the daemon
// killed (its socket's name left behind) the command reads the record
// itself and prints the same.
func TestRunsFromTheDaemonAreAFreshRead(t *testing.T) {
	needs(t, "ocx", "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
	waiting := n.result(admin, "run", "post", "--message", manualRun(node, "echo by hand"))
	done := n.result(admin, "run", "post", "--message", manualRun(node, "echo at once"))
	n.result(admin, "run", "start", done)
	n.waitEndedAndReleased(done)

	layout, err := host.NewLayout(n.agents)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(run string) *wire.Reply {
		t.Helper()
		a := wire.NewAsk(wire.AskRuns)
		a.Project, a.Run = "demo", run
		r, err := nodesock.Ask(context.Background(), layout, a, 10*time.Second)
		if err != nil {
			t.Fatalf("the daemon's runs: %v\nocxd.log:\n%s", err, n.daemonLog())
		}
		if r.Runs == nil {
			t.Fatalf("the daemon's reply to a runs ask holds no runs: %+v", r)
		}
		return r
	}
	fresh := func(args ...string) string {
		t.Helper()
		aside := layout.Socket() + ".aside"
		if err := os.Rename(layout.Socket(), aside); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(aside, layout.Socket())
		return n.must("", append([]string{"run", "status", "--json"}, args...)...).stdout
	}
	same := func(what, run string) {
		t.Helper()
		r := ask(run)
		live, _ := json.Marshal(*r.Runs)
		args := []string{}
		if run != "" {
			args = append(args, run)
		}
		read := strings.TrimSpace(fresh(args...))
		var want []runmsg.RunState
		if err := json.Unmarshal([]byte(read), &want); err != nil {
			t.Fatalf("%s: ocx run status --json: %v\n%s", what, err, read)
		}
		wantJSON, _ := json.Marshal(want)
		if string(live) != string(wantJSON) {
			t.Fatalf("%s: the daemon's runs differ from a fresh read\ndaemon: %s\nfresh:  %s", what, live, wantJSON)
		}
		if r.Receipts["demo"].Rcvid == 0 {
			t.Errorf("%s: the answer names no receipt it is current to: %+v", what, r.Receipts)
		}
	}
	same("every run", "")
	if rs := *ask("").Runs; len(rs) != 2 || rs[0].Run != waiting || rs[0].State != "waiting" || rs[1].Run != done || rs[1].State != "ended" {
		t.Errorf("the daemon's runs: %+v, want %s waiting then %s ended", rs, waiting, done)
	}
	same("one run by its prefix", waiting[:12])

	n.result(admin, "run", "start", waiting)
	n.waitEndedAndReleased(waiting)
	same("after a start", "")
	if rs := *ask(waiting).Runs; len(rs) != 1 || rs[0].State != "ended" {
		t.Errorf("the daemon's run after its start: %+v, want ended", rs)
	}

	a := wire.NewAsk(wire.AskRuns)
	a.Project = "nowhere"
	if _, err := nodesock.Ask(context.Background(), layout, a, 10*time.Second); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("a runs ask of a project the node has not: %v, want a refusal naming it", err)
	}

	// The daemon gone mid-life: its socket's name stays, nothing answers,
	// and the command reads the record itself.
	before := n.must("", "run", "status", "--json").stdout
	pid := n.daemonPID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the daemon to end", func() bool { return n.daemonPID() == 0 })
	if _, err := os.Lstat(layout.Socket()); err != nil {
		t.Fatalf("the killed daemon's socket name is gone (%v); the fallback is not tried", err)
	}
	if after := n.must("", "run", "status", "--json").stdout; after != before {
		t.Errorf("ocx run status without a daemon differs\nwith:    %s\nwithout: %s", before, after)
	}
}
