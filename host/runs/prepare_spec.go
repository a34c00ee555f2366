package runs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// runSpecOf maps a run whose values are all in place (runmsg.Run.Expand)
// onto what the host starts (seed 004, sections 6 to 8): the command as
// written, env as the whole environment ("NAME=value", sorted by name: the
// node adds nothing), the cwd (Expand's default: $$workspace$$, or / without
// a workspace), every field of the sandbox (nil: unconfined) with
// workspace, where its homes are seen, and the limits the host applies
// (cpu in seconds, processes, memory in bytes; wall is the engine's). It
// checks the forms alone; Prepare checks rows 8 and 9.
func runSpecOf(run *runmsg.Run, workspace string) (host.RunSpec, error) {
	p := run.Process
	spec := host.RunSpec{Command: slices.Clone(p.Command), Dir: p.Cwd, Env: []string{}}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		spec.Env = append(spec.Env, k+"="+p.Env[k])
	}
	if sb := run.Sandbox; sb != nil {
		hs := &host.RunSandbox{
			UID: int(sb.UID), GID: int(sb.GID),
			Capabilities: slices.Clone(sb.Capabilities),
			Network:      sb.Network, OwnSession: sb.OwnSession, EndsWithNode: sb.EndsWithNode,
			ReadOnly:  slices.Clone(sb.ReadOnly),
			ReadWrite: slices.Clone(sb.ReadWrite),
			Homes:     slices.Clone(sb.Homes),
			Proc:      sb.Proc, Dev: sb.Dev, Tmp: sb.Tmp,
			Workspace: workspace,
		}
		for _, f := range sb.Files {
			hs.Files = append(hs.Files, host.RunFile{At: f.At, Text: f.Text})
		}
		spec.Sandbox = hs
	}
	if l := run.Limits; l != nil {
		if l.CPU != nil {
			spec.Limits.CPU = *l.CPU
		}
		if l.Processes != nil {
			spec.Limits.Processes = *l.Processes
		}
		if l.Memory != "" {
			b, err := l.Memory.Bytes()
			if err != nil {
				return host.RunSpec{}, fmt.Errorf("limits.memory: %w", err)
			}
			spec.Limits.Memory = b
		}
		if l.Disk != "" {
			b, err := l.Disk.Bytes()
			if err != nil {
				return host.RunSpec{}, fmt.Errorf("limits.disk: %w", err)
			}
			spec.Limits.Disk = host.DiskBytes(b)
		}
	}
	return spec, nil
}

type layered struct {
	run  *runmsg.Run
	spec host.RunSpec
}

// layers puts vals in place in the run and maps it (RunSpecOf), then checks
// what the host cannot provide (row 8: host.RunSupport.Check, then the
// sandbox's shapes, host.CheckRunSandbox: a capability it does not know,
// two homes of one last name) and the node's own files (row 9), following
// links as they are on the host now.
//
// A read_only path the host lacks is refused (row 8, host.CheckRunReadOnly),
// but one at or below made, which the steps are still to make.
func (p *Layers) layers(run *runmsg.Run, vals runmsg.RunValues, made []string) (layered, error) {
	x, err := run.Expand(vals)
	if err != nil {
		return layered{}, fieldRefusal(err)
	}
	spec, err := runSpecOf(x, vals[runmsg.ValueWorkspace])
	if err != nil {
		return layered{}, refused(runmsg.RefusedMalformed, err.Error(), err)
	}
	// A cgroup holds a run's memory where the host can make one (D46);
	// where it cannot, the host's reason is the refusal's.
	if err := p.Support.Check(spec.Sandbox, spec.Limits); err != nil {
		var np *host.NotProvidedError
		if errors.As(err, &np) {
			return layered{}, refused(runmsg.RefusedUnprovided, fmt.Sprintf("%s is not provided by this node: %s", np.Field, np.Why), err)
		}
		return layered{}, refused(runmsg.RefusedUnprovided, strings.TrimPrefix(err.Error(), "host: "), err)
	}
	if spec.Sandbox == nil {
		return layered{x, spec}, nil
	}
	if err := host.CheckRunSandbox(*spec.Sandbox); err != nil {
		var fe *host.RunFieldError
		if errors.As(err, &fe) {
			return layered{}, refused(runmsg.RefusedUnprovided, fmt.Sprintf("%s cannot be provided: %s", fe.Field, fe.Why), err)
		}
		return layered{}, refused(runmsg.RefusedUnprovided, strings.TrimPrefix(err.Error(), "host: "), err)
	}
	if err := host.CheckRunReadOnly(*spec.Sandbox, made, unixhost.Present); err != nil {
		var fe *host.RunFieldError
		if errors.As(err, &fe) {
			return layered{}, refused(runmsg.RefusedUnprovided, fmt.Sprintf("%s cannot be provided: %s", fe.Field, fe.Why), err)
		}
		return layered{}, refused(runmsg.RefusedUnprovided, strings.TrimPrefix(err.Error(), "host: "), err)
	}
	files := p.Files
	files.Release = p.Values.Release
	files.Workspace = vals[runmsg.ValueWorkspace]
	resolved, err := unixhost.ResolveNodeFiles(files)
	if err != nil {
		return layered{}, fmt.Errorf("runs: prepare: the node's own files: %w", err)
	}
	if err := resolved.CheckRunSandbox(*spec.Sandbox, unixhost.Resolve); err != nil {
		var re *host.RefusalError
		if errors.As(err, &re) {
			return layered{}, refused(runmsg.RefusedNodeFiles, strings.TrimPrefix(re.Error(), "host: "), err)
		}
		return layered{}, refused(runmsg.RefusedNodeFiles, strings.TrimPrefix(err.Error(), "host: "), err)
	}
	return layered{x, spec}, nil
}
