package daemon

import (
	"log/slog"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// sandboxReportWait bounds the wait for bwrap to say which process is its
// sandbox's first: it does so as soon as it has made it.
const sandboxReportWait = 2 * time.Second

// recordSandbox keeps, in AGENTS/LOGIN/held/PROJECT/sandbox, outside every
// sandbox, which sandbox the session of ws runs in (D45): a process in it
// counts for ws, across a restart too, even once bwrap is gone, while a
// process elsewhere whose command line names ws counts for nothing. A
// session whose sandbox is not recorded still counts while its bwrap runs
// (bwrap, a process of the host, binds ws, and its child is the sandbox's).
func (r *reaper) recordSandbox(ws host.Workspace, id messages.ProcID) {
	if r.root == nil {
		return
	}
	rec, err := r.current().SandboxOf(id, sandboxReportWait)
	if err == nil {
		err = unixhost.WriteSandboxRecord(r.root, ws, rec)
	}
	if err != nil {
		r.log.Warn("the session's sandbox is not recorded: it counts for its workspace only while its bwrap runs",
			slog.String(actors.KeyWorkspace, ws.Key.String()), slog.String(actors.KeyPID, id.String()), errAttr(err))
		return
	}
	r.log.Debug("sandbox recorded", slog.String(actors.KeyWorkspace, ws.Key.String()), slog.String(actors.KeyPID, id.String()),
		slog.String("init", rec.Init.String()), slog.Uint64("pid_namespace", rec.PIDNamespace))
}

// forgetSandbox removes the record of the sandbox bwrap ran for w once it
// has ended, unless its init runs on (unixhost.ForgetSandbox).
func (r *reaper) forgetSandbox(w messages.WorkspaceKey, bwrap messages.ProcID) {
	if r.root == nil {
		return
	}
	ws, err := r.layout.Workspace(w)
	if err == nil {
		err = unixhost.ForgetSandbox(r.root, ws, bwrap)
	}
	if err != nil {
		r.log.Warn("the record of an ended sandbox is left", slog.String(actors.KeyWorkspace, w.String()),
			slog.String(actors.KeyPID, bwrap.String()), errAttr(err))
	}
}
