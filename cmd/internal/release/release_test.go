package release_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/setup"
	"github.com/ocx-go/ocx/cmd/internal/release"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages/protocol"
)

// Check-ins the script releases are named by.
var (
	ciA = strings.Repeat("a1", 20)
	ciB = strings.Repeat("b2", 20)
	ciC = strings.Repeat("b2", 10) + strings.Repeat("c3", 10) // shares ciB's first 20 digits
)

// scriptRelease writes a release of shell scripts into a new directory:
// each program says its version line naming checkin, and ocxd answers
// --handoff-version with handoff. lines overrides a program's version line.
func scriptRelease(t *testing.T, checkin string, handoff int, lines map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"ocx", "ocxd", "workspace"} {
		line, ok := lines[p]
		if !ok {
			line = p + " version v0.0.0-20261201000000-" + checkin[:12] + " checkin " + checkin
		}
		script := fmt.Sprintf("#!/bin/sh\ncase \"$1\" in\nversion|--version) echo '%s' ;;\n--handoff-version) echo %d ;;\n*) exit 2 ;;\nesac\n", line, handoff)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// relFix is a node whose node.json names a release root of its own,
// made by `release init` from a release of check-in first.
type relFix struct {
	t      *testing.T
	ctx    context.Context
	root   string
	agents string
	n      *node.Node
}

func newRelFix(t *testing.T, src release.Source) *relFix {
	t.Helper()
	f := &relFix{t: t, ctx: context.Background(), root: filepath.Join(t.TempDir(), "release"), agents: filepath.Join(t.TempDir(), "agents")}
	f.ok(release.Init(f.ctx, release.InitInput{Root: f.root, Source: src}, node.Options{}))
	srv := harness.StartServer(t, harness.Options{})
	f.ok(setup.Init(f.ctx, f.agents, setup.InitInput{Projects: []setup.InitProject{{Name: "demo", Repository: srv.Repo, URL: srv.URL}}, ReleaseRoot: f.root}, node.Options{}))
	n, err := node.Open(f.agents, node.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.n = n
	return f
}

func (f *relFix) ok(a *node.Answer) *node.Answer {
	f.t.Helper()
	if !a.OK() {
		f.t.Fatalf("%s stopped: %s\nlog:\n%s%s", a.Tool, *a.Stopped, strings.Join(a.Log, "\n"), f.daemonLog())
	}
	return a
}

// daemonLog is the daemon's log, for a failure's message: what the
// daemon did is often why an answer went wrong.
func (f *relFix) daemonLog() string {
	b, err := os.ReadFile(f.n.Layout.Log())
	if err != nil {
		return ""
	}
	return "\nthe daemon's log:\n" + string(b)
}

// refused checks that a stopped, naming each of want.
func (f *relFix) refused(a *node.Answer, want ...string) {
	f.t.Helper()
	if a.OK() {
		f.t.Fatalf("%s did its work; want it refused naming %q\nlog:\n%s%s", a.Tool, want, strings.Join(a.Log, "\n"), f.daemonLog())
	}
	for _, w := range want {
		if !strings.Contains(*a.Stopped, w) {
			f.t.Fatalf("%s stopped with %q; want it to name %q%s", a.Tool, *a.Stopped, w, f.daemonLog())
		}
	}
}

// links reads every link of the root: name -> target.
func (f *relFix) links() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	for _, dir := range []string{f.root, filepath.Join(f.root, "staged"), filepath.Join(f.root, "undo")} {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			f.t.Fatal(err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if t, err := os.Readlink(p); err == nil {
				rel, _ := filepath.Rel(f.root, p)
				out[rel] = t
			}
		}
	}
	return out
}

func (f *relFix) wantLinks(want map[string]string) {
	f.t.Helper()
	got := f.links()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		f.t.Fatalf("links:\n got %v\nwant %v", got, want)
	}
}

