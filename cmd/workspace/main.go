// Command workspace is the session process: `workspace serve` as the daemon
// launches it inside a workspace's sandbox, `workspace run` at a terminal and
// `workspace start` detached. The logic is in cmd/internal/session.
package main

import (
	"os"

	"github.com/ocx-go/ocx/cmd/internal/session"
)

func main() {
	os.Exit(session.Main(os.Args[1:], os.Stdout, os.Stderr))
}
