package runs

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
)

// seedClaude is section 14's second example, as written
// (docs/design/examples).
var seedClaude = design.Example("run-claude.json")

// standIn is the claude a test's release holds: it says what it was given.
const standIn = `#!/bin/sh
echo "== argv"; for a in "$@"; do echo "$a"; done
echo "== cwd"; pwd
echo "== env"; env | sort
echo "== passwd"; cat /etc/passwd
echo "== id"; id -u; id -g; id -un
echo "== tree"; cat README.txt
echo "== home"; cat "$HOME/.claude/settings"
`

// Section 14's second example, prepared against a real server into the
// RunSpec its sandbox implies, then started with unixhost's real launcher
// and bwrap: the stand-in claude, found on env's PATH in the release, runs
// in $$tree$$ with exactly the env written, values in place, and the
// /etc/passwd the files entry says, and exits.
func TestPrepareSeedClaude(t *testing.T) {
	// Registered first, so it runs last: after the launcher is closed.
	t.Cleanup(func() { goleak.VerifyNone(t) })
	l, err := unixhost.NewLauncher(unixhost.LauncherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if why := l.RunSupport().Sandbox; why != "" {
		t.Fatalf("this host starts no sandboxed run (make deps installs bwrap): %s", why)
	}
	f := newFixture(t)
	ctx := ctxT(t)
	if err := os.WriteFile(filepath.Join(f.release, "claude"), []byte(standIn), 0o755); err != nil {
		t.Fatal(err)
	}
	f.p.Support = l.RunSupport()
	run := readRun(t, seedClaude)
	got, err := f.p.Make(ctx, run, runHash)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(f.root, runUser, "projects", "demo", runHash)
	tree := ws + "/tree"
	if got.Values["checkout"] != f.trunk || got.Values["tree"] != tree || len(got.Values) != 11 {
		t.Errorf("values %v", got.Values)
	}
	if got.Limits.Wall != "8h" || got.Limits.CPU != nil || got.Limits.Processes != nil || got.Limits.Memory != "" {
		t.Errorf("started's limits %+v, want the wall as written", got.Limits)
	}
	if got.Spec.Limits != (host.RunLimits{}) {
		t.Errorf("host limits %+v: wall is the engine's", got.Spec.Limits)
	}
	wantEnv := []string{"HOME=" + ws, "IS_SANDBOX=1", "PATH=" + f.release + ":/usr/local/bin:/usr/bin:/bin", "USER=" + runUser}
	if !slices.Equal(got.Spec.Env, wantEnv) || got.Spec.Dir != tree {
		t.Errorf("env %q in %s", got.Spec.Env, got.Spec.Dir)
	}
	passwd := runUser + ":x:1000:1000::" + ws + ":/bin/sh\n"
	argv, err := host.RunBwrapArgs(*got.Spec.Sandbox, host.RunFDs{Status: 3, Files: 4}, got.Spec.Dir, got.Spec.Command)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bwrap", "--unshare-user", "--unshare-pid", "--unshare-uts", "--unshare-ipc", "--unshare-cgroup-try",
		"--hostname", host.RunHostname, "--uid", "1000", "--gid", "1000", "--cap-drop", "ALL",
		// network true: no --unshare-net; own_session; ends_with_node.
		"--new-session", "--die-with-parent"}
	for _, p := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc/resolv.conf", "/etc/ssl/certs", f.release} {
		want = append(want, "--ro-bind", p, p)
	}
	want = append(want, "--bind", ws, ws,
		"--bind", "/root/.claude", ws+"/.claude", "--bind", "/root/.claude.json", ws+"/.claude.json",
		"--perms", "0644", "--ro-bind-data", "4", "/etc/passwd",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", tree, "--json-status-fd", "3",
		"--", "claude", "--remote-control")
	if !slices.Equal(argv, want) {
		t.Errorf("bwrap's argv:\n got %q\nwant %q", argv, want)
	}
	if fs := got.Spec.Sandbox.Files; len(fs) != 1 || fs[0].Text != passwd {
		t.Errorf("files %+v", fs)
	}

	// Started for real. The host's /root/.claude is not the test's to
	// bind: the homes are the test's own, the rest as prepared.
	homes := filepath.Join(f.base, "home")
	if err := os.MkdirAll(filepath.Join(homes, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(homes, ".claude", "settings"), []byte("home-settings\n"), 0o644)
	os.WriteFile(filepath.Join(homes, ".claude.json"), []byte("{}\n"), 0o644)
	spec := got.Spec
	sb := *spec.Sandbox
	sb.Homes = []string{filepath.Join(homes, ".claude"), filepath.Join(homes, ".claude.json")}
	spec.Sandbox = &sb
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	spec.Stdout, spec.Stderr = outW, errW
	var stdout, stderr string
	var wg sync.WaitGroup
	wg.Add(2)
	read := func(r *os.File, into *string) {
		defer wg.Done()
		b, _ := io.ReadAll(r)
		*into = string(b)
		r.Close()
	}
	go read(outR, &stdout)
	go read(errR, &stderr)
	exited := make(chan host.Exit, 1)
	id, err := l.StartRun(spec, func(e host.Exit) { exited <- e })
	outW.Close()
	errW.Close()
	if err != nil {
		wg.Wait()
		t.Fatal(err)
	}
	harness.Track(t, id.PID)
	var ex host.Exit
	select {
	case ex = <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("the run did not exit: bwrap %d", id.PID)
	}
	wg.Wait()
	if !ex.Known || ex.Code != 0 || ex.Signal != 0 {
		t.Fatalf("exit %+v\nstdout:\n%s\nstderr:\n%s", ex, stdout, stderr)
	}
	if ex.Sandbox != nil && ex.Sandbox.ChildPID > 0 {
		// The sandbox's init, bwrap's child: gone too by the test's end.
		harness.Track(t, ex.Sandbox.ChildPID)
	}
	t.Logf("the stand-in said:\n%s", stdout)
	sec := section(stdout)
	eq := func(name string, want ...string) {
		t.Helper()
		if g := sec[name]; !slices.Equal(g, want) {
			t.Errorf("%s: got %q, want %q", name, g, want)
		}
	}
	eq("argv", "--remote-control")
	eq("cwd", tree)
	// The whole environment is the run's: bwrap adds PWD alone.
	env := append(slices.Clone(wantEnv), "PWD="+tree)
	slices.Sort(env)
	eq("env", env...)
	eq("passwd", strings.TrimSuffix(passwd, "\n"))
	eq("id", "1000", "1000", runUser)
	eq("tree", "hello from trunk")
	eq("home", "home-settings")
}

// section splits the stand-in's output by its "== name" lines.
func section(out string) map[string][]string {
	m := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(l, "== "); ok {
			cur = n
			m[cur] = []string{}
			continue
		}
		if cur != "" && l != "" {
			m[cur] = append(m[cur], l)
		}
	}
	return m
}
