package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/host/version"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

// Source says where a release's programs come from: a check-in of a
// Fossil repository holding OCX's source, built here with the Go toolchain,
// or a directory of programs already built. Exactly one of the two.
type Source struct {
	// Repo is a Fossil repository file on the node holding OCX's source,
	// and Checkin one of its check-ins (a full hash or a unique prefix).
	Repo, Checkin string
	// From is a directory holding ocx, ocxd, workspace and any runners,
	// built and stamped elsewhere (`make build`).
	From string
}

func (s Source) validate() error {
	switch {
	case s.From != "" && (s.Repo != "" || s.Checkin != ""):
		return errors.New("release source: give --from DIR or --repo REPO CHECKIN, not both")
	case s.From != "":
		if !filepath.IsAbs(s.From) {
			return fmt.Errorf("release source: --from %q is not an absolute path", s.From)
		}
	case s.Repo == "" && s.Checkin == "":
		return errors.New("release source: give --repo REPO CHECKIN (a check-in of OCX's source) or --from DIR (programs already built)")
	case s.Repo == "":
		return fmt.Errorf("release source: check-in %q of which repository? give --repo REPO", s.Checkin)
	case s.Checkin == "":
		return fmt.Errorf("release source: which check-in of %s? give its hash or a unique prefix", s.Repo)
	case !filepath.IsAbs(s.Repo):
		return fmt.Errorf("release source: --repo %q is not an absolute path", s.Repo)
	}
	return nil
}

// StageInput is what `ocx release stage` takes.
type StageInput struct {
	Source
	DryRun bool
}

// InitInput is what `ocx release init` takes: the release root to
// make (missing or empty) and the release it starts with.
type InitInput struct {
	Root string
	Source
	DryRun bool
}

// AcceptInput is what `ocx release accept` takes.
type AcceptInput struct {
	// Checkin is the staged release to accept, by full hash or a unique
	// prefix among the staged ones; empty means staged/next.
	Checkin string
	// Wait bounds how long to wait for the daemon's re-exec outcome; zero
	// means DefaultReexecWait.
	Wait   time.Duration
	DryRun bool
}

// RollbackInput is what `ocx release rollback` takes.
type RollbackInput struct {
	// Checkin, when given, is the release previous must name: the one a
	// dry run showed (the console's Confirm carries it). A rollback finding
	// another there is refused, and changes nothing.
	Checkin string
	// Wait is as AcceptInput's.
	Wait   time.Duration
	DryRun bool
}

// DefaultReexecWait bounds how long accept and rollback wait for the
// daemon to record its re-exec's outcome.
const DefaultReexecWait = 30 * time.Second

// The host checks, by the names a refusal gives them.
const (
	checkVersion = "version"  // each program starts and says its version line, naming the release's check-in
	checkHandoff = "hand-off" // the staged ocxd reads the hand-off version the running daemon writes
	checkSandbox = "sandbox"  // workspace, from the release, starts in bwrap in a throwaway workspace and answers
)

// checkError is a failed host check: which check, on which release, why.
type checkError struct {
	Check   string
	Release string // the release's directory
	Err     error
}

func (e *checkError) Error() string {
	return fmt.Sprintf("host check %q failed for %s: %v; no link was changed", e.Check, e.Release, e.Err)
}

func (e *checkError) Unwrap() error { return e.Err }

// versionArgs are the arguments that make a release's program print its
// version line. Runners are carried, not asked: a runner is any program (D9).
var versionArgs = map[string][]string{"ocx": {"version"}, "ocxd": {"--version"}, "workspace": {"--version"}}

// CheckVersionLine decides the version check for one program: out must be
// its one version line, naming program and checkin.
func CheckVersionLine(program, checkin string, out []byte) (version.Info, error) {
	info, err := version.Parse(string(out))
	if err != nil {
		return info, fmt.Errorf("%s: %w", program, err)
	}
	switch {
	case info.Program != program:
		return info, fmt.Errorf("%s says it is %q", program, info.Program)
	case !info.Stamped():
		return info, fmt.Errorf("%s is an unstamped build (checkin dev); build it with `make build` from a checkout, or stage it from a check-in", program)
	case info.Checkin != checkin:
		return info, fmt.Errorf("%s was built from check-in %s, not %s", program, info.Checkin, checkin)
	}
	return info, nil
}

// CheckinOfVersions reads the check-in a directory's programs were built
// from: each version line names the same one, a full hash.
func CheckinOfVersions(lines map[string][]byte) (string, error) {
	names := make([]string, 0, len(lines))
	for n := range lines {
		names = append(names, n)
	}
	sort.Strings(names)
	checkin, first := "", ""
	for _, n := range names {
		info, err := version.Parse(string(lines[n]))
		if err != nil {
			return "", fmt.Errorf("%s: %w", n, err)
		}
		if info.Program != n {
			return "", fmt.Errorf("%s says it is %q", n, info.Program)
		}
		if !info.Stamped() {
			return "", fmt.Errorf("%s is an unstamped build (checkin dev): a release is named by its check-in; build it with `make build` from a checkout", n)
		}
		if checkin == "" {
			checkin, first = info.Checkin, n
			continue
		}
		if info.Checkin != checkin {
			return "", fmt.Errorf("%s was built from check-in %s and %s from %s: a release is one check-in", first, checkin, n, info.Checkin)
		}
	}
	if checkin == "" {
		return "", errors.New("no program to read a check-in from")
	}
	if err := host.ValidateCheckin(checkin); err != nil {
		return "", err
	}
	return checkin, nil
}