// leftovers lists what a stage may leave only while it runs: .stage-*
// directories, and releases other than those named.
func (f *relFix) leftovers(releases ...string) []string {
	f.t.Helper()
	var out []string
	entries, _ := os.ReadDir(f.root)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	entries, _ = os.ReadDir(filepath.Join(f.root, "releases"))
	for _, e := range entries {
		found := false
		for _, r := range releases {
			found = found || e.Name() == r
		}
		if !found {
			out = append(out, "releases/"+e.Name())
		}
	}
	return out
}

func logHas(a *node.Answer, s string) bool {
	for _, l := range a.Log {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// TestReleaseCheckDecisions: the version line of each program names it and
// the release's check-in; a directory's programs agree on one stamped
// check-in; the hand-off versions are equal.
func TestReleaseCheckDecisions(t *testing.T) {
	line := func(p, c string) []byte { return []byte(p + " version v0.0.0-1-x checkin " + c + "\n") }
	if _, err := release.CheckVersionLine("ocxd", ciA, line("ocxd", ciA)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out  []byte
		want string
	}{
		{line("ocxd", ciB), "built from check-in " + ciB},
		{line("ocx", ciA), `says it is "ocx"`},
		{line("ocxd", "dev"), "unstamped"},
		{[]byte("ocxd 1.0\n"), "not a version line"},
		{nil, "not a version line"},
	} {
		if _, err := release.CheckVersionLine("ocxd", ciA, c.out); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckVersionLine(%q) = %v; want it to say %q", c.out, err, c.want)
		}
	}
	all := func(c map[string]string) map[string][]byte {
		m := map[string][]byte{}
		for p, ci := range c {
			m[p] = line(p, ci)
		}
		return m
	}
	if got, err := release.CheckinOfVersions(all(map[string]string{"ocx": ciA, "ocxd": ciA, "workspace": ciA})); err != nil || got != ciA {
		t.Fatalf("CheckinOfVersions = %q, %v", got, err)
	}
	for _, c := range []struct {
		in   map[string][]byte
		want string
	}{
		{all(map[string]string{"ocx": ciA, "ocxd": ciB}), "a release is one check-in"},
		{all(map[string]string{"ocx": "dev", "ocxd": "dev"}), "unstamped"},
		{all(map[string]string{"ocx": "v1.2.3"}), "full hash"},
		{map[string][]byte{"ocxd": line("ocx", ciA)}, `says it is "ocx"`},
		{map[string][]byte{}, "no program"},
	} {
		if _, err := release.CheckinOfVersions(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckinOfVersions(%v) = %v; want it to say %q", c.in, err, c.want)
		}
	}
	if err := release.CheckHandoffVersion([]byte("1\n"), 1); err != nil {
		t.Fatal(err)
	}
	if err := release.CheckHandoffVersion([]byte("2\n"), 1); err == nil || !strings.Contains(err.Error(), "reads hand-off version 2, the running daemon writes 1") {
		t.Fatalf("another hand-off version: %v", err)
	}
	if err := release.CheckHandoffVersion([]byte("usage: ocxd ...\n"), 1); err == nil || !strings.Contains(err.Error(), "not a number") {
		t.Fatalf("no number: %v", err)
	}
}

// TestReleaseStageFromTwiceStagesOnce: staging programs already built
// copies them into releases/CHECKIN after the host checks and links
// staged/CHECKIN and staged/next; staging them again says so and touches
// neither the release nor the links.
func TestReleaseStageFromTwiceStagesOnce(t *testing.T) {
	f := newRelFix(t, release.Source{From: scriptRelease(t, ciA, protocol.HandoffVersion, nil)})
	from := scriptRelease(t, ciB, protocol.HandoffVersion, nil)
	a := f.ok(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{From: from}}))
	if a.Result == nil || *a.Result != ciB {
		t.Fatalf("result %v; want %s", a.Result, ciB)
	}
	for _, check := range []string{"check version: ocxd version", "check hand-off", "check sandbox: workspace answered in bwrap"} {
		if !logHas(a, check) {
			t.Fatalf("the log lacks %q:\n%s", check, strings.Join(a.Log, "\n"))
		}
	}
	want := map[string]string{"current": "releases/" + ciA, "staged/" + ciB: "../releases/" + ciB, "staged/next": ciB}
	f.wantLinks(want)
	prog := filepath.Join(f.root, "releases", ciB, "ocxd")
	before, err := os.Stat(prog)
	if err != nil {
		t.Fatal(err)
	}
	a = f.ok(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{From: from}}))
	if !logHas(a, "staged once") || !logHas(a, "is staged already") {
		t.Fatalf("a second stage does not say it is staged once:\n%s", strings.Join(a.Log, "\n"))
	}
	after, err := os.Stat(prog)
	if err != nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("a second stage touched %s", prog)
	}
	f.wantLinks(want)
	if l := f.leftovers(ciA, ciB); len(l) != 0 {
		t.Fatalf("left behind: %v", l)
	}
	// Staging the current release stages nothing.
	a = f.ok(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{From: filepath.Join(f.root, "current")}}))
	if !logHas(a, "is the current release already") {
		t.Fatalf("staging current:\n%s", strings.Join(a.Log, "\n"))
	}
	f.wantLinks(want)
}

