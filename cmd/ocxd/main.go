// Command ocxd is OCX's daemon, one per agents root: the parent of every
// session it launches. The wiring is in cmd/internal/daemon, the decisions in
// the actors package.
package main

import (
	"os"

	"github.com/ocx-go/ocx/cmd/internal/daemon"
)

func main() {
	os.Exit(daemon.Main(os.Args[1:], os.Stdout, os.Stderr))
}
