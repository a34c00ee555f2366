package main

import (
	"context"
	"fmt"
	"strings"
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
	st, err := n.Status(ctx)
	if err != nil {
		return err
	}
	if c.json {
		data, err := st.Encode()
		if err != nil {
			return err
		}
		_, err = e.stdout.Write(data)
		return err
	}
	fmt.Fprintln(e.stdout, st)
	if st.Daemon != nil {
		fmt.Fprintf(e.stdout, "daemon    %s\n", st.Daemon)
	}
	for _, h := range st.Hooks {
		fmt.Fprintf(e.stdout, "hook      %s\n", h)
	}
	for _, l := range st.Logins {
		fmt.Fprintf(e.stdout, "login     %s\n", l)
	}
	for _, w := range st.Workspaces {
		fmt.Fprintf(e.stdout, "workspace %s\n", w)
	}
	for _, s := range st.Sessions {
		fmt.Fprintf(e.stdout, "session   %s\n", s)
	}
	for _, l := range st.LookAlikes {
		fmt.Fprintf(e.stdout, "ignored   %s\n", l)
	}
	for _, l := range st.Listeners {
		fmt.Fprintf(e.stdout, "listener  %s\n", l)
	}
	if len(st.Restrictions) > 0 {
		fmt.Fprintf(e.stdout, "enforces  %s\n", strings.Join(st.Restrictions, " "))
	}
	for _, r := range st.Runners {
		fmt.Fprintf(e.stdout, "runner    %s %s\n", r.Name, r.Version)
	}
	if st.SessionLimits != nil {
		fmt.Fprintf(e.stdout, "limits    %s\n", st.SessionLimits)
	}
	for _, v := range st.Verdicts {
		fmt.Fprintf(e.stdout, "verdict   %s\n", v)
	}
	for _, r := range st.Reviews {
		fmt.Fprintf(e.stdout, "review    %s\n", r)
	}
	return nil
}
