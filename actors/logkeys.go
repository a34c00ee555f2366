package actors

import "log/slog"

// The attribute keys of the daemon's log lines, in one place so that every
// line about a workspace or a process can be found by the same key.
const (
	keyActor     = "actor"
	KeyWorkspace = "workspace"
	KeyPID       = "pid"
	KeyLaunch    = "launch"
	KeyBranch    = "branch"
	KeyCheckin   = "checkin"
	KeyHash      = "hash"
	keyEffect    = "effect"
	keyMessage   = "message"
	keyError     = "error"
	KeyRun       = "run"
)

// ErrAttr is the log attribute of an error (keyError); none for nil.
func ErrAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String(keyError, err.Error())
}
