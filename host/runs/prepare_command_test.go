package runs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// commandStepRun is section 5's pattern, then a command step running
// script with sh in $$tree$$, in a sandbox as uid 1000, with limits.
func commandStepRun(t *testing.T, script, limits string) *runmsg.Run {
	t.Helper()
	steps := strings.TrimSuffix(seedPattern, "]") + `,
    {"step": "command", "run": ["sh", "-c", ` + quoteJSON(script) + `, "$$checkout$$"], "in": "$$tree$$"}]`
	if limits != "" {
		limits = `"limits": ` + limits + `,`
	}
	return readRun(t, `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "Build, then read.",
  "workspace": `+steps+`,
  "sandbox": {"uid": 1000, "gid": 1000, "capabilities": [], "network": true, "own_session": true, "ends_with_node": true,
    "read_only": ["/usr", "/bin", "/lib", "/lib64"], "read_write": ["$$workspace$$"], "homes": [], "files": [],
    "proc": "/proc", "dev": "/dev", "tmp": "/tmp"}, `+limits+`
  "process": {"user": "`+runUser+`", "command": ["cat", "out"], "cwd": "$$tree$$",
    "env": {"PATH": "/usr/bin:/bin", "HOME": "$$workspace$$", "STEP_SAYS": "from-env"}}}`)
}