// CheckHandoffVersion decides the hand-off check: out is the staged ocxd's
// answer to --handoff-version, want what the running daemon writes.
func CheckHandoffVersion(out []byte, want int) error {
	got, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return fmt.Errorf("ocxd --handoff-version answered %q, not a number", shortOut(string(out)))
	}
	if got != want {
		return fmt.Errorf("the staged ocxd reads hand-off version %d, the running daemon writes %d: it could not take over", got, want)
	}
	return nil
}

func shortOut(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// handoffWant is the hand-off version a staged ocxd must read, and whose.
type handoffWant struct {
	version int
	from    string
}

// releaser stages and checks releases in one release root; it needs no
// node, so that `ocx release init` can make a root before node.json names it.
type releaser struct {
	root   host.ReleaseRoot
	fossil string
	// want says which hand-off version the checks require.
	want func(context.Context) (handoffWant, error)
}

// thisBuild is the hand-off version of this build: what a daemon started
// from the same release writes.
func thisBuild(context.Context) (handoffWant, error) {
	return handoffWant{version: protocol.HandoffVersion, from: "this build of ocx"}, nil
}

// releaseRoot is the node's release root, or an error saying how to make one.
func rootOf(n *node.Node) (host.ReleaseRoot, error) {
	if n.Config.Release == "" {
		return host.ReleaseRoot{}, fmt.Errorf("release: this node's node.json names no release root; make one with `ocx release init ROOT --from DIR` (or --repo REPO CHECKIN), then name it with `ocx init --agents %s --release ROOT`", n.Agents)
	}
	return host.NewReleaseRoot(n.Config.Release)
}

func releaserOf(n *node.Node) (*releaser, error) {
	root, err := rootOf(n)
	if err != nil {
		return nil, err
	}
	return &releaser{root: root, fossil: n.Fossil, want: func(ctx context.Context) (handoffWant, error) { return handoffWantOf(ctx, n) }}, nil
}

// handoffWantOf is what the running daemon writes: asked of its own program
// (/proc/PID/exe), or, when that file is gone, of current's ocxd. With no
// daemon, current's ocxd says it: a daemon started next runs it. Without a
// current, this build's.
func handoffWantOf(ctx context.Context, n *node.Node) (handoffWant, error) {
	pid, err := daemonclient.PID(n.Layout)
	if err != nil {
		return handoffWant{}, err
	}
	prog := ""
	if pid > 0 {
		t, err := n.ProcTable()
		if err != nil {
			return handoffWant{}, err
		}
		exe, _, err := t.Executable(pid)
		t.Close()
		if err == nil && !strings.HasSuffix(exe, " (deleted)") {
			prog = exe
		}
	}
	if prog == "" {
		cur := filepath.Join(n.Config.Release, host.LinkCurrent, "ocxd")
		if _, err := os.Stat(cur); err != nil {
			if pid > 0 {
				return handoffWant{}, fmt.Errorf("the running daemon's program (pid %d) cannot be asked its hand-off version, nor current's: %w", pid, err)
			}
			return thisBuild(ctx)
		}
		prog = cur
	}
	out, err := runProgram(ctx, prog, "--handoff-version")
	if err != nil {
		return handoffWant{}, fmt.Errorf("ask %s its hand-off version: %w", prog, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return handoffWant{}, fmt.Errorf("%s --handoff-version answered %q", prog, shortOut(string(out)))
	}
	from := prog + " (no daemon runs; the next starts from it)"
	if pid > 0 {
		from = fmt.Sprintf("the running daemon (pid %d, %s)", pid, prog)
	}
	return handoffWant{version: v, from: from}, nil
}

// programTimeout bounds each program a check runs: the daemon's probe's
// bound (host.ProbeTimeout).
const programTimeout = host.ProbeTimeout

// runProgram runs a program of a release with a bare environment and
// returns its standard output; a failure carries its standard error.
func runProgram(ctx context.Context, prog string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, programTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/nonexistent"}
	cmd.Dir = "/"
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, shortOut(stderr.String()))
	}
	return out, nil
}

// programsIn lists the release programs of dir: its files that
// host.IsReleaseProgram names, refusing a directory missing one of
// host.ReleasePrograms or holding one that is not an executable file.
func programsIn(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // trust:outside the release root, the administrator's, outside the agents root
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if !host.IsReleaseProgram(e.Name()) {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("release %s: %w", dir, err)
		}
		if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			return nil, fmt.Errorf("release %s: %s is not an executable file", dir, e.Name())
		}
		out = append(out, e.Name())
	}
	for _, p := range host.ReleasePrograms {
		if !contains(out, p) {
			return nil, fmt.Errorf("release %s has no %s (a release holds %s, and any %s* runners)", dir, p, strings.Join(host.ReleasePrograms, ", "), host.RunnerPrefix)
		}
	}
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// check runs the host checks on the release in dir, named checkin: each
// program's version line, the hand-off, the sandbox. It changes nothing.
func (r *releaser) check(ctx context.Context, a *node.Answer, dir, checkin string) error {
	progs, err := programsIn(dir)
	if err != nil {
		return &checkError{Check: checkVersion, Release: dir, Err: err}
	}
	for _, p := range progs {
		args, ok := versionArgs[p]
		if !ok {
			a.Logf("check %s: %s is carried as it is (a runner is not asked its version)", checkVersion, p)
			continue
		}
		out, err := runProgram(ctx, filepath.Join(dir, p), args...)
		if err != nil {
			return &checkError{Check: checkVersion, Release: dir, Err: err}
		}
		info, err := CheckVersionLine(p, checkin, out)
		if err != nil {
			return &checkError{Check: checkVersion, Release: dir, Err: err}
		}
		a.Logf("check %s: %s", checkVersion, info)
	}
	want, err := r.want(ctx)
	if err != nil {
		return &checkError{Check: checkHandoff, Release: dir, Err: err}
	}
	out, err := runProgram(ctx, filepath.Join(dir, "ocxd"), "--handoff-version")
	if err != nil {
		return &checkError{Check: checkHandoff, Release: dir, Err: err}
	}
	if err := CheckHandoffVersion(out, want.version); err != nil {
		return &checkError{Check: checkHandoff, Release: dir, Err: fmt.Errorf("%w (%s)", err, want.from)}
	}
	a.Logf("check %s: the staged ocxd reads hand-off version %d, as %s writes", checkHandoff, want.version, want.from)
	line, err := sandboxVersion(ctx, dir)
	if err != nil {
		return &checkError{Check: checkSandbox, Release: dir, Err: err}
	}
	if _, err := CheckVersionLine("workspace", checkin, line); err != nil {
		return &checkError{Check: checkSandbox, Release: dir, Err: fmt.Errorf("in its sandbox, %w", err)}
	}
	a.Logf("check %s: workspace answered in bwrap, in a throwaway workspace, with the release bound read-only", checkSandbox)
	return nil
}