// TestReleaseStageRefusesAFailedCheck: a directory missing a program, one
// whose programs name two check-ins, a program whose line names another
// program, and an ocxd reading another hand-off version are each refused
// naming the check or the program, leaving no release, no link and no
// temporary directory.
func TestReleaseStageRefusesAFailedCheck(t *testing.T) {
	f := newRelFix(t, release.Source{From: scriptRelease(t, ciA, protocol.HandoffVersion, nil)})
	want := map[string]string{"current": "releases/" + ciA}
	missing := scriptRelease(t, ciB, protocol.HandoffVersion, nil)
	os.Remove(filepath.Join(missing, "workspace"))
	for _, c := range []struct {
		name string
		from string
		want []string
	}{
		{"missing", missing, []string{"has no workspace"}},
		{"two check-ins", scriptRelease(t, ciB, protocol.HandoffVersion, map[string]string{"ocxd": "ocxd version v1 checkin " + ciC}), []string{"a release is one check-in", ciC}},
		{"another program", scriptRelease(t, ciB, protocol.HandoffVersion, map[string]string{"workspace": "ocx version v1 checkin " + ciB}), []string{`workspace says it is "ocx"`}},
		{"hand-off", scriptRelease(t, ciB, protocol.HandoffVersion+1, nil), []string{`host check "hand-off" failed`, fmt.Sprintf("reads hand-off version %d", protocol.HandoffVersion+1), "no link was changed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.t = t
			f.refused(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{From: c.from}}), c.want...)
			f.wantLinks(want)
			if l := f.leftovers(ciA); len(l) != 0 {
				t.Fatalf("left behind: %v", l)
			}
		})
	}
	f.t = t
	// A sandbox whose workspace does not answer: a script that needs a
	// shell the sandbox lacks.
	bad := scriptRelease(t, ciB, protocol.HandoffVersion, nil)
	script := "#!/nonexistent/sh\n"
	if err := os.WriteFile(filepath.Join(bad, "workspace"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f.refused(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{From: bad}}), "workspace")
	f.wantLinks(want)
	// Not a source at all.
	f.refused(release.Stage(f.ctx, f.n, release.StageInput{}), "--repo REPO CHECKIN")
	f.refused(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{From: "rel"}}), "not an absolute path")
}

