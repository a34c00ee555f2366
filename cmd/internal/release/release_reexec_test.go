package release_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/release"
	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// stampedBuild builds this tree's ocx, ocxd and workspace into a new
// directory, stamped with checkin as `make build` stamps them.
func stampedBuild(t *testing.T, checkin string) string {
	t.Helper()
	dir := t.TempDir()
	const v = "github.com/ocx-go/ocx/host/version"
	ldflags := "-X " + v + ".Version=v0.0.0-20260101000000-" + checkin[:12] + " -X " + v + ".Checkin=" + checkin
	for _, p := range []string{"ocx", "ocxd", "workspace"} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(dir, p), "github.com/ocx-go/ocx/cmd/"+p)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s stamped %s: %v\n%s", p, checkin, err, out)
		}
	}
	return dir
}

// TestReleaseAcceptReexecFails: a re-exec refused after accept's host
// checks passed, as when the staged ocxd is changed on disk between the
// checks and the exec. The staged ocxd says its version line and answers
// the right hand-off version to the checks (the stage's and the
// accept's), and another to every later ask: the running daemon's own
// probe of the new current's ocxd refuses it, so the daemon does not exec.
// The release is proven unable to run as the daemon, so accept puts the
// links back as they were (D73: current the release the daemon runs, no
// previous, as before) and says so; the old image runs on (same PID, same
// /proc/PID/exe); the outcome file and the status hold the refusal.
func TestReleaseAcceptReexecFails(t *testing.T) {
	f := newRelFix(t, release.Source{From: stampedBuild(t, ciA)})
	changing := scriptRelease(t, ciB, protocol.HandoffVersion, nil)
	asked := filepath.Join(t.TempDir(), "asked")
	ocxd := "#!/bin/sh\ncase \"$1\" in\n--version) echo 'ocxd version v0.0.0-20261201000000-" + ciB[:12] + " checkin " + ciB + "' ;;\n" +
		"--handoff-version) echo x >> " + asked + "; if [ $(wc -l < " + asked + ") -le 2 ]; then echo " + strconv.Itoa(protocol.HandoffVersion) + "; else echo 99; fi ;;\n*) exit 2 ;;\nesac\n"
	if err := os.WriteFile(filepath.Join(changing, "ocxd"), []byte(ocxd), 0o755); err != nil {
		t.Fatal(err)
	}

	if _, err := daemonclient.Ensure(f.ctx, f.n.Layout, filepath.Join(f.root, "current", "ocxd"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	pid, _ := daemonclient.PID(f.n.Layout)
	t.Cleanup(func() { endDaemonPID(t, f.n, pid) })
	if pid == 0 {
		t.Fatal("no daemon holds the lock")
	}
	exeA := filepath.Join(f.root, "releases", ciA, "ocxd")
	exe := func() string {
		p, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
		return p
	}
	if exe() != exeA {
		t.Fatalf("the daemon runs %s, want %s", exe(), exeA)
	}

	a := f.ok(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{From: changing}}))
	if !logHas(a, "check hand-off: the staged ocxd reads hand-off version") {
		t.Fatalf("stage did not run the hand-off check:\n%s", strings.Join(a.Log, "\n"))
	}
	sent := time.Now()
	a = release.Accept(f.ctx, f.n, release.AcceptInput{Wait: 60 * time.Second})
	for _, c := range []string{"check version", "check hand-off", "check sandbox", "handed `reexec` to the daemon"} {
		if !logHas(a, c) {
			t.Fatalf("accept's log lacks %q:\n%s", c, strings.Join(a.Log, "\n"))
		}
	}
	f.refused(a, "refused release "+ciB+" before the exec", "hand-off version", "it runs its old image on", "the links are put back: current is "+ciA+" again")
	f.wantLinks(map[string]string{"current": "releases/" + ciA})
	if p, _ := daemonclient.PID(f.n.Layout); p != pid || exe() != exeA {
		t.Fatalf("after the failed re-exec the daemon is pid %d running %s; want pid %d running %s", p, exe(), pid, exeA)
	}
	data, err := os.ReadFile(f.n.Layout.Reexec())
	if err != nil {
		t.Fatal(err)
	}
	o, err := messages.DecodeReexecOutcome(data)
	if err != nil {
		t.Fatal(err)
	}
	if o.OK || o.PID != pid || o.At.Before(sent) || !strings.Contains(o.Error, "hand-off version") || !strings.Contains(o.Target, ciB) ||
		o.State != messages.ReexecRefused || o.From != ciA || o.Release != ciB {
		t.Fatalf("the outcome file: %+v", o)
	}

	// The status shows the daemon and the failure: ocx status's daemon,
	// valid against the schema, and its one line.
	st, err := f.n.Status(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Daemon == nil || !st.Daemon.Running || st.Daemon.PID != pid || st.Daemon.Release != ciA || st.Daemon.Reexec == nil || st.Daemon.Reexec.OK {
		t.Fatalf("the status's daemon: %+v", st.Daemon)
	}
	doc, err := st.Encode()
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.Validate("state.schema.json", doc); err != nil {
		t.Fatalf("the status with a failed re-exec is not valid: %v\n%s", err, doc)
	}
	if line := st.Daemon.String(); !strings.Contains(line, "pid="+strconv.Itoa(pid)) || !strings.Contains(line, "reexec=failed reexec_state=refused reexec_release="+ciB) {
		t.Fatalf("the daemon's line: %s", line)
	}
	// previous names no release that failed: a rollback finds none.
	f.refused(release.Rollback(f.ctx, f.n, release.RollbackInput{}), "there is no previous release")
}
