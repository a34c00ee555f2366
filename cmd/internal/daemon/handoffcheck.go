package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/reexeccheck"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// The proof before the exec (D73): with the hand-off written, the old image
// runs the release's ocxd as `ocxd ... --handoff-check`, the exec's own
// command line and environment but for that flag. The program does what
// its new image would do at its start short of taking over (its flags and
// environment, node.json, the hand-off read and decoded with the
// descriptors it names) and answers protocol.HandoffCheckAnswer. The old image
// execs only a program that answered so; any other answer refuses the
// release, and the old image runs on.

// checkHandoff is --handoff-check: what the new image does at its start
// short of taking over. It opens no log, takes no lock and removes nothing.
func checkHandoff(opts options) error {
	layout, err := host.NewLayout(opts.Agents)
	if err != nil {
		return err
	}
	if st, err := os.Stat(layout.Root()); err != nil || !st.IsDir() {
		return fmt.Errorf("agents root %s is not a directory: %w", layout.Root(), orNotDir(err))
	}
	data, err := unixhost.Below(layout.Root()).ReadFile(layout.NodeJSON(), unixhost.NodeFile)
	if err != nil {
		return fmt.Errorf("read node.json: %w", err)
	}
	if _, err := messages.DecodeNodeConfig(data); err != nil {
		return fmt.Errorf("%s: %w", layout.NodeJSON(), err)
	}
	self, err := os.Executable()
	if err == nil {
		_, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return fmt.Errorf("find the running executable: %w", err)
	}
	p := layout.Handoff()
	data, err = unixhost.Below(layout.Root()).ReadFile(p, unixhost.NodeFile)
	if err != nil {
		return fmt.Errorf("read the hand-off: %w", err)
	}
	_, err = parseHandoff(p, data)
	return err
}

// parseHandoff decodes the hand-off read from p and checks that it names
// the descriptors the new image takes over.
func parseHandoff(p string, data []byte) (handoffFile, error) {
	h, err := decodeHandoff(data)
	if err != nil {
		return handoffFile{}, fmt.Errorf("%s: %w", p, err)
	}
	if _, ok := h.FDs[fdLock]; !ok {
		return handoffFile{}, fmt.Errorf("%s: no lock descriptor", p)
	}
	if _, ok := h.FDs[fdPipeRead]; !ok {
		return handoffFile{}, fmt.Errorf("%s: no pipe descriptors", p)
	}
	return h, nil
}

// refusal is a release's ocxd found, before the exec, unable to take the
// hand-off over: it reads another hand-off version, or its check did not
// answer. The outcome says so (messages.ReexecRefused).
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// checkTarget runs the check of target on the hand-off just written: nil
// when it answered right, reexeccheck.ErrPredatesCheck, a *refusal, or an
// error of the old image's own. The descriptors kept for the exec (kept)
// close on the check's own exec, so that the checked program holds none
// of them, and are kept again after.
func (d *instance) checkTarget(ctx context.Context, target string, kept []int) error {
	unixhost.CloseOnExec(kept...)
	err := reexeccheck.Run(ctx, target, d.opts.checkArgv(target))
	if kerr := unixhost.KeepOnExec(kept...); kerr != nil {
		return fmt.Errorf("re-exec: after the check: %w", kerr)
	}
	switch {
	case err == nil, errors.Is(err, reexeccheck.ErrPredatesCheck):
		return err
	default:
		return &refusal{fmt.Errorf("the release's ocxd cannot take the hand-off over: %w", err)}
	}
}

// orNotDir is err, or fs.ErrInvalid when there is none: the agents root
// was found, but it is not a directory.
func orNotDir(err error) error {
	if err != nil {
		return err
	}
	return fs.ErrInvalid
}
