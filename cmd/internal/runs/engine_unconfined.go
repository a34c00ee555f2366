package runs

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/ocx-go/ocx/messages"
)

// Unconfined prepares the one run this package prepares itself: a run with
// no workspace and no sandbox (section 14's first example), whose process
// runs unconfined, as the node's own account, with exactly its env, in its
// cwd ("/" by default). It makes nothing on the host and needs nothing of
// the run's user: there is no password step. The workspace steps and the
// sandbox are another Preparer's; Unconfined refuses a run that has either,
// naming the layer, so that a node never runs a run with less than it asks.
type Unconfined struct{}

// ErrLayerNotPrepared says a run has a layer Unconfined does not make.
var ErrLayerNotPrepared = errors.New("not prepared by this node's engine")

// Prepare sets the values, puts them in place and maps the process onto a
// host.RunSpec.
func (Unconfined) Prepare(_ context.Context, run *messages.Run, hash string, node NodeValues) (Prepared, error) {
	switch {
	case len(run.Workspace) > 0:
		return Prepared{}, fmt.Errorf("workspace: %w (it makes no workspace steps yet)", ErrLayerNotPrepared)
	case run.Sandbox != nil:
		return Prepared{}, fmt.Errorf("sandbox: %w (it runs unconfined runs only, yet)", ErrLayerNotPrepared)
	}
	vals := node.Values(run, hash)
	r := *run
	r.Process = r.Process.WithDefaults(false)
	x, err := r.Expand(vals)
	if err != nil {
		return Prepared{}, fmt.Errorf("values: %w", err)
	}
	keep, err := KeepOf(x.Process)
	if err != nil {
		return Prepared{}, err
	}
	p := Prepared{Values: vals, Keep: keep}
	p.Spec.Command = append([]string(nil), x.Process.Command...)
	p.Spec.Dir = x.Process.Cwd
	for k, v := range x.Process.Env {
		p.Spec.Env = append(p.Spec.Env, k+"="+v)
	}
	sort.Strings(p.Spec.Env)
	return p, nil
}
