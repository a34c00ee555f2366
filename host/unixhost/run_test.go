//go:build linux

package unixhost

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// runBase makes a directory for a run's host paths outside /tmp (which the
// sandbox's own tmp hides), readable by every user, removed at the end.
func runBase(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "ocx-run-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// systemSandbox sees the system's programs read-only, its own /proc, /dev
// and /tmp, and nothing else.
func systemSandbox() host.RunSandbox {
	return host.RunSandbox{
		UID: 1000, GID: 1000,
		ReadOnly: []string{"/usr", "/bin", "/lib", "/lib64"},
		Proc:     "/proc", Dev: "/dev", Tmp: "/tmp",
	}
}

type runResult struct {
	stdout, stderr string
	exit           host.Exit
}

// code is the command's exit as seed 004's ended gives it.
func (r runResult) code() int {
	_, c := r.exit.Outcome()
	return c
}

// section returns the lines after "== name" up to the next section.
func (r runResult) section(name string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "== ") {
			in = l == "== "+name
			continue
		}
		if in && l != "" {
			out = append(out, l)
		}
	}
	return out
}

// startRun starts spec with its standard output and error read into the
// result, which wait gives once the process has been reaped and both streams
// have closed.
func startRun(t testing.TB, l *Launcher, spec host.RunSpec) (wait func() runResult, err error) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	spec.Stdout, spec.Stderr = outW, errW
	var res runResult
	var wg sync.WaitGroup
	wg.Add(2)
	read := func(r *os.File, into *string) {
		defer wg.Done()
		b, _ := io.ReadAll(r)
		*into = string(b)
		r.Close()
	}
	go read(outR, &res.stdout)
	go read(errR, &res.stderr)
	x := newExits()
	id, err := l.StartRun(spec, x.on)
	outW.Close()
	errW.Close()
	if err != nil {
		wg.Wait()
		return nil, err
	}
	return func() runResult {
		t.Helper()
		res.exit = x.wait(t, id)
		wg.Wait()
		return res
	}, nil
}

