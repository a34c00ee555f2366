package itest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// forker is agent-1's mechanical session: a post "fork ROOT N" makes it
// leave behind, in its own sandbox, issue 39's look-alike: bash as
// `bwrap`, forking 20 times a second, its command line binding N made-up
// workspaces of the agents root ROOT (ROOT/uI/projects/p), in a session
// of its own so that the turn's end leaves it running; it answers once the
// look-alike is about to exec. Any other post is echoed.
const forker = `read -r line
case "$line" in
fork*)
	set -- $line
	[ -p "$HOME/up" ] || mkfifo "$HOME/up"
	cd "$HOME" && setsid bash -c 'ulimit -s unlimited 2>/dev/null || ulimit -s 65536
args=(); for ((i = 0; i < $2; i++)); do args+=(--bind "$1/u$i/projects/p" /x); done
echo up > "$HOME/up"
exec -a bwrap bash -c "while :; do sleep 0.05 & wait; done" x "${args[@]}"' _ "$2" "$3" </dev/null >/dev/null 2>"$HOME/fork.err" &
	read -r up < "$HOME/up"
	echo "forking $up";;
*) printf 'echo: %s\n' "$line";;
esac`

// manyBinds finds the look-alike forker left: bash, its argv[0] bwrap,
// binding agents's u0/p. 0 when none runs.
func manyBinds(agents string) int {
	entries, _ := os.ReadDir("/proc")
	want := "\x00--bind\x00" + agents + "/u0/projects/p\x00"
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		b := make([]byte, 4096)
		n, _ := f.Read(b)
		f.Close()
		if !strings.HasPrefix(string(b[:n]), "bwrap\x00") || !strings.Contains(string(b[:n]), want) {
			continue
		}
		if exe, _ := os.Readlink("/proc/" + e.Name() + "/exe"); filepath.Base(exe) == "bash" {
			return pid
		}
	}
	return 0
}