// TestReleaseAcceptAndRollbackWithoutDaemon: accept runs the checks again
// (a staged ocxd changed since reads another hand-off version: refused,
// every link as it was), then moves previous and current and removes the
// staged links; with no daemon it starts none. Rollback swaps current and
// previous; with no previous it is refused naming why. A prefix two staged
// releases share is refused naming both.
func TestReleaseAcceptAndRollbackWithoutDaemon(t *testing.T) {
	f := newRelFix(t, release.Source{From: scriptRelease(t, ciA, protocol.HandoffVersion, nil)})
	f.refused(release.Rollback(f.ctx, f.n, release.RollbackInput{}), "no previous release")
	f.refused(release.Accept(f.ctx, f.n, release.AcceptInput{}), "nothing is staged")
	f.ok(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{From: scriptRelease(t, ciC, protocol.HandoffVersion, nil)}}))
	f.ok(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{From: scriptRelease(t, ciB, protocol.HandoffVersion, nil)}}))
	staged := map[string]string{"current": "releases/" + ciA, "staged/" + ciB: "../releases/" + ciB, "staged/" + ciC: "../releases/" + ciC, "staged/next": ciB}
	f.wantLinks(staged)
	f.refused(release.Accept(f.ctx, f.n, release.AcceptInput{Checkin: ciB[:20]}), "ambiguous", ciB, ciC)
	f.refused(release.Accept(f.ctx, f.n, release.AcceptInput{Checkin: "ffff"}), "no staged release")

	// The staged ocxd changes under the stage: accept's own checks refuse it.
	ocxd := filepath.Join(f.root, "releases", ciB, "ocxd")
	good, _ := os.ReadFile(ocxd)
	bad := strings.Replace(string(good), fmt.Sprintf("echo %d", protocol.HandoffVersion), "echo 99", 1)
	os.WriteFile(ocxd, []byte(bad), 0o755)
	f.refused(release.Accept(f.ctx, f.n, release.AcceptInput{}), `host check "hand-off" failed`, "reads hand-off version 99")
	f.wantLinks(staged)
	os.WriteFile(ocxd, good, 0o755)

	dry := f.ok(release.Accept(f.ctx, f.n, release.AcceptInput{DryRun: true}))
	if !logHas(dry, "would link") {
		t.Fatalf("a dry run says nothing of the links:\n%s", strings.Join(dry.Log, "\n"))
	}
	f.wantLinks(staged)
	a := f.ok(release.Accept(f.ctx, f.n, release.AcceptInput{}))
	if *a.Result != ciB || !logHas(a, "no daemon runs: the next daemon starts on the new current") {
		t.Fatalf("accept: result %s\n%s", *a.Result, strings.Join(a.Log, "\n"))
	}
	if pid, _ := daemonclient.PID(f.n.Layout); pid != 0 {
		t.Fatalf("accept started a daemon (pid %d)", pid)
	}
	f.wantLinks(map[string]string{"current": "releases/" + ciB, "previous": "releases/" + ciA, "staged/" + ciC: "../releases/" + ciC})
	a = f.ok(release.Rollback(f.ctx, f.n, release.RollbackInput{}))
	if *a.Result != ciA {
		t.Fatalf("rollback's result %s", *a.Result)
	}
	f.wantLinks(map[string]string{"current": "releases/" + ciA, "previous": "releases/" + ciB, "staged/" + ciC: "../releases/" + ciC})
	// Accepting by a prefix, staged/next gone.
	f.ok(release.Accept(f.ctx, f.n, release.AcceptInput{Checkin: ciC[:24]}))
	f.wantLinks(map[string]string{"current": "releases/" + ciC, "previous": "releases/" + ciA})

	st, err := release.Status(f.ctx, f.n)
	if err != nil {
		t.Fatal(err)
	}
	if st.Current == nil || st.Current.Checkin != ciC || st.Previous == nil || st.Previous.Checkin != ciA ||
		!strings.Contains(st.Current.Version, "checkin "+ciC) || st.Current.Built == nil || len(st.Staged) != 0 || st.Daemon.Running {
		t.Fatalf("status: %+v", st)
	}
}