func run(t testing.TB, l *Launcher, spec host.RunSpec) runResult {
	t.Helper()
	wait, err := startRun(t, l, spec)
	if err != nil {
		t.Fatal(err)
	}
	return wait()
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// Every field of table 6 at once, as seed 004's Claude example has them:
// the process lists what it sees, and sees that and nothing else of the host.
func TestRunSandboxSeesWhatItIsGiven(t *testing.T) {
	base := runBase(t)
	parent := filepath.Join(base, "runs")
	ws := filepath.Join(parent, "w1")
	both := filepath.Join(base, "both")
	home := filepath.Join(base, "home", ".tool")
	for _, d := range []string{ws, both, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(home, "config"), []byte("home-config\n"), 0o644)
	passwd := "claude-1:x:1000:1001::" + ws + ":/bin/sh\n"
	sb := systemSandbox()
	sb.GID = 1001
	sb.Capabilities = []string{"CAP_NET_BIND_SERVICE"}
	sb.OwnSession = true
	// parent read-only, then the workspace in it read-write: the later is
	// seen over the earlier; both in both lists: read-write.
	sb.ReadOnly = append(sb.ReadOnly, parent, both)
	sb.ReadWrite = []string{ws, both}
	sb.Homes = []string{home}
	sb.Files = []host.RunFile{{At: "/etc/passwd", Text: passwd}, {At: "/etc/ocx-secret", Text: "s3cret"}}
	sb.Workspace = ws
	script := `
echo "== ls"; ls -1A /
echo "== id"; id -u; id -g; id -un
echo "== hostname"; cat /proc/sys/kernel/hostname
echo "== caps"; grep -E '^Cap(Eff|Bnd|Prm):' /proc/self/status
echo "== net"; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '
echo "== sid"; read -r st < /proc/$$/stat; set -- $st; echo "$6"
echo "== procs"; ls /proc | grep -E '^[0-9]+$' | wc -l
echo "== files"; cat /etc/ocx-secret; echo; cat /etc/passwd
echo "== home"; cat "$WS/.tool/config"
echo "== writes"
echo w > "$WS/w" && echo ws-writable
(echo w > "$PARENT/x") 2>/dev/null && echo parent-writable || echo parent-read-only
echo w > "$BOTH/w" && echo both-writable
(echo w > /usr/x) 2>/dev/null && echo usr-writable || echo usr-read-only
echo "== mounts"; cut -d' ' -f5 /proc/self/mountinfo
echo "== env"; env | sort
`
	env := []string{"PATH=/usr/bin:/bin", "WS=" + ws, "PARENT=" + parent, "BOTH=" + both}
	l := newLauncher(t, nil)
	r := run(t, l, host.RunSpec{Command: sh(script), Env: env, Dir: ws, Sandbox: &sb})
	if r.code() != 0 || !r.exit.Sandbox.Reported {
		t.Fatalf("exit %s\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}
	t.Logf("the sandbox saw:\n%s", r.stdout)
	eq := func(section string, want ...string) {
		t.Helper()
		if got := r.section(section); !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", section, got, want)
		}
	}
	// Nothing of the host but what is stated: /var holds the stated paths.
	eq("ls", "bin", "dev", "etc", "lib", "lib64", "proc", "tmp", "usr", "var")
	eq("id", "1000", "1001", "claude-1")
	hn, _ := os.Hostname()
	eq("hostname", host.RunHostname)
	if hn == host.RunHostname {
		t.Fatalf("the host is called %s too: the test proves nothing", hn)
	}
	// Exactly the capability named, in every set.
	eq("caps", "CapPrm:\t0000000000000400", "CapEff:\t0000000000000400", "CapBnd:\t0000000000000400")
	eq("net", "lo")
	// A session of its own: bwrap's setsid makes the sandbox's PID 1 its
	// leader, seen inside as 1 (a session outside would be 0).
	eq("sid", "1")
	// Its own processes only: bwrap's init, the shell, ls, grep and wc.
	if got := r.section("procs"); len(got) != 1 || got[0] == "" {
		t.Errorf("procs: %q", got)
	} else if n, _ := strconv.Atoi(got[0]); n < 2 || n > 6 {
		t.Errorf("the sandbox sees %d processes, want its own few", n)
	}
	eq("files", append([]string{"s3cret"}, strings.Split(strings.TrimSuffix(passwd, "\n"), "\n")...)...)
	eq("home", "home-config")
	eq("writes", "ws-writable", "parent-read-only", "both-writable", "usr-read-only")
	if b, err := os.ReadFile(filepath.Join(ws, "w")); err != nil || string(b) != "w\n" {
		t.Errorf("the workspace write is not on the host: %q %v", b, err)
	}
	// The files are the sandbox's alone: not on the host.
	if _, err := os.Stat("/etc/ocx-secret"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/etc/ocx-secret on the host: %v", err)
	}
	if b, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(b), "claude-1:") {
		t.Errorf("the host's /etc/passwd holds the sandbox's")
	}
	allowed := []string{"/", "/usr", "/bin", "/lib", "/lib64", parent, ws, both, filepath.Join(ws, ".tool"),
		"/etc/passwd", "/etc/ocx-secret", "/proc", "/dev", "/tmp"}
	seen := map[string]bool{}
	for _, m := range r.section("mounts") {
		seen[m] = true
		// bwrap's own: /dev's pts and shm, and /proc's sys, irq, bus and
		// sysrq-trigger made read-only over the sandbox's own /proc.
		if !slices.Contains(allowed, m) && !strings.HasPrefix(m, "/dev/") && !strings.HasPrefix(m, "/proc/") {
			t.Errorf("the sandbox has %s mounted, which was not asked", m)
		}
	}
	for _, m := range allowed {
		if !seen[m] {
			t.Errorf("%s is not mounted in the sandbox", m)
		}
	}
	// The whole environment is the run's: bwrap adds PWD alone.
	want := append(slices.Clone(env), "PWD="+ws)
	slices.Sort(want)
	eq("env", want...)
}

// proc, dev and tmp where the run says; no session of its own; no
// capability; the host's network when asked.
func TestRunSandboxPlacesAndSharing(t *testing.T) {
	sb := systemSandbox()
	sb.UID, sb.GID = 0, 0
	sb.Network = true
	sb.Proc, sb.Dev, sb.Tmp = "/p2", "/d2", "/t2"
	script := `
echo "== places"; test -r /p2/self/status && echo proc; test -c /d2/null && echo dev; ls -A /t2 | wc -l; touch /t2/x && echo tmp-writable
echo "== absent"; for d in /proc /dev /tmp; do test -e $d || echo no-$d; done
echo "== types"; while read -r a b c d mp rest; do case $mp in /p2|/d2|/t2) set -- $rest; while [ "$1" != - ]; do shift; done; echo "$mp $2";; esac; done < /p2/self/mountinfo
echo "== sid"; read -r st < /p2/$$/stat; set -- $st; echo "$6"
echo "== caps"; grep -E '^CapEff:' /p2/self/status
echo "== net"; tail -n +3 /p2/net/dev | cut -d: -f1 | tr -d ' ' | sort
`
	l := newLauncher(t, nil)
	r := run(t, l, host.RunSpec{Command: sh(script), Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Sandbox: &sb})
	if r.code() != 0 {
		t.Fatalf("exit %s\n%s\n%s", r.exit, r.stdout, r.stderr)
	}
	if got := r.section("places"); !slices.Equal(got, []string{"proc", "dev", "0", "tmp-writable"}) {
		t.Errorf("places: %q", got)
	}
	if got := r.section("absent"); !slices.Equal(got, []string{"no-/proc", "no-/dev", "no-/tmp"}) {
		t.Errorf("absent: %q", got)
	}
	if got := r.section("types"); !slices.Equal(got, []string{"/p2 proc", "/d2 tmpfs", "/t2 tmpfs"}) {
		t.Errorf("types: %q", got)
	}
	// Without own_session the sandbox is in bwrap's session, whose leader
	// is outside its PID namespace.
	if got := r.section("sid"); !slices.Equal(got, []string{"0"}) {
		t.Errorf("sid: %q", got)
	}
	// Even as uid 0 inside, with none named it keeps none.
	if got := r.section("caps"); !slices.Equal(got, []string{"CapEff:\t0000000000000000"}) {
		t.Errorf("caps: %q", got)
	}
	ifaces, _ := os.ReadFile("/proc/net/dev")
	var want []string
	for _, l := range strings.Split(string(ifaces), "\n")[2:] {
		if name, _, ok := strings.Cut(l, ":"); ok {
			want = append(want, strings.TrimSpace(name))
		}
	}
	slices.Sort(want)
	if got := r.section("net"); !slices.Equal(got, want) || len(want) < 2 {
		t.Errorf("net: %q, want the host's %q", got, want)
	}
}

// A capability that Linux does not have is refused naming it; every one
// Linux has is kept exactly when named.
func TestRunCapabilitiesKeptExactly(t *testing.T) {
	l := newLauncher(t, nil)
	sb := systemSandbox()
	sb.Capabilities = []string{"CAP_FLY"}
	_, err := l.StartRun(host.RunSpec{Command: []string{"/bin/true"}, Dir: "/", Sandbox: &sb}, func(host.Exit) {})
	var fe *host.RunFieldError
	if !errors.As(err, &fe) || fe.Field != "sandbox.capabilities[0]" || !strings.Contains(err.Error(), "CAP_FLY") {
		t.Fatalf("CAP_FLY: %v", err)
	}
	sb.Capabilities = []string{"CAP_KILL", "CAP_SYS_PTRACE", "CAP_CHECKPOINT_RESTORE"}
	mask, _ := host.CapabilityMask(sb.Capabilities)
	r := run(t, l, host.RunSpec{Command: sh(`grep -E '^Cap(Eff|Bnd):' /proc/self/status`), Env: []string{"PATH=/usr/bin"},
		Dir: "/", Sandbox: &sb})
	want := fmt.Sprintf("CapEff:\t%016x\nCapBnd:\t%016x\n", mask, mask)
	if r.stdout != want {
		t.Fatalf("caps:\n%s\nwant\n%s\nstderr %s", r.stdout, want, r.stderr)
	}
}

// Refusal row 9, for real: a path that leads through a link into the
// node's own files is refused naming the path as the run gives it; the
// release and the workspace themselves may be named.
func TestRunNodeFilesRefusedThroughLinks(t *testing.T) {
	base := runBase(t)
	repo := filepath.Join(base, "srv", "demo.fossil")
	state := filepath.Join(base, "state")
	pw := filepath.Join(base, "passwords")
	releaseRoot := filepath.Join(base, "release")
	release := filepath.Join(releaseRoot, "releases", "r1")
	ws := filepath.Join(releaseRoot, "root", "claude-1", "projects", "demo", "run1")
	for _, d := range []string{filepath.Dir(repo), state, release, ws, filepath.Join(base, "links")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(repo, nil, 0o600)
	os.WriteFile(pw, []byte("claude-1 x\n"), 0o600)
	links := map[string]string{"to-state": state + "/r1", "to-pw": pw, "to-repo-dir": filepath.Dir(repo),
		"to-release-root": releaseRoot, "to-other-ws": filepath.Join(releaseRoot, "root", "claude-1", "projects"),
		"to-ws": ws, "to-release": release}
	for name, to := range links {
		if err := os.Symlink(to, filepath.Join(base, "links", name)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := ResolveNodeFiles(host.NodeFiles{Repositories: []string{repo}, State: state, Passwords: pw,
		ReleaseRoot: releaseRoot, Release: release, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	sb := systemSandbox()
	sb.ReadOnly = append(sb.ReadOnly, release, filepath.Join(base, "links", "to-release"))
	sb.ReadWrite = []string{ws, filepath.Join(base, "links", "to-ws")}
	sb.Workspace = ws
	if err := n.CheckRunSandbox(sb, Resolve); err != nil {
		t.Fatalf("the release and the workspace refused: %v", err)
	}
	for _, name := range []string{"to-state", "to-pw", "to-repo-dir", "to-release-root", "to-other-ws"} {
		for _, list := range []string{"read_only", "read_write", "homes"} {
			p := filepath.Join(base, "links", name)
			s := sb
			switch list {
			case "read_only":
				s.ReadOnly = []string{p}
			case "read_write":
				s.ReadWrite = []string{p}
			case "homes":
				s.Homes = []string{p}
			}
			err := n.CheckRunSandbox(s, Resolve)
			var re *host.RefusalError
			if !errors.As(err, &re) || re.Path != p || !strings.Contains(err.Error(), p) {
				t.Errorf("%s %s: %v, want a refusal naming the path", list, name, err)
			}
		}
	}
}

// cpu: past its seconds of CPU the process gets SIGXCPU from the kernel,
// which bwrap reports as 128+24; the limit is in place as the command starts.
func TestRunCPULimit(t *testing.T) {
	l := newLauncher(t, nil)
	sb := systemSandbox()
	r := run(t, l, host.RunSpec{Command: []string{"/bin/cat", "/proc/self/limits"}, Dir: "/", Sandbox: &sb,
		Limits: host.RunLimits{CPU: 7}})
	if !limitLine(r.stdout, "Max cpu time", "7", "8") {
		t.Fatalf("limits as the command starts:\n%s\n%s", r.stdout, r.stderr)
	}
	start := time.Now()
	r = run(t, l, host.RunSpec{Command: sh("while :; do :; done"), Dir: "/", Sandbox: &sb, Limits: host.RunLimits{CPU: 1}})
	took := time.Since(start)
	if o, c := r.exit.Outcome(); o != host.OutcomeExited || c != 128+int(host.SIGXCPU) {
		t.Fatalf("busy loop with cpu 1 ended %s (%s), want 152\n%s", r.exit, o, r.stderr)
	}
	if took > 20*time.Second {
		t.Fatalf("SIGXCPU after %s of wall time for one second of CPU", took)
	}
	// What bwrap reports as 152 under the limit is SIGXCPU past it (D83).
	if st := r.exit.Status(); st.State != messages.EndSignaled || st.Signal != "SIGXCPU" || r.exit.CPULimit != time.Second {
		t.Errorf("the status of the busy loop past cpu 1: %s (limit %s), want signaled SIGXCPU", st, r.exit.CPULimit)
	}
}

// limitLine says whether /proc/PID/limits shows the limit name at soft and hard.
func limitLine(limits, name, soft, hard string) bool {
	for _, l := range strings.Split(limits, "\n") {
		if rest, ok := strings.CutPrefix(l, name); ok {
			f := strings.Fields(rest)
			return len(f) >= 2 && f[0] == soft && f[1] == hard
		}
	}
	return false
}

// Where no cgroup can be made, memory is refused, naming the limit and
// what the host lacks, and processes as root too (the kernel does not
// count root's processes); where one can, both are provided
// (TestRunMemoryLimit, TestRunProcessesInCgroup). A limit is refused
// without a sandbox either way.
func TestRunRefusesWhatTheHostLacks(t *testing.T) {
	l := newLauncher(t, nil)
	sb := systemSandbox()
	s := l.RunSupport()
	var ne *host.NotProvidedError
	for _, lim := range []host.RunLimits{{CPU: 3}, {Memory: 1 << 30}, {Processes: 5}} {
		_, err := l.StartRun(host.RunSpec{Command: []string{"/bin/true"}, Dir: "/", Limits: lim}, func(host.Exit) {})
		if !errors.As(err, &ne) || !strings.Contains(err.Error(), "limits.") {
			t.Fatalf("%+v unconfined: %v", lim, err)
		}
	}
	if why := HostCgroups().Why(); why == "" {
		if s.Memory != "" || s.Processes != "" {
			t.Fatalf("a host making cgroups refuses: %+v", s)
		}
		return
	}
	if s.Memory == "" {
		t.Fatal("memory offered, but no cgroup can be made")
	}
	t.Logf("memory: %s", s.Memory)
	_, err := l.StartRun(host.RunSpec{Command: []string{"/bin/true"}, Dir: "/", Sandbox: &sb,
		Limits: host.RunLimits{Memory: 1 << 30}, Cgroup: "ocx-x/run:y"}, func(host.Exit) {})
	if !errors.As(err, &ne) || ne.Field != "limits.memory" || !strings.Contains(err.Error(), "cgroup") {
		t.Fatalf("memory: %v", err)
	}
	if os.Geteuid() != 0 {
		if s.Processes != "" {
			t.Fatalf("processes refused for uid %d: %s", os.Geteuid(), s.Processes)
		}
		return
	}
	_, err = l.StartRun(host.RunSpec{Command: []string{"/bin/true"}, Dir: "/", Sandbox: &sb,
		Limits: host.RunLimits{Processes: 10}}, func(host.Exit) {})
	if !errors.As(err, &ne) || ne.Field != "limits.processes" || !strings.Contains(err.Error(), "root") {
		t.Fatalf("processes as root: %v", err)
	}
}

// processes: a fork beyond the limit fails, and the limit is in place as
// the command starts. The kernel does not count root's processes, so as
// root the test runs the launcher in a helper as nobody (uid 65534).
func TestRunProcessesLimit(t *testing.T) {
	const n = 5
	var out string
	if os.Geteuid() == 0 {
		dir := runBase(t)
		exe := filepath.Join(dir, "unixhost.test")
		copyFile(t, testExe(t), exe)
		cmd := exec.Command(exe)
		cmd.Env = []string{helperEnv + "=runlimited", "HELPER_N=" + strconv.Itoa(n)}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		before := children()
		b, err := cmd.CombinedOutput()
		out = string(b)
		// The helper's sandboxes' inits outlive their bwrap by a moment and,
		// the helper being no subreaper, are reparented to this process.
		for pid := range children() {
			if _, ok := before[pid]; !ok {
				killReap(pid)
			}
		}
		if err != nil {
			t.Fatalf("helper as nobody: %v\n%s", err, out)
		}
	} else {
		var b strings.Builder
		if code := runLimited(&b, n); code != 0 {
			t.Fatalf("code %d\n%s", code, b.String())
		}
		out = b.String()
	}
	t.Logf("%s", out)
	if !limitLine(out, "Max processes", strconv.Itoa(n), strconv.Itoa(n)) {
		t.Fatalf("the limit is not in place as the command starts:\n%s", out)
	}
	// bwrap's init and the shell count: n-2 sleeps start, the next fork fails.
	want := fmt.Sprintf("started %d\n", n-2)
	if !strings.Contains(out, want) || strings.Contains(out, fmt.Sprintf("started %d\n", n-1)) {
		t.Fatalf("want exactly %d sleeps started:\n%s", n-2, out)
	}
	if !strings.HasSuffix(out, "Cannot fork\n\nexit exited 2\n") {
		t.Fatalf("the shell did not fail its fork:\n%s", out)
	}
}

// runLimitedHelper runs runLimited as the helper process.
func runLimitedHelper() int {
	n, _ := strconv.Atoi(os.Getenv("HELPER_N"))
	return runLimited(os.Stdout, n)
}

// runLimited starts, with processes n, a command reading its own limits, and
// a shell starting sleeps until a fork fails; it writes what they print.
func runLimited(w io.Writer, n int) int {
	l, err := NewLauncher(LauncherOptions{})
	if err != nil {
		fmt.Fprintln(w, err)
		return 3
	}
	defer l.Close()
	sb := systemSandbox()
	lim := host.RunLimits{Processes: uint64(n)}
	for _, cmd := range [][]string{{"/bin/cat", "/proc/self/limits"},
		sh(`i=0; while [ $i -lt 20 ]; do sleep 2 & i=$((i+1)); echo started $i; done`)} {
		r, err := runHelper(l, host.RunSpec{Command: cmd, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Sandbox: &sb, Limits: lim})
		if err != nil {
			fmt.Fprintln(w, err)
			return 3
		}
		o, c := r.exit.Outcome()
		fmt.Fprintf(w, "%s%s\nexit %s %d\n", r.stdout, r.stderr, o, c)
	}
	return 0
}

// runHelper is run for a helper, which has no testing.T.
func runHelper(l *Launcher, spec host.RunSpec) (runResult, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return runResult{}, err
	}
	spec.Stdout, spec.Stderr = outW, outW
	done := make(chan host.Exit, 1)
	_, err = l.StartRun(spec, func(e host.Exit) { done <- e })
	outW.Close()
	if err != nil {
		outR.Close()
		return runResult{}, err
	}
	b, _ := io.ReadAll(outR)
	outR.Close()
	return runResult{stdout: string(b), exit: <-done}, nil
}

// runWatcherHelper is a run's watcher: it starts `sleep` in a sandbox,
// ending with it when HELPER_ENDS is 1, says bwrap's PID and waits to be
// killed.
func runWatcherHelper() int {
	l, err := NewLauncher(LauncherOptions{})
	if err != nil {
		fmt.Println(err)
		return 3
	}
	sb := systemSandbox()
	sb.EndsWithNode = os.Getenv("HELPER_ENDS") == "1"
	id, err := l.StartRun(host.RunSpec{Command: []string{"/bin/sleep", "1000"}, Dir: "/", Sandbox: &sb,
		Limits: host.RunLimits{CPU: 100}}, func(host.Exit) {})
	if err != nil {
		fmt.Println(err)
		return 3
	}
	fmt.Printf("bwrap %d\n", id.PID)
	select {}
}

// ends_with_node: the sandbox ends when the process that started it (the
// run's watcher) ends; without it, it goes on.
func TestRunEndsWithNode(t *testing.T) {
	for _, ends := range []bool{true, false} {
		t.Run(fmt.Sprintf("ends_with_node=%v", ends), func(t *testing.T) {
			cmd := exec.Command(testExe(t))
			cmd.Env = []string{helperEnv + "=runwatcher", "HELPER_ENDS=" + map[bool]string{true: "1", false: "0"}[ends]}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			var bwrap int
			if _, serr := fmt.Sscanf(line, "bwrap %d", &bwrap); serr != nil || err != nil {
				killReapCmd(cmd)
				t.Fatalf("watcher said %q: %v", line, err)
			}
			var init int
			eventually(t, "bwrap's child", func() bool { init = childOf(bwrap); return init > 0 })
			inner := 0
			eventually(t, "the sleep", func() bool { inner = childOf(init); return inner > 0 })
			// bwrap's init asks for its death signal only after it has
			// forked the command, on its way to the wait on its children:
			// a watcher that ended before would leave it running (bwrap's
			// own window, docs/host.md 7.1). The test waits for that wait.
			eventually(t, "bwrap's init waiting on its children", func() bool {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", init))
				return string(b) == "do_wait"
			})
			killReapCmd(cmd)
			// bwrap and its init are now this process's (a subreaper).
			gone := func(pid int) bool {
				var ws unix.WaitStatus
				r, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
				return r == pid || err == unix.ECHILD
			}
			if ends {
				eventually(t, "bwrap ended", func() bool { return gone(bwrap) })
				eventually(t, "the sandbox ended", func() bool { return gone(init) })
				eventually(t, "the sleep ended", func() bool { return unix.Kill(inner, 0) == unix.ESRCH })
				return
			}
			time.Sleep(300 * time.Millisecond)
			alive := unix.Kill(inner, 0) == nil
			// bwrap first: its init is then this process's to reap.
			killReap(bwrap)
			killReap(init)
			if !alive {
				t.Fatal("the sandbox ended with its watcher without ends_with_node")
			}
		})
	}
}

func killReapCmd(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

// childOf returns a child of pid, 0 for none.
func childOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	c, _ := strconv.Atoi(f[0])
	return c
}

// Without a sandbox the program is found on env's PATH and gets env
// exactly: the node adds nothing.
func TestRunUnconfined(t *testing.T) {
	l := newLauncher(t, nil)
	dir := runBase(t)
	env := []string{"PATH=/usr/bin:/bin", "ONLY=this"}
	r := run(t, l, host.RunSpec{Command: []string{"env"}, Env: env, Dir: dir})
	if r.code() != 0 || r.stdout != strings.Join(env, "\n")+"\n" || r.exit.Sandbox != nil {
		t.Fatalf("env: %s %q %q", r.exit, r.stdout, r.stderr)
	}
	r = run(t, l, host.RunSpec{Command: []string{"pwd"}, Env: env, Dir: dir})
	if r.stdout != dir+"\n" {
		t.Fatalf("pwd %q", r.stdout)
	}
	if _, err := l.StartRun(host.RunSpec{Command: []string{"env"}, Dir: dir}, func(host.Exit) {}); err == nil || !strings.Contains(err.Error(), "no PATH") {
		t.Fatalf("no PATH: %v", err)
	}
	if _, err := l.StartRun(host.RunSpec{Command: []string{"no-such-program"}, Env: env, Dir: dir}, func(host.Exit) {}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("not on PATH: %v", err)
	}
}

// A sandbox that cannot be made (a read-write path that does not exist) is
// told apart from the command's own exit, with limits asked or not.
func TestRunSandboxFailure(t *testing.T) {
	l := newLauncher(t, nil)
	for _, lim := range []host.RunLimits{{}, {CPU: 5}} {
		sb := systemSandbox()
		sb.ReadWrite = []string{"/nonexistent/ocx-run"}
		r := run(t, l, host.RunSpec{Command: []string{"/bin/true"}, Dir: "/", Sandbox: &sb, Limits: lim})
		if o, _ := r.exit.Outcome(); o != host.OutcomeSandboxFailed || !strings.Contains(r.stderr, "bwrap:") {
			t.Fatalf("limits %+v: %s, stderr %q", lim, r.exit, r.stderr)
		}
	}
}
