package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ocx-go/ocx/messages/wire"
)

func runStatus(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "status", "status [--agents AGENTS] [--json]", false, false)
	fs.Lookup("json").Usage = "print the state as JSON (docs/design/state.schema.json)"
	if _, _, err := parseArgs(fs, args, noArgs); err != nil {
		return err
	}
	n, err := c.open(e)
	if err != nil {
		return err
	}
	if c.json {
		data, _, err := n.LiveStatusDoc(ctx)
		if err != nil {
			return err
		}
		_, err = e.stdout.Write(data)
		return err
	}
	st, _, err := n.LiveStatus(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, st)
	if st.Daemon != nil {
		fmt.Fprintf(e.stdout, "daemon    %s\n", st.Daemon)
	}
	printEach(e.stdout, "hook", st.Hooks)
	printEach(e.stdout, "login", st.Logins)
	printEach(e.stdout, "workspace", st.Workspaces)
	printEach(e.stdout, "session", st.Sessions)
	printEach(e.stdout, "ignored", st.LookAlikes)
	if st.LookAlikesLeftOut > 0 {
		fmt.Fprintf(e.stdout, "%-9s %d more processes that only look like sessions, left out\n", "ignored", st.LookAlikesLeftOut)
	}
	printEach(e.stdout, "listener", st.Listeners)
	if len(st.Restrictions) > 0 {
		fmt.Fprintf(e.stdout, "enforces  %s\n", strings.Join(st.Restrictions, " "))
	}
	for _, r := range st.Runners {
		fmt.Fprintf(e.stdout, "runner    %s %s\n", r.Name, r.Version)
	}
	if st.SessionLimits != nil {
		fmt.Fprintf(e.stdout, "limits    %s\n", st.SessionLimits)
	}
	printEach(e.stdout, "verdict", st.Verdicts)
	printEach(e.stdout, "review", st.Reviews)
	return nil
}

// printEach prints a line per item of xs, after its label in ten columns.
func printEach[T fmt.Stringer](w io.Writer, label string, xs []T) {
	for _, x := range xs {
		fmt.Fprintf(w, "%-9s %s\n", label, x.String())
	}
}

// runMetrics prints the daemon's metrics in Prometheus' text format, as
// its socket answers them: they are the running daemon's counts, so with
// no daemon there are none, and it says so.
func runMetrics(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "metrics", "metrics [--agents AGENTS]", false, false)
	if _, _, err := parseArgs(fs, args, noArgs); err != nil {
		return err
	}
	n, err := c.open(e)
	if err != nil {
		return err
	}
	r, err := n.AskDaemon(ctx, wire.NewAsk(wire.AskMetrics))
	if err != nil {
		return fmt.Errorf("the daemon's metrics: %w", err)
	}
	if r.Error != "" {
		return fmt.Errorf("the daemon's metrics: %s", r.Error)
	}
	_, err = e.stdout.Write(r.MetricsText)
	return err
}
