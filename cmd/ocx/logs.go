package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/consolepage"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// logsTail is how much of a log `ocx logs` prints before it follows.
const logsTail = 16 << 10

// runLogs prints the end of a session's log, from the start of a line, and
// with -f follows it as it grows, as its console page does (issue 44
// item 1), until interrupted: a log replaced (the session started again)
// is followed from its start, said so.
func runLogs(ctx context.Context, e *env, args []string) error {
	var c common
	flags := c.flags(e, "logs", "logs [-f] [--agents AGENTS] LOGIN/PROJECT", false, false)
	follow := flags.Bool("f", false, "follow the log as it grows, until interrupted")
	pos, _, err := parseArgs(flags, args, oneArg("LOGIN/PROJECT"))
	if err != nil {
		return err
	}
	k, err := messages.ParseWorkspaceKey(pos[0])
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	n, err := c.open(e)
	if err != nil {
		return err
	}
	ws, err := n.Layout.Workspace(k)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	root, err := unixhost.OpenRoot(n.Layout.Root())
	if err != nil {
		return err
	}
	defer root.Close()
	tail, size, err := root.ReadTail(ws.Log, logsTail)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !*follow {
			return fmt.Errorf("logs: session %s has no log (%s)", k, ws.Log)
		}
	case err != nil:
		return fmt.Errorf("logs: %w", err)
	}
	text := string(tail)
	if size > int64(len(tail)) {
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
	}
	fmt.Fprint(e.stdout, text)
	notAbsent := func(error) bool { return false }
	for from := size; *follow && ctx.Err() == nil; {
		ch, err := consolepage.FollowLog(ctx, root, ws.Log, from, consolepage.FollowWait, notAbsent)
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		if ch.Reset {
			fmt.Fprintf(e.stderr, "ocx logs: %s was replaced; from its start\n", ws.Log)
		}
		fmt.Fprint(e.stdout, ch.Text)
		from = ch.To
	}
	return nil
}
