package runs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Prepare is the run core's RunPrepare effect (seed 004, section 10: "runs
// layers 2 to 4"): the workspace's steps made on the host, then the
// sandbox, limits and process mapped onto a host.RunSpec, checked against
// what the host can provide (section 11, row 8) and the node's own files
// (row 9). docs/runs.md, sections "5. The workspace layer" and "6 and 7 on
// the node".

func (n NodeValues) check() error {
	for _, f := range []struct{ name, v string }{{"root", n.Root}, {"project", n.Project}, {"node", n.Node},
		{"server", n.Server}, {"release", n.Release}} {
		if f.v == "" {
			return fmt.Errorf("runs: prepare: the node's value %s is not set", f.name)
		}
	}
	for _, f := range []struct{ name, v string }{{"root", n.Root}, {"release", n.Release}} {
		if !filepath.IsAbs(f.v) || filepath.Clean(f.v) != f.v {
			return fmt.Errorf("runs: prepare: the node's value %s %q is not an absolute, clean path", f.name, f.v)
		}
	}
	return nil
}

// Layers makes runs' workspaces on this host and maps their other layers
// onto what host.RunStarter starts. One Layers serves every run of the
// node; Prepare may be called for several runs at once, but never for two
// runs of one user at once on the server's node (the password step sets
// the user's password afresh: section 5, "it runs one run at a time for
// each user"), which the engine sees to.
type Layers struct {
	// Values are the node's values (table 2).
	Values NodeValues
	// Fossil is the fossil executable; "" is "fossil" on PATH.
	Fossil string
	// Repository is the server's repository file, on the server's node:
	// its password step sets a fresh password there. "" on a node on
	// another host, whose password step reads Passwords.
	Repository string
	// Passwords is the node's file of passwords (AGENTS/run-passwords), on
	// a node on another host.
	Passwords string
	// ProjectCode, when known, lets a clone be made with the shared secret,
	// so that the password is never on fossil's command line; the server's
	// node reads it from Repository when it is "".
	ProjectCode string
	// Files are the node's own files (section 6), as the node names them:
	// its repository, its runs' state directory, its release root, its file
	// of passwords. Prepare sets Release and Workspace for each run and
	// follows the links (unixhost.ResolveNodeFiles) before row 9's check.
	Files host.NodeFiles
	// Support is what the host can provide a run (unixhost.Launcher's
	// RunSupport): row 8.
	Support host.RunSupport
	// DiskDir is where a run asking limits.disk has the image of its
	// workspace's own file system (D82), HASH.disk: the node's run state
	// directory, which no sandbox may reach (row 9). The engine removes it
	// when the run leaves the node's care.
	DiskDir string
	// NewPassword makes the fresh password of the server's node's password
	// step; nil is fossilio.NewPassword.
	NewPassword func() string

	// Launcher starts the command steps' processes (D99); nil is a
	// unixhost.Launcher of the step's own, as the holder makes one.
	Launcher StepLauncher
	// RunCgroup names the cgroup of a run (host.Layout.RunCgroup) that a
	// command step is held in when the run's limits need one, as its
	// process is; nil: none, and a run asking such a limit is refused
	// its command steps' cgroup by the launcher.
	RunCgroup func(hash string) string
}

// Made is a run made ready to launch.
type Made struct {
	// Values is every value set, as it was: the node's (table 2), then the
	// steps' (workspace, clone, tree, checkout): what started lists.
	Values runmsg.RunValues
	// Limits are the limits applied, as written: what started lists ({}
	// for a run without limits). Wall is the engine's to enforce.
	Limits runmsg.RunLimits
	// Run is the run with every value in place and the process's defaults
	// filled in (runmsg.Run.Expand).
	Run *runmsg.Run
	// Spec is what unixhost.Launcher.StartRun starts, its streams nil: the
	// engine sets Stdin, Stdout and Stderr for each launch.
	Spec host.RunSpec
	// Secrets are the run's own secrets, which its kept logs never hold
	// (D98): the password its password step took, in every form the node
	// knows it by. Never a value.
	Secrets []string
	// Steps are what the command steps printed, in order (D99); Make
	// returns them with a refusal too, the failing step's last.
	Steps []StepLog
}

// prepareError is a run refused while it was prepared: Row is section 11's
// row (2 or 3 for a field that does not hold once its values are in place,
// 6 for no password, 8 for what the host cannot provide, 9 for a path
// reaching the node's own files, 10 for a workspace step that failed) and
// Note is ended's note, naming the step and why, or the field, or the path.
// Any other error of Prepare is the node's trouble, not the run's (the
// context ended, the node's own values are wrong): the run stays in care
// and may be prepared again.
type prepareError struct {
	Row  runmsg.RefusalRow
	Step int // the failing step's index in the workspace; -1 when no step failed
	Note string
	Err  error
}

