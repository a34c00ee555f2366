package itest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// capsOf is login's capabilities on the node's project, as Fossil's user
// table holds them.
func (n *testNode) capsOf(login string) string {
	n.t.Helper()
	out, err := n.srv.Fossil("sql", "-R", n.srv.Repo, "SELECT 'caps=' || cap FROM user WHERE login='"+login+"'")
	if err != nil {
		n.t.Fatalf("read %s's capabilities: %v\n%s", login, err, out)
	}
	_, caps, ok := strings.Cut(strings.TrimSpace(out), "caps=")
	if !ok {
		n.t.Fatalf("no user %s: %q", login, out)
	}
	return strings.Trim(caps, "'")
}

// spawnedOf lists the spawned records the node keeps for login's
// workspace (D76).
func (n *testNode) spawnedOf(login string) []string {
	n.t.Helper()
	entries, err := os.ReadDir(filepath.Join(n.agents, login, "held", "demo", "spawned"))
	if err != nil && !os.IsNotExist(err) {
		n.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestResponseOfASessionEndedWhileNoDaemonRan is issue 38 item 5 (seed 001
// E2, E5; D76) on a real fossil server, daemon and sandboxed session: a
// record create made, whose daemon is killed with KILL and whose session
// is then killed while no daemon runs, gets at the next daemon's start one
// end note (unknown, saying so), one response `lost`, and its agent's user
// loses every capability; a daemon started again writes nothing more.
func TestResponseOfASessionEndedWhileNoDaemonRan(t *testing.T) {
	needs(t, "ocxd", "workspace", "ocx-runner-native")
	n := newNode(t)
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	const login = "gone-1"
	rec := n.createResponder(login, "1h")
	launches := notesOn[*messages.LaunchNote](n, rec)
	if len(launches) != 1 {
		t.Fatalf("create wrote %d launch notes", len(launches))
	}
	launch := launches[0].P.Hash
	serve, ok := n.serving(launch)
	if !ok {
		t.Fatalf("no session serves %s", launch)
	}
	top := sessionTop(t, serve, d.pid())
	if got := n.spawnedOf(login); len(got) != 1 || got[0] != launch {
		t.Fatalf("the spawned records of %s: %v, want its launch %s", login, got, launch)
	}
	if caps := n.capsOf(login); caps == "" {
		t.Fatalf("%s holds no capabilities while its session runs", login)
	}

	// The daemon dies; then the session, while no daemon runs (nothing is
	// posted: the hook would start a daemon).
	d.kill9()
	for _, p := range []int{top, serve} {
		syscall.Kill(-p, syscall.SIGKILL)
		syscall.Kill(p, syscall.SIGKILL)
	}
	n.waitFor("the session's processes to be gone", func() bool { return !harness.Alive(serve) && !harness.Alive(top) })
	if len(n.endsOf(rec, launch)) != 0 || len(n.responses(rec)) != 0 {
		t.Fatalf("an end or a response before any daemon saw the session gone")
	}

	d2 := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	n.waitFor("the end note of the session that ended while no daemon ran", func() bool { return len(n.endsOf(rec, launch)) > 0 })
	n.waitFor("the spawned record to be removed", func() bool { return len(n.spawnedOf(login)) == 0 })
	ends := n.endsOf(rec, launch)
	if len(ends) != 1 || ends[0].Status != messages.EndUnknown || ends[0].ExitCode != nil || ends[0].PID != top || !strings.Contains(ends[0].Note, "ended while no daemon ran") || ends[0].Release != "test" {
		t.Errorf("end notes: %v; want one, unknown, pid %d (its bwrap), release test, saying it ended while no daemon ran", ends, top)
	}
	n.theResponse(rec, login, messages.ResponseLost, "ended while no daemon ran")
	if caps := n.capsOf(login); caps != "" {
		t.Errorf("%s keeps %q once its response is written", login, caps)
	}

	// Another daemon start writes nothing more.
	d2.stop()
	before := len(n.thread(rec))
	d3 := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	n.waitFor("the third daemon's start", func() bool {
		for _, l := range n.logLines() {
			if l.Msg == "started" && l.OCXD == d3.pid() {
				return true
			}
		}
		return false
	})
	n.must("", "status")
	d3.stop()
	if got := len(n.thread(rec)); got != before {
		t.Errorf("a daemon started again wrote %d posts on the record", got-before)
	}
	n.theResponse(rec, login, messages.ResponseLost, "ended while no daemon ran")
}

// TestResponseOnceWhenStartedAgain is issue 38 item 5's second half (seed
// 001 E3 to E5, D76): a create record's agent runs once. Once its run
// ended (a stop: its response written), a session start on its record is
// refused before anything is written, naming why; a restart leaves it
// alone saying why; a launch note written by hand is refused by the
// daemon with a note; and the record holds exactly one response, its
// user no capability.
func TestResponseOnceWhenStartedAgain(t *testing.T) {
	needs(t, "ocxd", "workspace", "ocx-runner-native")
	n := newNode(t)
	admin := n.srv.AdminLogin
	startDaemon(t, n, program("ocxd"), "--grace", "1s")
	const login = "again-1"
	rec := n.createResponder(login, "1h")
	n.must(admin, "tool", "stop", "--record", rec)
	n.theResponse(rec, login, messages.ResponseStopped, "")
	before := len(n.thread(rec))

	a, _ := n.answer(admin, "session", "start", login+"/demo", "--record", rec, "--kind", "llm", "--runner", "native",
		"--model", "standin", "--lifetime", "stays", "--hears", person)
	if a.Stopped == nil || !strings.Contains(*a.Stopped, "has had its run") || !strings.Contains(*a.Stopped, "create another") || a.Result != nil {
		t.Errorf("a start on the record after its run: %+v; want refused, naming its run", a)
	}
	if got := len(n.thread(rec)); got != before {
		t.Errorf("the refused start wrote %d posts", got-before)
	}
	if caps := n.capsOf(login); caps != "" {
		t.Errorf("the refused start gave %s %q", login, caps)
	}

	r := n.ocx(admin, "session", "restart", "--release", "current", "-n")
	if r.code != 0 || !strings.Contains(r.stdout, login+"/demo") || !strings.Contains(r.stdout, "has had its run") || strings.Contains(r.stdout, "would restart "+login) {
		t.Errorf("session restart -n: %s", r)
	}

	again := n.launchAgain(rec)
	n.waitFor("the daemon's refusal of a launch by hand", func() bool { return len(n.refusalsOf(rec, again)) > 0 })
	if rs := n.refusalsOf(rec, again); len(rs) != 1 || !strings.Contains(rs[0].Reason, "has had its run") {
		t.Errorf("the refusals of the launch by hand: %+v", rs)
	}
	if _, ok := n.serving(again); ok {
		t.Errorf("a session serves the launch by hand")
	}
	n.theResponse(rec, login, messages.ResponseStopped, "")
}