// sandboxVersion runs the release's `workspace --version` in a sandbox built
// as a session's is (host.BwrapArgs; the default template's read-only list,
// the release read-only and first on PATH), in a throwaway workspace, with
// no network, and returns what it printed.
func sandboxVersion(ctx context.Context, dir string) ([]byte, error) {
	ws, err := os.MkdirTemp("", "ocx-release-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(ws)
	sb := messages.Sandbox{ReadWrite: []string{ws}, Homes: []string{}, Path: []string{dir, "/usr/local/bin", "/usr/bin", "/bin"}}
	sb.ReadOnly = append(node.HostReadOnly(), dir)
	argv, err := host.BwrapArgs(host.SandboxSpec{Sandbox: sb, Workspace: ws, Release: dir}, 0, "", []string{filepath.Join(dir, "workspace"), "--version"})
	if err != nil {
		return nil, err
	}
	bwrap, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("no bwrap on PATH to run a sandbox with: %w", err)
	}
	return runProgram(ctx, bwrap, argv[1:]...)
}

// prepared is a release made in a temporary directory and checked, ready
// to be renamed to releases/CHECKIN.
type prepared struct {
	checkin string
	dir     string // the programs
	tmp     string // removed by done
}

func (p *prepared) done() {
	if p != nil && p.tmp != "" {
		os.RemoveAll(p.tmp)
	}
}

// resolve names the check-in a source stages, without building it.
func (r *releaser) resolve(ctx context.Context, src Source) (checkin string, when time.Time, err error) {
	if src.From != "" {
		progs, err := programsIn(src.From)
		if err != nil {
			return "", time.Time{}, err
		}
		lines := map[string][]byte{}
		for _, p := range progs {
			if args, ok := versionArgs[p]; ok {
				out, err := runProgram(ctx, filepath.Join(src.From, p), args...)
				if err != nil {
					return "", time.Time{}, fmt.Errorf("release %s: %w", src.From, err)
				}
				lines[p] = out
			}
		}
		id, err := CheckinOfVersions(lines)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("release %s: %w", src.From, err)
		}
		return id, time.Time{}, nil
	}
	repo, err := fossilio.OpenNode(src.Repo, nil)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("release source: open %s: %w", src.Repo, err)
	}
	defer repo.Close()
	c, err := repo.Checkin(ctx, src.Checkin)
	switch {
	case errors.Is(err, fossilio.ErrNotFound):
		return "", time.Time{}, fmt.Errorf("release source: %s holds no check-in %q: %w", src.Repo, src.Checkin, err)
	case errors.Is(err, fossilio.ErrAmbiguous):
		return "", time.Time{}, fmt.Errorf("release source: check-in prefix %q is ambiguous; give more digits: %w", src.Checkin, err)
	case err != nil:
		return "", time.Time{}, fmt.Errorf("release source: %w", err)
	}
	return c.Hash, c.Time, nil
}

// prepare makes the release of src in a temporary directory under the
// root (copied, or exported and built) and runs the host checks on it.
func (r *releaser) prepare(ctx context.Context, a *node.Answer, src Source, checkin string, when time.Time) (*prepared, error) {
	tmp, err := os.MkdirTemp(r.root.Root(), ".stage-")
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	p := &prepared{checkin: checkin, dir: filepath.Join(tmp, "release"), tmp: tmp}
	if err := os.Mkdir(p.dir, 0o755); err != nil {
		p.done()
		return nil, fmt.Errorf("stage: %w", err)
	}
	if src.From != "" {
		err = copyPrograms(src.From, p.dir)
		if err == nil {
			a.Logf("copied the programs of %s", src.From)
		}
	} else {
		err = r.build(ctx, a, src.Repo, checkin, when, tmp, p.dir)
	}
	if err == nil {
		err = r.check(ctx, a, p.dir, checkin)
	}
	if err != nil {
		p.done()
		return nil, err
	}
	return p, nil
}

