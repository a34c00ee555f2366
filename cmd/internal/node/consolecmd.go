package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// ConsoleEntryName is the console's entry in Fossil's extension root: its
// pages are then at $ROOT/ext/console/.
const ConsoleEntryName = "console"

// ConsoleEntry is the entry's content: a shell script Fossil runs as CGI,
// which execs the release's ocx-console (D71), or in a release without
// one its ocx, as the console of the agents root. Fossil clears the
// environment, so both paths are written in it; the release's current
// link is followed at each request, so an accepted release serves the
// next page.
func (n *Node) ConsoleEntry() []byte {
	agents := shellQuote(n.Agents)
	lean := shellQuote(n.Program(host.ConsoleProgram))
	return []byte("#!/bin/sh\n# OCX's console, run by Fossil as its CGI extension (ocx console install).\n" +
		"if [ -x " + lean + " ]; then exec " + lean + " --agents " + agents + "; fi\n" +
		"exec " + shellQuote(n.Program("ocx")) + " console --agents " + agents + "\n")
}

// ConsoleInstall puts the console's entry in Fossil's extension root
// (fossil server --extroot DIR, or extroot: DIR in a CGI script), so that
// $ROOT/ext/console serves it. Installing again replaces the entry.
func (n *Node) ConsoleInstall(extroot string, dry bool) *Answer {
	a := NewAnswer("console install", dry)
	if !filepath.IsAbs(extroot) || filepath.Clean(extroot) != extroot {
		return a.Stop(fmt.Errorf("extroot: %q is not a clean absolute path (Fossil needs one)", extroot))
	}
	st, err := os.Stat(extroot)
	if err != nil || !st.IsDir() {
		return a.Stop(fmt.Errorf("extroot: %s is not a directory: %v", extroot, err))
	}
	entry := filepath.Join(extroot, ConsoleEntryName)
	var plan Plan
	plan.Add(fmt.Sprintf("write %s, which runs %s console --agents %s", entry, n.Program("ocx"), n.Agents), func(_ context.Context, a *Answer) error {
		root, err := unixhost.OpenRoot(extroot)
		if err != nil {
			return fmt.Errorf("extroot: %w", err)
		}
		defer root.Close()
		if err := root.WriteFile(entry, n.ConsoleEntry(), 0o755); err != nil {
			return fmt.Errorf("write the console's entry: %w", err)
		}
		a.Logf("wrote %s, which runs %s console --agents %s", entry, n.Program("ocx"), n.Agents)
		a.Logf("serve it with fossil server --extroot %s; its pages are at /ext/console/", extroot)
		return nil
	})
	return a.Stop(Execute(context.Background(), a, plan))
}
