package runner

import (
	"fmt"
	"path/filepath"

	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// ReportUsage writes what the turn used, as the runner's CLI or its
// model's replies said it, to $OCX_TURN_USAGE for the session to keep
// beside the turn (D50); nothing when the session asks for no report. It
// is the runner's own word: the node counts the model's tokens itself, at
// its proxy, and never reads this to decide anything.
func ReportUsage(env Env, r messages.RunnerReport) error {
	if env.TurnUsage == "" {
		return nil
	}
	b, err := r.Encode()
	if err != nil {
		return fmt.Errorf("report the turn's usage: %w", err)
	}
	root, err := unixhost.OpenRoot(filepath.Dir(env.TurnUsage))
	if err != nil {
		return fmt.Errorf("report the turn's usage: %w", err)
	}
	defer root.Close()
	if err := root.WriteFile(env.TurnUsage, b, 0o600); err != nil {
		return fmt.Errorf("report the turn's usage: %w", err)
	}
	return nil
}