// copyPrograms copies the release programs of from into to.
func copyPrograms(from, to string) error {
	progs, err := programsIn(from)
	if err != nil {
		return err
	}
	for _, p := range progs {
		if err := copyFile(filepath.Join(from, p), filepath.Join(to, p)); err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src) // trust:outside the release root, the administrator's, outside the agents root
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755) // trust:outside the release root, the administrator's, outside the agents root
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if serr := out.Sync(); err == nil {
		err = serr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// buildTail is how much of the compiler's output a failed build's error keeps.
const buildTail = 3000

// build exports checkin of repo into tmp/src and builds every program into
// dir: ocx, ocxd, workspace and each cmd/ocx-runner-* the source holds,
// static, trimmed and stamped as `make build` stamps them.
func (r *releaser) build(ctx context.Context, a *node.Answer, repo, checkin string, when time.Time, tmp, dir string) error {
	goExe, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("stage: no Go toolchain: `go` is not on PATH (%v); build the programs elsewhere and stage them with --from DIR", err)
	}
	src := filepath.Join(tmp, "src")
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	f := &fossilio.Fossil{Exe: r.fossil, Home: home, Dir: tmp}
	if err := f.Export(ctx, repo, checkin, src); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	a.Logf("exported check-in %s of %s", checkin, repo)
	progs := append([]string(nil), host.ReleasePrograms...)
	if entries, err := os.ReadDir(filepath.Join(src, "cmd")); err == nil { // trust:outside the release root, the administrator's, outside the agents root
		for _, e := range entries {
			if e.IsDir() && host.IsReleaseProgram(e.Name()) && !contains(progs, e.Name()) {
				progs = append(progs, e.Name())
			}
		}
	}
	ldflags := version.LDFlags(version.Pseudo(when, checkin), checkin)
	env := append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
	if os.Getenv("GOTOOLCHAIN") == "" {
		env = append(env, "GOTOOLCHAIN=local") // a node builds with its own toolchain, never a downloaded one
	}
	for _, p := range progs {
		if _, err := os.Stat(filepath.Join(src, "cmd", p)); err != nil {
			return fmt.Errorf("stage: build %s: check-in %s has no cmd/%s: is %s OCX's source?", p, checkin, p, repo)
		}
		cmd := exec.CommandContext(ctx, goExe, "build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(dir, p), "./cmd/"+p)
		cmd.Dir = src
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			tail := string(out)
			if len(tail) > buildTail {
				tail = "..." + tail[len(tail)-buildTail:]
			}
			return fmt.Errorf("stage: build %s of check-in %s: %w:\n%s", p, checkin, err, strings.TrimSpace(tail))
		}
		a.Logf("built %s (CGO_ENABLED=0 go build -trimpath, version %s)", p, version.Pseudo(when, checkin))
	}
	return nil
}

// install renames a prepared release to releases/CHECKIN. Another stage of
// the same check-in that got there first is not an error: it is staged once.
func (r *releaser) install(p *prepared) (already bool, err error) {
	if err := os.MkdirAll(r.root.Releases(), 0o755); err != nil {
		return false, fmt.Errorf("stage: %w", err)
	}
	dst := r.root.Release(p.checkin)
	if err := os.Rename(p.dir, dst); err != nil {
		if _, serr := os.Lstat(dst); serr == nil {
			return true, nil
		}
		return false, fmt.Errorf("stage: %w", err)
	}
	if d, err := os.Open(r.root.Releases()); err == nil { // trust:outside the release root, the administrator's, outside the agents root
		d.Sync()
		d.Close()
	}
	return false, nil
}

// linkOf reads the release a link of the root names: "" when there is no
// link, an error when it names something else.
func linkOf(link string) (string, error) { return daemonclient.ReleaseLink(link) }

// Stage stages a release (seed 002, "stage a release"): a check-in
// of OCX's source exported and built, or a directory of programs copied,
// into a temporary directory under the root; checked on this host; renamed
// to releases/CHECKIN; then staged/CHECKIN and staged/next. A check-in
// staged already is staged once: releases/CHECKIN is not touched again.
// A failed build or check leaves nothing behind.
func Stage(ctx context.Context, n *node.Node, in StageInput) *node.Answer {
	a := newAnswer("release stage", in.DryRun)
	r, err := releaserOf(n)
	if err != nil {
		return a.Stop(err)
	}
	noteRolledBack(n, a)
	if err := in.validate(); err != nil {
		return a.Stop(err)
	}
	return a.Stop(r.stage(ctx, a, in.Source, in.DryRun))
}

func (r *releaser) stage(ctx context.Context, a *node.Answer, src Source, dry bool) error {
	checkin, when, err := r.resolve(ctx, src)
	if err != nil {
		return err
	}
	a.Logf("the release is check-in %s", checkin)
	cur, err := linkOf(r.root.Current())
	if err != nil {
		return err
	}
	if cur == checkin {
		a.Logf("%s is the current release already: nothing to stage", checkin)
		a.SetResult(checkin)
		return nil
	}
	dir := r.root.Release(checkin)
	if _, err := os.Lstat(dir); err == nil {
		a.Logf("%s exists already: check-in %s is staged once, not built or copied again", dir, checkin)
		if err := r.check(ctx, a, dir, checkin); err != nil {
			return err
		}
	} else if dry {
		if src.From != "" {
			if err := r.check(ctx, a, src.From, checkin); err != nil {
				return err
			}
			a.Would("copy the programs of %s into %s", src.From, dir)
		} else {
			if _, err := exec.LookPath("go"); err != nil {
				return fmt.Errorf("stage: no Go toolchain: `go` is not on PATH; build the programs elsewhere and stage them with --from DIR")
			}
			a.Would("export check-in %s of %s, build its programs, check them, and rename them to %s", checkin, src.Repo, dir)
		}
	} else {
		p, err := r.prepare(ctx, a, src, checkin, when)
		if err != nil {
			return err
		}
		already, err := r.install(p)
		p.done()
		if err != nil {
			return err
		}
		if already {
			a.Logf("another stage of check-in %s made %s meanwhile: it is staged once", checkin, dir)
		} else {
			a.Logf("made %s", dir)
		}
	}
	staged, err := linkOf(r.root.Staged(checkin))
	if err != nil {
		return err
	}
	next, err := linkOf(r.root.Next())
	if err != nil {
		return err
	}
	if staged == checkin && next == checkin {
		a.Logf("%s is staged already, and is staged/next", checkin)
		a.SetResult(checkin)
		return nil
	}
	if dry {
		a.Would("link %s -> %s and %s -> %s", r.root.Staged(checkin), host.StagedTarget(checkin), r.root.Next(), host.NextTarget(checkin))
		a.SetResult(checkin)
		return nil
	}
	if err := os.MkdirAll(r.root.StagedDir(), 0o755); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	if err := unixhost.ReplaceLink(r.root.Staged(checkin), host.StagedTarget(checkin)); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	if err := unixhost.ReplaceLink(r.root.Next(), host.NextTarget(checkin)); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	a.Logf("linked %s and %s", r.root.Staged(checkin), r.root.Next())
	a.SetResult(checkin)
	return nil
}

