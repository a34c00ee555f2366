package messages

// Origin says how a process that names a workspace came to run (seed 000:
// sessions are listed as started from the console or at a terminal).
type Origin string

// The origins the process table reports.
const (
	// OriginDaemon is a child of the running daemon.
	OriginDaemon Origin = "daemon"
	// OriginTerminal is a process someone started by hand (`workspace run`).
	OriginTerminal Origin = "terminal"
	// OriginOrphan is a process whose parent is now PID 1 or a subreaper,
	// such as a session whose daemon died.
	OriginOrphan Origin = "orphan"
)