func (e *prepareError) Error() string { return "runs: prepare: " + e.Note }

// Unwrap gives the cause, which the note already renders.
func (e *prepareError) Unwrap() error { return e.Err }

// Refusal is the refusal ended's note says.
func (e *prepareError) Refusal() *runmsg.Refusal {
	return &runmsg.Refusal{Row: e.Row, Note: e.Note}
}

func refused(row runmsg.RefusalRow, note string, err error) *prepareError {
	return &prepareError{Row: row, Step: -1, Note: note, Err: err}
}

// fieldRefusal is a refusal for an error of messages' (a *FieldError): row 3
// for a value not set, row 2 for a field of the wrong form.
func fieldRefusal(err error) *prepareError {
	if errors.Is(err, runmsg.ErrUnsetValue) {
		return refused(runmsg.RefusedSteps, "run: "+err.Error(), err)
	}
	return refused(runmsg.RefusedMalformed, err.Error(), err)
}

// plannedCheckout stands for the check-in a checkout step will resolve to,
// while the run is checked before any step (a sandbox naming $$checkout$$ is
// checked with it, then again with the check-in itself).
const plannedCheckout = "0000000000000000000000000000000000000000000000000000000000000000"

// Make runs layers 2 to 4 of the run whose hash is hash: first it checks
// the whole run with the values the steps will set as their arguments say
// (row 3; every step's paths; the password there is to take, row 6; the
// sandbox and limits, rows 8 and 9), so that a run refused then has nothing
// made; then it runs the workspace's steps in order, each setting its
// values; then it puts every value in place and checks rows 8 and 9 again,
// now that the workspace is on the host and its links can be followed. A
// refusal is a *PrepareError; a step that fails has removed what it was
// making (a clone, a tree), and what the steps before it made stays (the
// directory: the next directory step at that place removes it).
func (p *Layers) Make(ctx context.Context, run *runmsg.Run, hash string) (Made, error) {
	if run == nil {
		return Made{}, errors.New("runs: prepare: no run")
	}
	if hash == "" {
		return Made{}, errors.New("runs: prepare: no run hash")
	}
	if err := p.Values.check(); err != nil {
		return Made{}, err
	}
	if err := runmsg.CheckRunValues(run, nil); err != nil {
		return Made{}, refused(runmsg.RefusedSteps, "run: "+err.Error(), err)
	}
	user := run.Process.User
	vals := p.Values.Values(run, hash)

	// The plan: every step with the values the steps before it set. The
	// rows are reported in section 11's order: 4 and 6 (the password to
	// take), 8 and 9 (the layers), then 10 (a step that would fail).
	plan := maps.Clone(vals)
	steps := make([]runmsg.RunStep, len(run.Workspace))
	var failing error
	var made []string // what the steps make: read_only beneath it is checked after them
	for i, s := range run.Workspace {
		es, err := runmsg.ExpandStep(s, stepField(i), plan)
		if err != nil {
			return Made{}, fieldRefusal(err)
		}
		made = append(made, es.At, es.Into)
		if err := p.checkStepPaths(es, plan[runmsg.ValueWorkspace]); err != nil && failing == nil {
			failing = stepFailed(i, es, err, nil)
		}
		steps[i] = es
		es.SetValues(plan, plannedCheckout)
	}
	ws := &workspace{p: p, user: user, vals: vals, msg: run, hash: hash}
	if run.HasPasswordStep() {
		i := stepIndex(steps, runmsg.StepPassword)
		if err := ws.checkPassword(ctx, i, steps[i]); err != nil {
			var pe *prepareError
			if !errors.As(err, &pe) || pe.Row < runmsg.RefusedUnprovided {
				return Made{}, err
			}
			if failing == nil || pe.Step < failing.(*prepareError).Step {
				failing = err
			}
		}
	}
	planned, err := p.layers(run, plan, made)
	if err != nil {
		return Made{}, err
	}
	if err := p.checkDisk(steps, planned.spec.Limits.Disk); err != nil {
		return Made{}, err
	}
	if failing != nil {
		return Made{}, failing
	}
	if d := planned.spec.Limits.Disk; d > 0 {
		ws.disk, ws.image = d, filepath.Join(p.DiskDir, hash+"."+host.DiskName)
	}

	if err := ws.run(ctx, hash, steps); err != nil {
		return Made{Steps: ws.logs}, err
	}

	// Every value in place, and the layers checked again.
	spec, err := p.layers(run, vals, nil)
	if err != nil {
		return Made{}, err
	}
	out := Made{Values: vals, Run: spec.run, Spec: spec.spec, Secrets: ws.secrets(), Steps: ws.logs}
	if run.Limits != nil {
		out.Limits = *run.Limits
	}
	return out, nil
}