// TestReleaseNeedsARoot: a node whose node.json names no release root is
// told how to make one; `release init` makes it only in a missing or empty
// directory, leaves nothing when its release fails a check, and `init
// --release ROOT` then gives the node its root.
func TestReleaseNeedsARoot(t *testing.T) {
	ctx := context.Background()
	srv := harness.StartServer(t, harness.Options{})
	agents := filepath.Join(t.TempDir(), "agents")
	proj := []setup.InitProject{{Name: "demo", Repository: srv.Repo, URL: srv.URL}}
	f := &relFix{t: t, ctx: ctx}
	f.ok(setup.Init(ctx, agents, setup.InitInput{Projects: proj}, node.Options{Release: t.TempDir()}))
	n, err := node.Open(agents, node.Options{Release: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	from := scriptRelease(t, ciA, protocol.HandoffVersion, nil)
	f.refused(release.Stage(ctx, n, release.StageInput{Source: release.Source{From: from}}), "names no release root", "ocx release init ROOT")
	f.refused(release.Accept(ctx, n, release.AcceptInput{}), "names no release root")

	root := filepath.Join(t.TempDir(), "rel")
	f.refused(setup.Init(ctx, agents, setup.InitInput{ReleaseRoot: root}, node.Options{}), "has no current release", "ocx release init")
	f.refused(release.Init(ctx, release.InitInput{Root: root, Source: release.Source{From: scriptRelease(t, ciA, 99, nil)}}, node.Options{}), `host check "hand-off"`)
	if _, err := os.Lstat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed release init left %s: %v", root, err)
	}
	f.ok(release.Init(ctx, release.InitInput{Root: root, Source: release.Source{From: from}}, node.Options{}))
	f.refused(release.Init(ctx, release.InitInput{Root: root, Source: release.Source{From: from}}, node.Options{}), "is not empty")
	f.ok(setup.Init(ctx, agents, setup.InitInput{ReleaseRoot: root}, node.Options{}))
	n, err = node.Open(agents, node.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Config.Release != root || n.Release != filepath.Join(root, "current") {
		t.Fatalf("node.json's release %q, tools from %q", n.Config.Release, n.Release)
	}
	other := filepath.Join(t.TempDir(), "other")
	f.ok(release.Init(ctx, release.InitInput{Root: other, Source: release.Source{From: from}}, node.Options{}))
	f.refused(setup.Init(ctx, agents, setup.InitInput{ReleaseRoot: other}, node.Options{}), "a node keeps its release root")
}

// srcRepo is a Fossil repository of the test's own with a check-out.
type srcRepo struct {
	t          *testing.T
	f          *fossilio.Fossil
	repo, tree string
}

func newSrcRepo(t *testing.T) *srcRepo {
	t.Helper()
	dir := t.TempDir()
	s := &srcRepo{t: t, repo: filepath.Join(dir, "ocx-src.fossil"), tree: filepath.Join(dir, "tree")}
	s.f = &fossilio.Fossil{Home: dir, User: "maker", Dir: dir}
	s.run("init", s.repo)
	os.Mkdir(s.tree, 0o755)
	s.f.Dir = s.tree
	s.run("open", s.repo, "--nosync")
	s.run("settings", "mtime-changes", "off")
	return s
}

func (s *srcRepo) run(args ...string) string {
	s.t.Helper()
	out, err := s.f.Run(context.Background(), args)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// commit writes files (name -> content) and commits the tree.
func (s *srcRepo) commit(files map[string]string) string {
	s.t.Helper()
	for name, content := range files {
		p := filepath.Join(s.tree, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	s.run("addremove")
	out := s.run("commit", "-m", "change", "--no-warnings")
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "New_Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	s.t.Fatalf("no New_Version in fossil commit's output:\n%s", out)
	return ""
}

// tinyOCX is the source of a stand-in for OCX: a module of OCX's path
// whose ocx, ocxd and workspace only say their version line (stamped by
// the same -X flags) and ocxd its hand-off version. It builds in a second.
func tinyOCX(handoff int) map[string]string {
	files := map[string]string{
		"go.mod":                  "module github.com/ocx-go/ocx\n\ngo 1.21\n",
		"host/version/version.go": "package version\n\nvar (\n\tVersion = \"dev\"\n\tCheckin = \"dev\"\n)\n",
	}
	for _, p := range []string{"ocx", "ocxd", "workspace"} {
		files["cmd/"+p+"/main.go"] = fmt.Sprintf(`package main

import (
	"fmt"
	"os"

	"github.com/ocx-go/ocx/host/version"
)

func main() {
	switch {
	case len(os.Args) == 2 && (os.Args[1] == "version" || os.Args[1] == "--version"):
		fmt.Printf("%%s version %%s checkin %%s\n", %q, version.Version, version.Checkin)
	case len(os.Args) == 2 && os.Args[1] == "--handoff-version":
		fmt.Println(%d)
	default:
		os.Exit(2)
	}
}
`, p, handoff)
	}
	return files
}

// TestReleaseStageFromACheckin: a check-in of a Fossil repository, by a
// unique prefix, is exported, built with the Go toolchain (stamped with its
// check-in, with a runner the source holds) and staged; an ambiguous prefix
// is refused naming the check-ins; a check-in that does not build leaves
// nothing and names the program and the compiler's complaint; no Go
// toolchain on PATH is said so.
func TestReleaseStageFromACheckin(t *testing.T) {
	s := newSrcRepo(t)
	first := s.commit(tinyOCX(protocol.HandoffVersion))
	runner := map[string]string{"cmd/ocx-runner-echo/main.go": "package main\n\nfunc main() {}\n"}
	second := s.commit(runner)
	f := newRelFix(t, release.Source{Repo: s.repo, Checkin: first})
	a := f.ok(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{Repo: s.repo, Checkin: second[:12]}}))
	if *a.Result != second || !logHas(a, "built ocx-runner-echo") || !logHas(a, "check version: ocxd version v0.0.0-") {
		t.Fatalf("stage from a check-in: result %s\n%s", *a.Result, strings.Join(a.Log, "\n"))
	}
	if _, err := os.Stat(filepath.Join(f.root, "releases", second, "ocx-runner-echo")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"current": "releases/" + first, "staged/" + second: "../releases/" + second, "staged/next": second}
	f.wantLinks(want)
	a = f.ok(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{Repo: s.repo, Checkin: second}}))
	if logHas(a, "built ocx (") || !logHas(a, "staged once") {
		t.Fatalf("a second stage of a check-in built it again:\n%s", strings.Join(a.Log, "\n"))
	}

	// Two check-in rows sharing a prefix (test rows: real hashes sharing
	// ten digits would take a million check-ins).
	for i := 1; i <= 2; i++ {
		h := "abcdef0123" + strings.Repeat(fmt.Sprint(i), 54)
		s.run("sql", "-R", s.repo, fmt.Sprintf("INSERT INTO blob(uuid,size,content) VALUES('%s',0,NULL); INSERT INTO event(type,mtime,objid) VALUES('ci',2460000.5,(SELECT rid FROM blob WHERE uuid='%s'));", h, h))
	}
	f.refused(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{Repo: s.repo, Checkin: "abcdef0123"}}),
		"ambiguous", "abcdef0123"+strings.Repeat("1", 54), "abcdef0123"+strings.Repeat("2", 54))
	f.refused(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{Repo: s.repo, Checkin: "0123456789"}}), "holds no check-in \"0123456789\"")

	broken := s.commit(map[string]string{"cmd/ocxd/main.go": "package main\n\nfunc main() { undefinedThing() }\n"})
	f.refused(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{Repo: s.repo, Checkin: broken}}), "build ocxd of check-in "+broken, "undefinedThing")
	f.wantLinks(want)
	if l := f.leftovers(first, second); len(l) != 0 {
		t.Fatalf("a failed build left %v", l)
	}

	// A PATH holding fossil and no go, wherever this machine keeps them.
	fossil, err := exec.LookPath("fossil")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(fossil, filepath.Join(bin, "fossil")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	fixed := s.commit(tinyOCX(protocol.HandoffVersion))
	f.refused(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{Repo: s.repo, Checkin: fixed}}), "no Go toolchain", "--from DIR")
	if l := f.leftovers(first, second); len(l) != 0 {
		t.Fatalf("a stage without go left %v", l)
	}
}

