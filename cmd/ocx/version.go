package main

import (
	"context"
	"fmt"

	"github.com/ocx-go/ocx/host/version"
)

// runVersion prints the version line (host/version): `ocx version`,
// as `ocxd --version` and `workspace --version` do.
func runVersion(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(e.stderr, "usage: ocx version\n\nprints PROGRAM version VERSION checkin CHECKIN, one line")
		return nil
	}
	if len(args) > 0 {
		return fmt.Errorf("%w: ocx version takes no arguments", errUsage)
	}
	_, err := fmt.Fprint(e.stdout, version.Line("ocx"))
	return err
}