// checkDisk refuses a limits.disk the node cannot give (row 8, D82): it
// is the size of the file system of the run's workspace, which the run's
// one directory step makes; a run with none, or with more than one, has
// no one workspace to give it to.
func (p *Layers) checkDisk(steps []runmsg.RunStep, disk uint64) error {
	if disk == 0 {
		return nil
	}
	n := 0
	for _, s := range steps {
		if s.Step == runmsg.StepDirectory {
			n++
		}
	}
	if n != 1 {
		why := fmt.Sprintf("it is the size of the file system of the run's workspace, which its one directory step makes, and the run has %d directory steps", n)
		return refused(runmsg.RefusedUnprovided, "limits.disk is not provided by this node: "+why, nil)
	}
	if p.DiskDir == "" {
		return errors.New("runs: prepare: the node keeps no directory for its runs' disks")
	}
	return nil
}

// run runs the run hash's planned steps, for real, in order, each setting
// its values in ws.vals.
func (ws *workspace) run(ctx context.Context, hash string, steps []runmsg.RunStep) error {
	for i, s := range steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("runs: prepare %s: before workspace[%d]: %w", hash, i, err)
		}
		checkin, err := ws.step(ctx, i, s)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("runs: prepare %s: workspace[%d] %s: %w", hash, i, s.Step, ctx.Err())
			}
			var pe *prepareError
			if errors.As(err, &pe) {
				return pe
			}
			return stepFailed(i, s, err, ws.secrets())
		}
		s.SetValues(ws.vals, checkin)
	}
	return nil
}

func stepField(i int) string { return fmt.Sprintf("workspace[%d]", i) }

func stepIndex(steps []runmsg.RunStep, kind string) int {
	for i, s := range steps {
		if s.Step == kind {
			return i
		}
	}
	return -1
}

// stepFailed is row 10: the note names the step, its kind, and why; no
// secret of the run's is in it.
func stepFailed(i int, s runmsg.RunStep, err error, secrets []string) *prepareError {
	why := strings.TrimPrefix(err.Error(), "runs: ")
	for _, sec := range secrets {
		if sec != "" {
			why = strings.ReplaceAll(why, sec, "********")
		}
	}
	return &prepareError{Row: runmsg.RefusedStepFailed, Step: i,
		Note: fmt.Sprintf("%s, a %s step, failed: %s", stepField(i), s.Step, why), Err: err}
}

// beneath says whether p lies strictly below root; both are clean.
func beneath(p, root string) bool {
	if root == "/" {
		return p != "/" && strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, root+"/")
}

// checkStepPaths refuses a step whose at or into does not lie below the
// node's run root: the steps make and remove nothing elsewhere; and a
// command step whose in is not the workspace or below it (D99).
func (p *Layers) checkStepPaths(s runmsg.RunStep, workspace string) error {
	for _, f := range []struct{ k, v string }{{"at", s.At}, {"into", s.Into}} {
		if f.v != "" && !beneath(f.v, p.Values.Root) {
			return fmt.Errorf("its %s %s is not beneath the node's run root %s", f.k, f.v, p.Values.Root)
		}
	}
	if s.Step == runmsg.StepCommand && s.In != workspace && !beneath(s.In, workspace) {
		return fmt.Errorf("its in %s is not the run's workspace %s or within it", s.In, workspace)
	}
	return nil
}

// Prepare is Make as the engine calls it (Preparer): with the node's values
// the engine gives, and what it made as the engine keeps it.
func (p *Layers) Prepare(ctx context.Context, run *runmsg.Run, hash string, node NodeValues) (Prepared, error) {
	l := *p
	l.Values = node
	m, err := l.Make(ctx, run, hash)
	if err != nil {
		return Prepared{Steps: m.Steps, Workspace: m.Values[runmsg.ValueWorkspace]}, err
	}
	keep, err := KeepOf(m.Run.Process)
	if err != nil {
		return Prepared{}, refused(runmsg.RefusedMalformed, err.Error(), err)
	}
	return Prepared{Values: m.Values, Spec: m.Spec, Workspace: m.Values[runmsg.ValueWorkspace], Keep: keep, Limits: m.Limits,
		Filter: FilterOf(m.Run.Process, m.Secrets), Steps: m.Steps}, nil
}