// moduleRoot is this module's directory.
func moduleRoot(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// copySource copies what building this module's programs needs (no test
// files, no test data, no git) into the repository's tree.
func (s *srcRepo) copySource(root string) {
	s.t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		name := d.Name()
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "itest") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, ".") || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(s.tree, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// TestReleaseAcceptReexecsTheDaemon is the whole path on this module's own
// source: two check-ins of a Fossil repository holding a copy of it; the
// release root made from the first (built here), a real daemon started on
// it; the second staged by a prefix and accepted: previous and current move
// and the daemon re-execs the new current's ocxd, keeping its PID, and the
// answer says so; rollback swaps the links and re-execs it back. The status
// names the daemon's release and its last re-exec. The daemon is ended by
// its PID.
func TestReleaseAcceptReexecsTheDaemon(t *testing.T) {
	s := newSrcRepo(t)
	s.copySource(moduleRoot(t))
	first := s.commit(nil)
	second := s.commit(map[string]string{"RELEASE-NOTE": "the second check-in\n"})
	f := newRelFix(t, release.Source{Repo: s.repo, Checkin: first})
	a := f.ok(release.Stage(f.ctx, f.n, release.StageInput{Source: release.Source{Repo: s.repo, Checkin: second[:16]}}))
	if *a.Result != second {
		t.Fatalf("staged %s, want %s", *a.Result, second)
	}

	if _, err := daemonclient.Ensure(f.ctx, f.n.Layout, filepath.Join(f.root, "current", "ocxd"), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	pid, _ := daemonclient.PID(f.n.Layout)
	t.Cleanup(func() { endDaemonPID(t, f.n, pid) })
	if pid == 0 {
		t.Fatal("no daemon holds the lock")
	}
	exe := func() string {
		p, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return p
	}
	if want := filepath.Join(f.root, "releases", first, "ocxd"); exe() != want {
		t.Fatalf("the daemon runs %s, want %s", exe(), want)
	}

	a = f.ok(release.Accept(f.ctx, f.n, release.AcceptInput{Wait: 30 * time.Second}))
	if !logHas(a, fmt.Sprintf("the daemon (pid %d) re-exec'd", pid)) || !logHas(a, "it runs release "+second) {
		t.Fatalf("accept's answer does not report the re-exec:\n%s", strings.Join(a.Log, "\n"))
	}
	f.wantLinks(map[string]string{"current": "releases/" + second, "previous": "releases/" + first})
	if p, _ := daemonclient.PID(f.n.Layout); p != pid {
		t.Fatalf("the daemon's PID is %d after the re-exec, was %d", p, pid)
	}
	if want := filepath.Join(f.root, "releases", second, "ocxd"); exe() != want {
		t.Fatalf("after accept the daemon runs %s, want %s", exe(), want)
	}

	a = f.ok(release.Rollback(f.ctx, f.n, release.RollbackInput{Wait: 30 * time.Second}))
	if !logHas(a, "it runs release "+first) {
		t.Fatalf("rollback's answer does not report the re-exec:\n%s", strings.Join(a.Log, "\n"))
	}
	f.wantLinks(map[string]string{"current": "releases/" + first, "previous": "releases/" + second})
	if want := filepath.Join(f.root, "releases", first, "ocxd"); exe() != want {
		t.Fatalf("after rollback the daemon runs %s, want %s", exe(), want)
	}
	st, err := release.Status(f.ctx, f.n)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Daemon.Running || st.Daemon.PID != pid || st.Daemon.Release != first || st.Daemon.Reexec == nil || !st.Daemon.Reexec.OK || st.Daemon.Reexec.Release != first {
		t.Fatalf("status's daemon: %+v (reexec %+v)", st.Daemon, st.Daemon.Reexec)
	}
}

// endDaemonPID ends the daemon pid with TERM and waits for the lock to be
// free of it.
func endDaemonPID(t *testing.T, n *node.Node, pid int) {
	if pid <= 0 {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if daemonclient.Ended(n.Layout, pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("the daemon (pid %d) did not end on TERM", pid)
	syscall.Kill(pid, syscall.SIGKILL)
}
