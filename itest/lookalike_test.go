package itest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// planter is agent-1's mechanical session: a post "plant ROOT [LAUNCH]"
// makes it leave behind, in its own sandbox, a process whose command line
// says it is agent-2's session, `workspace serve agent-2/demo --root ROOT
// [--launch LAUNCH]` (bash running a script named serve that waits on a
// pipe nobody writes, in a session of its own so that the turn's end
// leaves it running); it answers once the fake says, on another pipe, that
// it runs. Any other post is echoed.
const planter = `read -r line
case "$line" in
plant*)
	set -- $line
	for p in hold up; do [ -p "$HOME/$p" ] || mkfifo "$HOME/$p"; done
	printf 'echo up > "$HOME/up"\nread -r x <> "$HOME/hold"\n' > "$HOME/serve"
	cd "$HOME" && setsid bash -c 'exec -a workspace bash serve agent-2/demo --root "$1" ${2:+--launch "$2"}' _ "$2" "$3" </dev/null >/dev/null 2>&1 &
	read -r up < "$HOME/up"
	echo "planted $up $3";;
*) printf 'echo: %s\n' "$line";;
esac`

// lookAlikes lists the processes whose command line names workspace key
// and whose program is bash: the planter's fakes, never a session.
func lookAlikes(key string) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) < 3 || args[0] != "workspace" || args[1] != "serve" || args[2] != key {
			continue
		}
		if exe, _ := os.Readlink("/proc/" + e.Name() + "/exe"); filepath.Base(exe) == "bash" {
			out[pid] = strings.Join(args, " ")
		}
	}
	return out
}

// genuineServing finds the `workspace serve` of a launch that runs the
// workspace program, not a look-alike.
func genuineServing(launch string) (int, bool) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) < 2 || filepath.Base(args[0]) != "workspace" || args[1] != "serve" || !strings.Contains(string(b), launch) {
			continue
		}
		if exe, _ := os.Readlink("/proc/" + e.Name() + "/exe"); filepath.Base(exe) == "workspace" {
			return pid, true
		}
	}
	return 0, false
}

