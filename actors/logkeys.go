package actors

// The attribute keys of the daemon's log lines, in one place so that every
// line about a workspace or a process can be found by the same key.
const (
	KeyActor     = "actor"
	KeyWorkspace = "workspace"
	KeyPID       = "pid"
	KeyLaunch    = "launch"
	KeyBranch    = "branch"
	KeyCheckin   = "checkin"
	KeyHash      = "hash"
	KeyEffect    = "effect"
	KeyMessage   = "message"
	KeyError     = "error"
	KeyRun       = "run"
)