func quoteJSON(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// newStepLauncher is the real launcher, for a fixture's command steps.
func newStepLauncher(t *testing.T, f *fixture) *unixhost.Launcher {
	t.Helper()
	l, err := unixhost.NewLauncher(unixhost.LauncherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if why := l.RunSupport().Sandbox; why != "" {
		t.Fatalf("this host starts no sandboxed run (make deps installs bwrap): %s", why)
	}
	f.p.Support, f.p.Launcher = l.RunSupport(), l
	return l
}

// The command step runs after the checkout, in the run's sandbox as its
// uid, with the run's environment, in its in; what it writes is there for
// the process; its output is kept, STDERR and STDOUT together.
func TestPrepareCommandStep(t *testing.T) {
	f := newFixture(t)
	newStepLauncher(t, f)
	ctx := ctxT(t)
	run := commandStepRun(t, `echo built > out; id -u; echo "$STEP_SAYS $0 $(pwd)"; cat README.txt; echo to-stderr >&2`, "")
	got, err := f.p.Make(ctx, run, runHash)
	if err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(f.root, runUser, "projects", "demo", runHash, "tree")
	if b, err := os.ReadFile(filepath.Join(tree, "out")); err != nil || string(b) != "built\n" {
		t.Errorf("the step's file: %q %v", b, err)
	}
	if len(got.Steps) != 1 {
		t.Fatalf("steps kept: %+v", got.Steps)
	}
	s := got.Steps[0]
	want := "1000\nfrom-env " + f.trunk + " " + tree + "\nhello from trunk\nto-stderr\n"
	if !s.OK || s.Step != 4 || s.Exit != "exit 0" || string(s.End) != want || s.Total != int64(len(want)) {
		t.Errorf("the step's log: %+v %q, want %q", s, s.End, want)
	}
	if got.Spec.Dir != tree || got.Spec.Command[0] != "cat" {
		t.Errorf("the process's spec is the process's: %+v", got.Spec)
	}
}

// A command step's output goes through the kept logs' filter (D98), as
// the process's does: keep.mask masked, only the lines keep.match
// matches kept (after masking).
func TestPrepareCommandStepFiltered(t *testing.T) {
	f := newFixture(t)
	newStepLauncher(t, f)
	run := commandStepRun(t, `echo ERROR one; echo the token tok-abc here; echo fine; echo ERROR tok-abc`, "")
	run.Process.Keep = &runmsg.RunKeep{Mask: []string{"tok-abc"}, Match: `ERROR|\*\*\*`}
	got, err := f.p.Make(ctxT(t), run, runHash)
	if err != nil {
		t.Fatal(err)
	}
	want := "ERROR one\nthe token *** here\nERROR ***\n"
	if len(got.Steps) != 1 || string(got.Steps[0].End) != want {
		t.Fatalf("the step's kept output: %+v, want %q", got.Steps, want)
	}
}

// A command step that fails ends the run refused (row 10), the note naming
// the step, its kind and its exit; what it printed is kept.
func TestPrepareCommandStepFails(t *testing.T) {
	f := newFixture(t)
	newStepLauncher(t, f)
	ctx := ctxT(t)

	t.Run("exit 3", func(t *testing.T) {
		got, err := f.p.Make(ctx, commandStepRun(t, `echo going to fail; exit 3`, ""), runHash)
		mustRefuse(t, err, runmsg.RefusedStepFailed, 4, "workspace[4], a command step, failed", "exit 3")
		if len(got.Steps) != 1 || got.Steps[0].OK || string(got.Steps[0].End) != "going to fail\n" || got.Steps[0].Exit != "exit 3" {
			t.Errorf("kept: %+v", got.Steps)
		}
	})
	t.Run("a signal", func(t *testing.T) {
		_, err := f.p.Make(ctx, commandStepRun(t, `kill -9 $$`, ""), runHash)
		mustRefuse(t, err, runmsg.RefusedStepFailed, 4, "workspace[4], a command step, failed", "exit 137")
	})
	t.Run("past the wall", func(t *testing.T) {
		start := time.Now()
		got, err := f.p.Make(ctx, commandStepRun(t, `echo waiting; exec sleep 999`, `{"wall": "2s"}`), runHash)
		mustRefuse(t, err, runmsg.RefusedStepFailed, 4, "workspace[4], a command step, failed", "went past limits.wall (2s)")
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("took %s", d)
		}
		if len(got.Steps) != 1 || string(got.Steps[0].End) != "waiting\n" {
			t.Errorf("kept: %+v", got.Steps)
		}
	})
	t.Run("a program not there", func(t *testing.T) {
		run := commandStepRun(t, `true`, "")
		run.Workspace[4].Run = []string{"/no/such/program"}
		_, err := f.p.Make(ctx, run, runHash)
		mustRefuse(t, err, runmsg.RefusedStepFailed, 4, "workspace[4], a command step, failed")
	})
	t.Run("in outside the workspace", func(t *testing.T) {
		run := commandStepRun(t, `true`, "")
		run.Workspace[4].In = "$$root$$"
		got, err := f.p.Make(ctx, run, runHash)
		mustRefuse(t, err, runmsg.RefusedStepFailed, 4, "workspace[4], a command step, failed", "is not the run's workspace")
		if len(got.Steps) != 0 {
			t.Errorf("a step refused before anything ran printed %+v", got.Steps)
		}
	})
}

// A stop (the context's end) during a command step ends its process group
// at once: Make returns the context's error, and nothing of it runs on.
func TestPrepareCommandStepStopped(t *testing.T) {
	f := newFixture(t)
	newStepLauncher(t, f)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	tree := filepath.Join(f.root, runUser, "projects", "demo", runHash, "tree")
	cancelled := make(chan time.Time, 1)
	go func() {
		for !exists(filepath.Join(tree, "started")) {
			time.Sleep(20 * time.Millisecond)
		}
		cancelled <- time.Now()
		cancel()
	}()
	_, err := f.p.Make(ctx, commandStepRun(t, `touch started; sleep 999 & sleep 998; wait`, ""), runHash)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the context's end", err)
	}
	// TERM ends it: no KILL was waited for.
	if d := time.Since(<-cancelled); d >= stepGrace {
		t.Errorf("ended %s after the stop", d)
	}
	// Neither sleep is left: the group ended (the sandbox's PID namespace
	// goes with its init).
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.HasPrefix(string(b), "sleep\x00999") || strings.HasPrefix(string(b), "sleep\x00998") {
			t.Errorf("left running: %s %q", p, b)
		}
	}
}
