package runner

import (
	"path/filepath"

	"github.com/ocx-go/ocx/host"
)

// The environment of a turn (D9, D38).
const (
	envPost       = "OCX_POST"
	envRecord     = "OCX_RECORD"
	envFrom       = "OCX_FROM"
	envSessionDir = "OCX_SESSION_DIR"
	envMCPSocket  = "OCX_MCP_SOCKET"
	// EnvTurnUsage names the file a runner writes what it used in the
	// turn to (ReportUsage, D50): its own word, which the session keeps
	// beside the turn's wall and CPU time.
	EnvTurnUsage = "OCX_TURN_USAGE"
)

// Env is what a runner reads from its environment.
type Env struct {
	Post, Record, From string
	// SessionDir is the session's directory: writable in the sandbox, kept
	// across the daemon's re-exec and the session's restart.
	SessionDir string
	// MCPSocket is the node's MCP socket, "" when the node serves none.
	MCPSocket string
	// TurnUsage is where the runner reports what it used, "" when the
	// session asks for no report.
	TurnUsage string
}

// EnvOf reads the environment through getenv (os.Getenv).
func EnvOf(getenv func(string) string) Env {
	return Env{Post: getenv(envPost), Record: getenv(envRecord), From: getenv(envFrom),
		SessionDir: getenv(envSessionDir), MCPSocket: getenv(envMCPSocket), TurnUsage: getenv(EnvTurnUsage)}
}

// ModelSocket is the node's model proxy (host.ModelSocketName) beside the
// MCP socket, in the same directory (/tmp/ocx-mcp in the sandbox); "" when
// there is no MCP socket. The node serves it when AGENTS/model.json
// configures a model.
func (e Env) ModelSocket() string {
	if e.MCPSocket == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(e.MCPSocket), host.ModelSocketName)
}