// TestLookAlikeIsNoSession is issue 22's item 2 through the real hook,
// daemon, sandboxed sessions and fossil server: agent-1's session leaves
// in its sandbox a process whose command line says it is agent-2's
// session. It blocks nothing of agent-2's (withdraw, terminate, a start,
// the daemon's launch, a collection), the status does not list it as
// agent-2's session, and after the daemon is killed and started again it
// is not adopted: its end writes no end note on agent-2's record, while
// agent-2's own session, adopted, gets its one.
func TestLookAlikeIsNoSession(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	d := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	const a1, a2 = "agent-1", "agent-2"
	records := map[string]string{}
	for _, login := range []string{a1, a2} {
		n.must("", "login", "add", login)
		records[login] = n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
	}
	n.result(admin, "session", "start", key(a1), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", planter)
	n.waitFor("agent-1's session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == a1 && s.Listening {
				return true
			}
		}
		return false
	})

	var fakes []int
	t.Cleanup(func() {
		for _, pid := range fakes {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range fakes {
			for deadline := time.Now().Add(10 * time.Second); harness.Alive(pid) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
	plant := func(launch string) int {
		t.Helper()
		before := lookAlikes(key(a2))
		p := n.result(person, "post", "--to", records[a1], "--text", strings.TrimSpace("plant "+n.agents+" "+launch))
		if r := n.awaitReplyBy(a1, records[a1], p); !strings.Contains(r.Text, "planted up") {
			t.Fatalf("agent-1's answer to the plant: %q", r.Text)
		}
		pid := 0
		n.waitFor("the look-alike in agent-1's sandbox", func() bool {
			for p := range lookAlikes(key(a2)) {
				if _, old := before[p]; !old {
					pid = p
					return true
				}
			}
			return false
		})
		fakes = append(fakes, pid)
		return pid
	}

	// startA2 starts agent-2's session and waits until it answers; it
	// returns the launch and its `workspace serve`.
	startA2 := func(beside int) (string, int) {
		t.Helper()
		before := map[string]bool{}
		for _, l := range notesOn[*messages.LaunchNote](n, records[a2]) {
			before[l.P.Hash] = true
		}
		start := n.ocx(admin, "session", "start", key(a2), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript, "--json")
		if start.code != 0 {
			t.Fatalf("agent-2's session start, beside the look-alike %d: %s", beside, start)
		}
		var launch string
		n.waitFor("agent-2's launch note", func() bool {
			for _, l := range notesOn[*messages.LaunchNote](n, records[a2]) {
				if !before[l.P.Hash] {
					launch = l.P.Hash
				}
			}
			return launch != ""
		})
		var serve int
		n.waitFor("agent-2's session, or the daemon's refusal of it", func() bool {
			var ok bool
			serve, ok = genuineServing(launch)
			return ok || len(n.refusalsOf(records[a2], launch)) > 0
		})
		if rs := n.refusalsOf(records[a2], launch); len(rs) > 0 {
			t.Fatalf("the daemon refused agent-2's launch beside the look-alike %d: %s", beside, rs[0].Reason)
		}
		// The daemon recorded the session's sandbox, outside it (D45).
		b, err := os.ReadFile(filepath.Join(n.agents, a2, "held", "demo", "sandbox"))
		if err != nil {
			t.Fatalf("no record of agent-2's sandbox: %v", err)
		}
		rec, err := host.DecodeSandboxRecord(b)
		if err != nil || ppidOf(t, rec.Init.PID) != rec.Bwrap.PID || ppidOf(t, serve) != rec.Init.PID {
			t.Fatalf("the record of agent-2's sandbox %s (%v) is not the sandbox of its serve %d", b, err, serve)
		}
		hi := n.result(person, "post", "--to", records[a2], "--text", "hi "+launch[:8])
		if r := n.awaitReplyBy(a2, records[a2], hi); !strings.Contains(r.Text, "echo: hi") {
			t.Errorf("agent-2's answer: %q", r.Text)
		}
		return launch, serve
	}
	sessionsOf := func(login string) []messages.SessionStatus {
		var out []messages.SessionStatus
		for _, s := range n.status().Sessions {
			if s.Login == login {
				out = append(out, s)
			}
		}
		return out
	}

	// 1. A look-alike naming agent-2's launch, beside agent-2's session:
	// the status lists only agent-2's own; a daemon started after a kill
	// -9 does not adopt it, so its end writes no end note on agent-2's
	// record, while agent-2's session, adopted, gets its one.
	launch2, serve2 := startA2(0)
	fakeB := plant(launch2)
	if mine := sessionsOf(a2); len(mine) != 1 || mine[0].PID != serve2 {
		t.Errorf("the status lists %v as agent-2's sessions; want its own, pid %d, and not the look-alike %d", mine, serve2, fakeB)
	}
	d.kill9()
	d2 := startDaemon(t, n, program("ocxd"), "--grace", "1s")
	n.waitLogLine("the new daemon's start", func(l logLine) bool { return l.Msg == "started" && l.OCXD == d2.pid() })
	if err := syscall.Kill(fakeB, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the look-alike to end", func() bool { return !harness.Alive(fakeB) })
	n.must("", "session", "stop", key(a2))
	n.waitFor("agent-2's end note", func() bool {
		for _, e := range n.endsOf(records[a2], launch2) {
			if e.PID == serve2 {
				return true
			}
		}
		return false
	})
	ends := n.endsOf(records[a2], launch2)
	for _, e := range ends {
		if e.PID == fakeB {
			t.Errorf("an end note on agent-2's record for the look-alike %d: %s", fakeB, e)
		}
	}
	if len(ends) != 1 || ends[0].PID != serve2 || ends[0].Status != messages.EndUnknown {
		t.Errorf("agent-2's end notes: %v; want one, its own session's (pid %d), status unknown", ends, serve2)
	}
	n.waitFor("agent-2's session to be gone", func() bool { _, ok := genuineServing(launch2); return !ok })

	// 2. A look-alike naming no launch, agent-2 idle: its workspace is
	// not active, no session is agent-2's, and nothing of agent-2's is
	// refused: a withdrawal, a termination, a start and its launch.
	fakeA := plant("")
	st := n.status()
	for _, s := range st.Sessions {
		if s.Login == a2 {
			t.Errorf("the status lists %s as agent-2's session", s)
		}
	}
	for _, w := range st.Workspaces {
		if w.Login == a2 && w.State == messages.WorkspaceActive {
			t.Errorf("the status says agent-2's workspace is active: %s", w)
		}
	}
	named := false
	for _, l := range st.LookAlikes {
		named = named || (l.PID == fakeA && l.Login == a2 && l.Project == "demo" && strings.Contains(l.Why, "not the sandbox the node made for agent-2/demo"))
	}
	if !named {
		t.Errorf("the status does not name the look-alike %d: %v", fakeA, st.LookAlikes)
	}
	for _, args := range [][]string{
		{"login", "withdraw", a2, "--dry-run"},
		{"workspace", "terminate", key(a2), "--dry-run"},
	} {
		if r := n.ocx(admin, args...); r.code != 0 {
			t.Errorf("refused because of the look-alike %d: %s", fakeA, r)
		}
	}
	launch3, _ := startA2(fakeA)
	n.must("", "session", "stop", key(a2))
	n.waitFor("agent-2's second session to be gone", func() bool { _, ok := genuineServing(launch3); return !ok })
	n.waitFor("the record of its sandbox to go with it", func() bool {
		_, err := os.Stat(filepath.Join(n.agents, a2, "held", "demo", "sandbox"))
		return os.IsNotExist(err)
	})

	// 3. agent-2's record ends its workspace; the look-alike still there
	// keeps no collection from removing it.
	block, err := (&messages.TerminatedNote{Login: a2, Project: "demo", Reason: "done"}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	n.push(admin, admin, records[a2], records[a2], string(block))
	if !harness.Alive(fakeA) {
		t.Fatalf("the look-alike %d ended", fakeA)
	}
	gc, r := n.answer(admin, "workspace", "gc", "--dry-run")
	if gc.Stopped != nil || !strings.Contains(strings.Join(gc.Log, "\n"), "remove "+n.workspaceDir(a2)) {
		t.Errorf("a collection with the look-alike %d there does not remove agent-2's workspace: %s", fakeA, r)
	}
}