// Init makes a release root (D32's bootstrap) at in.Root, missing or
// empty, holding one release, built or copied and checked as a stage's,
// and current linking to it; no node is needed. `ocx init --release ROOT`
// then names it in node.json.
func Init(ctx context.Context, in InitInput, opts node.Options) *node.Answer {
	a := newAnswer("release init", in.DryRun)
	root, err := host.NewReleaseRoot(in.Root)
	if err != nil {
		return a.Stop(err)
	}
	if err := in.validate(); err != nil {
		return a.Stop(err)
	}
	if entries, err := os.ReadDir(root.Root()); err == nil && len(entries) > 0 { // trust:outside the release root, the administrator's, outside the agents root
		return a.Stop(fmt.Errorf("release init: %s is not empty; a release root is made in a missing or empty directory (stage into an existing one with `ocx release stage`)", root.Root()))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return a.Stop(fmt.Errorf("release init: %w", err))
	}
	r := &releaser{root: root, fossil: opts.Fossil, want: thisBuild}
	checkin, when, err := r.resolve(ctx, in.Source)
	if err != nil {
		return a.Stop(err)
	}
	a.Logf("the release is check-in %s", checkin)
	if in.DryRun {
		if in.From != "" {
			if err := r.check(ctx, a, in.From, checkin); err != nil {
				return a.Stop(err)
			}
		}
		a.Would("make %s, put the release in %s and link %s -> %s", root.Root(), root.Release(checkin), root.Current(), host.RootTarget(checkin))
		a.SetResult(checkin)
		return a
	}
	made := false
	if _, err := os.Lstat(root.Root()); errors.Is(err, fs.ErrNotExist) {
		made = true
	}
	if err := os.MkdirAll(root.Root(), 0o755); err != nil {
		return a.Stop(fmt.Errorf("release init: %w", err))
	}
	fail := func(err error) *node.Answer {
		// Nothing half-made is left: the root goes if init made it, or is
		// emptied again.
		if made {
			os.RemoveAll(root.Root())
		} else {
			os.RemoveAll(root.Releases())
			os.Remove(root.Current())
		}
		return a.Stop(err)
	}
	p, err := r.prepare(ctx, a, in.Source, checkin, when)
	if err != nil {
		return fail(err)
	}
	_, err = r.install(p)
	p.done()
	if err != nil {
		return fail(err)
	}
	if err := unixhost.ReplaceLink(root.Current(), host.RootTarget(checkin)); err != nil {
		return fail(fmt.Errorf("release init: %w", err))
	}
	a.Logf("made %s and linked %s -> %s", root.Release(checkin), root.Current(), host.RootTarget(checkin))
	a.Logf("next: `ocx init --agents AGENTS --release %s ...` names it in node.json", root.Root())
	a.SetResult(checkin)
	return a
}

// stagedMatching resolves a staged check-in by its full hash or a unique
// prefix among the staged links; "" means staged/next.
func (r *releaser) stagedMatching(want string) (string, error) {
	if want == "" {
		id, err := linkOf(r.root.Next())
		if err != nil {
			return "", err
		}
		if id == "" {
			return "", fmt.Errorf("accept: nothing is staged (%s is missing); stage a release first with `ocx release stage`", r.root.Next())
		}
		return id, nil
	}
	want = strings.ToLower(strings.TrimSpace(want))
	entries, err := os.ReadDir(r.root.StagedDir()) // trust:outside the release root, the administrator's, outside the agents root
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("accept: %w", err)
	}
	var matches []string
	for _, e := range entries {
		name := e.Name()
		if name == host.LinkNext || strings.HasPrefix(name, ".") || !strings.HasPrefix(name, want) {
			continue
		}
		matches = append(matches, name)
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("accept: no staged release is check-in %q (staged: %s)", want, strings.Join(r.stagedNames(), ", "))
	case 1:
		return matches[0], nil
	}
	return "", fmt.Errorf("accept: %q is ambiguous among the staged releases: %s", want, strings.Join(matches, ", "))
}