// timeUntil is how long cond took to hold, polled every 10 ms; the test
// fails after a minute.
func timeUntil(t testing.TB, what string, cond func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !cond() {
		if time.Since(t0) > time.Minute {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(t0)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestLookAlikeWithManyBindsStallsNothing is issue 39's item 1 through
// the real hook, daemon, sandboxed sessions and fossil server: agent-1's
// session leaves in its sandbox a process whose command line binds
// 20,000 made-up workspaces, forking 20 times a second. `ocx status`
// answers about as fast as without it, its document stays small and
// names it once, by a few of the workspaces it claims; agent-2's session
// starts and stops within 2 s each, as without it.
func TestLookAlikeWithManyBindsStallsNothing(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	startDaemon(t, n, program("ocxd"), "--grace", "1s")
	const a1, a2 = "agent-1", "agent-2"
	records := map[string]string{}
	for _, login := range []string{a1, a2} {
		n.must("", "login", "add", login)
		records[login] = n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
	}
	n.result(admin, "session", "start", key(a1), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", forker)
	n.waitFor("agent-1's session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == a1 && s.Listening {
				return true
			}
		}
		return false
	})

	// status times `ocx status --json` five times, and returns the last
	// document.
	status := func() ([]time.Duration, *messages.NodeState, int) {
		var ds []time.Duration
		var doc string
		for range 5 {
			t0 := time.Now()
			r := n.must("", "status", "--json")
			ds = append(ds, time.Since(t0))
			doc = r.stdout
		}
		st, err := messages.DecodeState([]byte(doc))
		if err != nil {
			t.Fatalf("the status does not decode: %v", err)
		}
		return ds, st, len(doc)
	}
	startStop := func() (start, stop time.Duration) { return n.timeStartStop(a2, records[a2]) }

	status0, st0, size0 := status()
	start0, stop0 := startStop()

	// The look-alike.
	var fake int
	t.Cleanup(func() {
		if fake == 0 {
			return
		}
		syscall.Kill(fake, syscall.SIGKILL)
		for deadline := time.Now().Add(10 * time.Second); harness.Alive(fake) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	})
	p := n.result(person, "post", "--to", records[a1], "--text", "fork "+n.agents+" 20000")
	if r := n.awaitReplyBy(a1, records[a1], p); !strings.Contains(r.Text, "forking up") {
		t.Fatalf("agent-1's answer: %q", r.Text)
	}
	n.waitFor("the look-alike with 20,000 binds", func() bool {
		if fake = manyBinds(n.agents); fake != 0 {
			return true
		}
		if b, _ := os.ReadFile(filepath.Join(n.workspaceDir(a1), "fork.err")); len(b) > 0 {
			t.Fatalf("the look-alike did not start: %s", b)
		}
		return false
	})
	n.waitFor("the status to name it", func() bool {
		for _, l := range n.status().LookAlikes {
			if l.PID == fake {
				return true
			}
		}
		return false
	})

	status1, st1, size1 := status()
	start1, stop1 := startStop()
	if !harness.Alive(fake) {
		t.Fatal("the look-alike ended")
	}
	t.Logf("ocx status without the look-alike: median %v (%v), %d bytes, %d look-alikes; with it: median %v (%v), %d bytes, %d look-alike entries, %d left out",
		median(status0), status0, size0, len(st0.LookAlikes), median(status1), status1, size1, len(st1.LookAlikes), st1.LookAlikesLeftOut)
	t.Logf("agent-2's session without it: started in %v, stopped in %v; with it: %v, %v", start0, stop0, start1, stop1)

	var mine []messages.LookAlikeStatus
	for _, l := range st1.LookAlikes {
		if l.PID == fake {
			mine = append(mine, l)
		}
	}
	if len(mine) != messages.MaxLookAlikeClaims || mine[0].Claims < 100 || mine[0].Login != "u0" || len(mine[0].Command) > 256 {
		t.Errorf("the status names the look-alike %d in %d entries (the first %.300s); want its first %d workspaces, counting the rest",
			fake, len(mine), func() string {
				if len(mine) == 0 {
					return "none"
				}
				return mine[0].String()
			}(), messages.MaxLookAlikeClaims)
	}
	if size1 > 128<<10 || len(st1.LookAlikes) > messages.MaxLookAlikes {
		t.Errorf("the status document is %d bytes with %d look-alike entries", size1, len(st1.LookAlikes))
	}
	// Without the bound the status took 3.8 s at 20,000 binds, and each
	// launch and stop waited seconds on the process table's lock.
	if m0, m1 := median(status0), median(status1); m1 > m0+time.Second {
		t.Errorf("ocx status takes %v beside the look-alike, %v without", m1, m0)
	}
	for what, d := range map[string]time.Duration{"start": start1, "stop": stop1} {
		if d > 2*time.Second {
			t.Errorf("agent-2's session %s took %v beside the look-alike", what, d)
		}
	}
}

// timeStartStop times a mechanical session of login's workspace (its
// record record) from `ocx session start` until its `workspace serve`
// runs, and from `ocx session stop` until it is gone.
func (n *testNode) timeStartStop(login, record string) (start, stop time.Duration) {
	t := n.t
	t.Helper()
	admin := n.srv.AdminLogin
	before := map[string]bool{}
	for _, l := range notesOn[*messages.LaunchNote](n, record) {
		before[l.P.Hash] = true
	}
	t0 := time.Now()
	n.result(admin, "session", "start", key(login), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	var launch string
	n.waitFor(login+"'s launch note", func() bool {
		for _, l := range notesOn[*messages.LaunchNote](n, record) {
			if !before[l.P.Hash] {
				launch = l.P.Hash
			}
		}
		return launch != ""
	})
	timeUntil(t, login+"'s session", func() bool {
		_, ok := genuineServing(launch)
		return ok || len(n.refusalsOf(record, launch)) > 0
	})
	start = time.Since(t0)
	if rs := n.refusalsOf(record, launch); len(rs) > 0 {
		t.Fatalf("the daemon refused %s's launch: %s", login, rs[0].Reason)
	}
	t0 = time.Now()
	n.must("", "session", "stop", key(login))
	timeUntil(t, login+"'s session to be gone", func() bool { _, ok := genuineServing(launch); return !ok })
	return start, time.Since(t0)
}