// stagedNames lists the staged check-ins, or "none".
func (r *releaser) stagedNames() []string {
	entries, _ := os.ReadDir(r.root.StagedDir()) // trust:outside the release root, the administrator's, outside the agents root
	var out []string
	for _, e := range entries {
		if e.Name() != host.LinkNext && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// Accept accepts a staged release (seed 002, "accept a release";
// D34): the host checks again, then previous becomes the old current and
// current the staged release, staged/CHECKIN (and staged/next when it named
// it) go, and a running daemon is handed `reexec` and waited for. Without a
// daemon none is started: the next one starts on the new current. A
// re-exec that fails leaves the links as accepted and the old image
// running, and the answer says so; nothing is restarted by itself.
func Accept(ctx context.Context, n *node.Node, in AcceptInput) *node.Answer {
	a := newAnswer("release accept", in.DryRun)
	r, err := releaserOf(n)
	if err != nil {
		return a.Stop(err)
	}
	noteRolledBack(n, a)
	id, err := r.stagedMatching(in.Checkin)
	if err != nil {
		return a.Stop(err)
	}
	if got, err := linkOf(r.root.Staged(id)); err != nil {
		return a.Stop(err)
	} else if got != id {
		return a.Stop(fmt.Errorf("accept: check-in %s is not staged (%s is missing)", id, r.root.Staged(id)))
	}
	cur, err := linkOf(r.root.Current())
	if err != nil {
		return a.Stop(err)
	}
	if cur == id {
		return a.Stop(fmt.Errorf("accept: %s is the current release already", id))
	}
	prev, err := linkOf(r.root.Previous())
	if err != nil {
		return a.Stop(err)
	}
	if err := r.check(ctx, a, r.root.Release(id), id); err != nil {
		return a.Stop(err)
	}
	a.SetResult(id)
	if in.DryRun {
		if cur != "" {
			a.Would("link %s -> %s (the old current)", r.root.Previous(), host.RootTarget(cur))
		}
		a.Would("link %s -> %s, remove %s", r.root.Current(), host.RootTarget(id), r.root.Staged(id))
		a.Would("hand `reexec` to the daemon, if one runs, and wait for its outcome")
		return a
	}
	// What previous named goes to undo/ID first: should the daemon end
	// on the new release before it records its outcome, the rollback puts
	// it back (D73).
	if err := r.clearUndo(); err != nil {
		return a.Stop(fmt.Errorf("accept: %w", err))
	}
	if cur != "" && prev != "" && prev != id {
		if err := os.MkdirAll(r.root.UndoDir(), 0o755); err != nil {
			return a.Stop(fmt.Errorf("accept: %w", err))
		}
		if err := unixhost.ReplaceLink(r.root.Undo(id), host.StagedTarget(prev)); err != nil {
			return a.Stop(fmt.Errorf("accept: %w", err))
		}
	}
	if cur != "" {
		if err := unixhost.ReplaceLink(r.root.Previous(), host.RootTarget(cur)); err != nil {
			return a.Stop(fmt.Errorf("accept: %w", err))
		}
		a.Logf("linked %s -> %s (the old current)", r.root.Previous(), host.RootTarget(cur))
	}
	if err := unixhost.ReplaceLink(r.root.Current(), host.RootTarget(id)); err != nil {
		return a.Stop(fmt.Errorf("accept: %w", err))
	}
	a.Logf("linked %s -> %s", r.root.Current(), host.RootTarget(id))
	if err := unixhost.RemoveLink(r.root.Staged(id)); err != nil {
		return a.Stop(fmt.Errorf("accept: %w", err))
	}
	if next, _ := linkOf(r.root.Next()); next == id {
		if err := unixhost.RemoveLink(r.root.Next()); err != nil {
			return a.Stop(fmt.Errorf("accept: %w", err))
		}
	}
	a.Logf("removed %s", r.root.Staged(id))
	return a.Stop(r.reexec(ctx, n, a, linkChange{id: id, cur: cur, prev: prev}, in.Wait))
}

// Rollback rolls back (seed 002, "roll back a release"; D34): with
// the host checks on previous, current and previous swap, then the same
// re-exec as an accept's.
func Rollback(ctx context.Context, n *node.Node, in RollbackInput) *node.Answer {
	a := newAnswer("release rollback", in.DryRun)
	r, err := releaserOf(n)
	if err != nil {
		return a.Stop(err)
	}
	noteRolledBack(n, a)
	prev, err := linkOf(r.root.Previous())
	if err != nil {
		return a.Stop(err)
	}
	if prev == "" {
		return a.Stop(fmt.Errorf("rollback: there is no previous release (%s is missing): a release root has one once a release was accepted over another", r.root.Previous()))
	}
	cur, err := linkOf(r.root.Current())
	if err != nil {
		return a.Stop(err)
	}
	if cur == "" {
		return a.Stop(fmt.Errorf("rollback: there is no current release (%s is missing)", r.root.Current()))
	}
	if cur == prev {
		return a.Stop(fmt.Errorf("rollback: current and previous are both %s", cur))
	}
	if want := strings.ToLower(strings.TrimSpace(in.Checkin)); want != "" && want != prev {
		return a.Stop(fmt.Errorf("rollback: previous is %s now, not %s: another accept or rollback came between; nothing was changed", prev, want))
	}
	if err := r.check(ctx, a, r.root.Release(prev), prev); err != nil {
		return a.Stop(err)
	}
	a.SetResult(prev)
	if in.DryRun {
		a.Would("link %s -> %s and %s -> %s", r.root.Current(), host.RootTarget(prev), r.root.Previous(), host.RootTarget(cur))
		a.Would("hand `reexec` to the daemon, if one runs, and wait for its outcome")
		return a
	}
	if err := r.clearUndo(); err != nil {
		return a.Stop(fmt.Errorf("rollback: %w", err))
	}
	if err := unixhost.ReplaceLink(r.root.Current(), host.RootTarget(prev)); err != nil {
		return a.Stop(fmt.Errorf("rollback: %w", err))
	}
	if err := unixhost.ReplaceLink(r.root.Previous(), host.RootTarget(cur)); err != nil {
		return a.Stop(fmt.Errorf("rollback: current is %s now, but previous could not be moved to %s: %w", prev, cur, err))
	}
	a.Logf("linked %s -> %s and %s -> %s", r.root.Current(), host.RootTarget(prev), r.root.Previous(), host.RootTarget(cur))
	return a.Stop(r.reexec(ctx, n, a, linkChange{id: prev, cur: cur, prev: prev}, in.Wait))
}

// linkChange is what an accept or a rollback changed: current named cur
// and previous prev; current names id now.
type linkChange struct{ id, cur, prev string }

// clearUndo removes every undo/ link: each was written for an accept that
// an accept or rollback now follows.
func (r *releaser) clearUndo() error {
	entries, err := os.ReadDir(r.root.UndoDir()) // trust:outside the release root, the administrator's, outside the agents root
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := unixhost.RemoveLink(filepath.Join(r.root.UndoDir(), e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// reexec hands a running daemon `reexec` and waits, at most wait, for the
// outcome it records in AGENTS/ocxd.reexec after the line was sent. No
// daemon is started for it. A release the daemon refused before the exec
// has the links put back as they were before c; one whose daemon ended
// before it recorded its outcome is rolled back (daemonclient.Recover,
// D73).
func (r *releaser) reexec(ctx context.Context, n *node.Node, a *node.Answer, c linkChange, wait time.Duration) error {
	id := c.id
	if wait <= 0 {
		wait = DefaultReexecWait
	}
	pid, err := daemonclient.PID(n.Layout)
	if err != nil {
		return fmt.Errorf("re-exec: %w", err)
	}
	if pid == 0 {
		unixhost.RemoveLink(r.root.Undo(id)) // no re-exec to fail
		a.Logf("no daemon runs: the next daemon starts on the new current, %s", id)
		return nil
	}
	sent := time.Now()
	if err := daemonclient.Send(n.Layout, []pipe.Line{pipe.ReexecLine{}}); err != nil {
		if errors.Is(err, host.ErrNoReader) || errors.Is(err, fs.ErrNotExist) {
			unixhost.RemoveLink(r.root.Undo(id)) // no re-exec to fail
			a.Logf("the daemon (pid %d) reads no pipe (it is stopping): the next daemon starts on the new current, %s", pid, id)
			return nil
		}
		return fmt.Errorf("re-exec: %w; the links stay as they are now (current is %s) and the daemon runs its old image; `ocx release rollback` puts the links back", err, id)
	}
	a.Logf("handed `reexec` to the daemon (pid %d)", pid)
	deadline := sent.Add(wait)
	pending := false
	for {
		if o, err := daemonclient.ReadReexec(n.Layout); err == nil && o != nil && !o.At.Before(sent) {
			switch {
			case o.OK:
				if o.PID != pid {
					return fmt.Errorf("re-exec: the outcome names pid %d, not the daemon's %d", o.PID, pid)
				}
				unixhost.RemoveLink(r.root.Undo(id)) // the release runs: nothing to undo
				a.Logf("the daemon (pid %d) re-exec'd %s: it runs release %s", o.PID, o.Target, o.Release)
				return nil
			case o.State == messages.ReexecRefused:
				return r.putBack(a, c, pid, o)
			case o.State == messages.ReexecRolledBack:
				return fmt.Errorf("re-exec: %s; no daemon runs now: the next start of the daemon (the hook, the console or any tool) runs %s", o.Error, o.From)
			case o.Ended():
				// Exec'd: the new image has yet to record its start, or
				// said it could not and is exiting.
				pending = true
			default:
				return fmt.Errorf("re-exec: the daemon (pid %d) did not re-exec: %s; the links stay as accepted (current is %s) and the old image runs on; `ocx release rollback` puts the links back", pid, o.Error, id)
			}
		}
		if time.Now().After(deadline) {
			if pending {
				return fmt.Errorf("re-exec: the daemon (pid %d) exec'd release %s's ocxd, whose image has not recorded its start within %s; should it end before it does, the next start of the daemon (the hook, the console or any tool) rolls the links back; `ocx release status` shows what it runs", pid, id, wait)
			}
			return fmt.Errorf("re-exec: the daemon (pid %d) recorded no outcome in %s within %s; the links stay as accepted (current is %s); `ocx release status` shows what it runs, and `ocx release rollback` puts the links back", pid, n.Layout.Reexec(), wait, id)
		}
		if daemonclient.Ended(n.Layout, pid) {
			return r.ended(n, pid, c, sent)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("re-exec: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// putBack is the answer to a release the daemon refused before the exec: it
// was proven unable to run as the daemon, so the links go back as they
// were before c (previous never naming the release refused), and the old
// image runs on.
func (r *releaser) putBack(a *node.Answer, c linkChange, pid int, o *messages.ReexecOutcome) error {
	refused := fmt.Sprintf("re-exec: the daemon (pid %d) refused release %s before the exec: %s; it runs its old image on", pid, c.id, strings.TrimPrefix(o.Error, "re-exec: "))
	if c.cur == "" {
		return fmt.Errorf("%s; there was no current before, so the links stay (current is %s)", refused, c.id)
	}
	back := daemonclient.RollbackLinks(c.id, c.cur, c.prev)
	if err := daemonclient.ApplyRollback(r.root, back); err != nil {
		return fmt.Errorf("%s; putting the links back failed: %w; `ocx release status` shows them", refused, err)
	}
	prev := "removed " + r.root.Previous()
	if back.Previous != "" {
		prev = fmt.Sprintf("%s -> %s", r.root.Previous(), host.RootTarget(back.Previous))
	}
	a.Logf("linked %s -> %s and %s, as before", r.root.Current(), host.RootTarget(back.Current), prev)
	return fmt.Errorf("%s; the links are put back: current is %s again", refused, back.Current)
}

// ended is the answer once the daemon ended before its outcome said it
// runs: the release is rolled back when its image ended before it recorded
// its start (or said it could not start); otherwise the links stay.
func (r *releaser) ended(n *node.Node, pid int, c linkChange, sent time.Time) error {
	_, rerr := daemonclient.Recover(n.Layout)
	if o, err := daemonclient.ReadReexec(n.Layout); err == nil && o != nil && !o.At.Before(sent) && o.State == messages.ReexecRolledBack {
		return fmt.Errorf("re-exec: %s; no daemon runs now: the next start of the daemon (the hook, the console or any tool) runs %s", o.Error, o.From)
	}
	if rerr != nil {
		return fmt.Errorf("re-exec: the daemon (pid %d) ended before it recorded its outcome, and rolling release %s back failed: %w; `ocx release rollback` puts the links back", pid, c.id, rerr)
	}
	return fmt.Errorf("re-exec: the daemon (pid %d) ended before it recorded an outcome; the links stay as accepted (current is %s); the next daemon starts on it", pid, c.id)
}

// Info is one release of the root as the status shows it.
type Info struct {
	Checkin string `json:"checkin"`
	// Version is its ocx's version line; absent when it cannot be read.
	Version string `json:"version,omitempty"`
	// Built is when its directory was last written: the end of its build
	// or copy.
	Built *time.Time `json:"built,omitempty"`
	// Error says why the release cannot be read, when it cannot.
	Error string `json:"error,omitempty"`
}

// State is `ocx release status`: the root's links, the daemon, and
// the sessions running a release older than current.
type State struct {
	Root     string                   `json:"root"`
	Current  *Info                    `json:"current"`
	Previous *Info                    `json:"previous"`
	Staged   []Info                   `json:"staged"`
	Next     string                   `json:"next,omitempty"`
	Daemon   messages.DaemonStatus    `json:"daemon"`
	Older    []messages.SessionStatus `json:"older_sessions"`
}

// Status reads the release root and the daemon.
func Status(ctx context.Context, n *node.Node) (*State, error) {
	r, err := releaserOf(n)
	if err != nil {
		return nil, err
	}
	st := &State{Root: r.root.Root(), Staged: []Info{}, Older: []messages.SessionStatus{}}
	info := func(id string) *Info {
		ri := &Info{Checkin: id}
		dir := r.root.Release(id)
		fi, err := os.Stat(dir)
		if err != nil {
			ri.Error = err.Error()
			return ri
		}
		t := fi.ModTime().UTC()
		ri.Built = &t
		out, err := runProgram(ctx, filepath.Join(dir, "ocx"), "version")
		if err != nil {
			ri.Error = err.Error()
			return ri
		}
		ri.Version = strings.TrimSpace(string(out))
		return ri
	}
	for _, l := range []struct {
		path string
		dst  **Info
	}{{r.root.Current(), &st.Current}, {r.root.Previous(), &st.Previous}} {
		id, err := linkOf(l.path)
		if err != nil {
			return nil, err
		}
		if id != "" {
			*l.dst = info(id)
		}
	}
	if st.Next, err = linkOf(r.root.Next()); err != nil {
		return nil, err
	}
	for _, name := range r.stagedNames() {
		if id, err := linkOf(r.root.Staged(name)); err == nil && id != "" {
			st.Staged = append(st.Staged, *info(id))
		}
	}
	d, err := n.DaemonStatus()
	if err != nil {
		return nil, err
	}
	st.Daemon = *d
	ns, err := n.Status(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range ns.Sessions {
		if s.Older {
			st.Older = append(st.Older, s)
		}
	}
	return st, nil
}

// String renders the release state for a person, a line each.
func (s *State) String() string {
	var b strings.Builder
	line := func(what string, ri *Info) {
		if ri == nil {
			fmt.Fprintf(&b, "%-9s none\n", what)
			return
		}
		fmt.Fprintf(&b, "%-9s %s", what, ri.Checkin)
		if ri.Version != "" {
			fmt.Fprintf(&b, "  %s", ri.Version)
		}
		if ri.Built != nil {
			fmt.Fprintf(&b, "  built %s", ri.Built.Format(time.RFC3339))
		}
		if ri.Error != "" {
			fmt.Fprintf(&b, "  unreadable: %s", ri.Error)
		}
		if what == "staged" && ri.Checkin == s.Next {
			b.WriteString("  (next)")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "root      %s\n", s.Root)
	line("current", s.Current)
	line("previous", s.Previous)
	for i := range s.Staged {
		line("staged", &s.Staged[i])
	}
	fmt.Fprintf(&b, "%s\n", s.Daemon.String())
	for _, o := range s.Older {
		fmt.Fprintf(&b, "older     %s (stop it and restart it on the current release: `ocx session restart --release current`)\n", o.String())
	}
	return b.String()
}

// noteRolledBack says, in a release command's answer, that the daemon's
// last re-exec rolled its release back (D73), until another re-exec.
func noteRolledBack(n *node.Node, a *node.Answer) {
	if o, err := daemonclient.ReadReexec(n.Layout); err == nil && o != nil && o.State == messages.ReexecRolledBack {
		a.Logf("the daemon's last re-exec, at %s: %s", o.At.UTC().Format(time.RFC3339), o.Error)
	}
}

// newAnswer starts a release action's answer.
func newAnswer(tool string, dry bool) *node.Answer {
	return &node.Answer{Tool: tool, DryRun: dry, Log: []string{}}
}
