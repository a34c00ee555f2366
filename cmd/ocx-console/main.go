// Command ocx-console is the console's CGI as Fossil's /ext runs it
// (`ocx-console --agents AGENTS`), small so that it starts fast: a page
// asked by GET or HEAD is asked of the daemon on its socket
// (AGENTS/ocxd.sock, D71), which renders it from its kept status and
// open repositories, and its CGI reply is written as it came. A form
// (POST), a git fetch, and a page the daemon does not answer (none runs,
// it refuses, it fails mid-answer) are served by the release's `ocx
// console` beside it, given the same environment and standard input, as
// before there was a daemon to ask.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

// pageWait bounds the wait for the daemon's page: a page is rendered from
// the kept status in milliseconds; one that takes longer is served by
// `ocx console` instead.
const pageWait = 10 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func run(args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ocx-console", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agents := fs.String("agents", "", "the agents root")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *agents == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "ocx-console: usage: ocx-console --agents AGENTS")
		return 2
	}
	if byDaemon(environ) {
		// Without the daemon's page, `ocx console` asks the daemon for
		// its status again and says on the page why it read the
		// repository itself; a daemon that took no ask in time (it is
		// stopped) is not asked again (D75).
		page, err := askDaemon(*agents, environ)
		if err == nil {
			if _, err := stdout.Write(page); err != nil {
				return 1
			}
			return 0
		}
		if errors.Is(err, nodesock.ErrNotTaken) {
			return fallBack(*agents, withFallback(environ, err), stdout, stderr)
		}
	}
	return fallBack(*agents, withFallback(environ, nil), stdout, stderr)
}

// byDaemon says whether the request is one the daemon serves: a page read
// by GET or HEAD, not a git fetch (streamed by git's own CGI), with an
// environment a page ask may carry, decided on the path the console
// routes (wire.NotByDaemon, which the daemon applies too).
func byDaemon(environ []string) bool {
	return wire.NotByDaemon(environ) == ""
}

// askDaemon asks the daemon for the page and returns its CGI reply.
func askDaemon(agents string, environ []string) ([]byte, error) {
	layout, err := host.NewLayout(agents)
	if err != nil {
		return nil, err
	}
	a := wire.NewAsk(wire.AskPage)
	a.Env = environ
	r, err := nodesock.Ask(context.Background(), layout, a, pageWait)
	if err != nil {
		return nil, err
	}
	if r.CGIPage == nil {
		return nil, fmt.Errorf("the daemon's reply holds no page")
	}
	return r.CGIPage, nil
}

// withFallback is environ with why the daemon took no ask for the page
// (wire.ConsoleFallbackEnv) in place of any such entry; nil leaves
// none.
func withFallback(environ []string, why error) []string {
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, wire.ConsoleFallbackEnv+"=") {
			out = append(out, kv)
		}
	}
	if why == nil {
		return out
	}
	return append(out, wire.ConsoleFallbackEnv+"="+messages.ClipText(messages.CleanText(why.Error()), 300))
}

// fallBack runs `ocx console` of this release with the request as Fossil
// gave it, and passes its exit status on.
func fallBack(agents string, environ []string, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "ocx-console: %v\n", err)
		return 1
	}
	cmd := exec.Command(filepath.Join(filepath.Dir(self), "ocx"), "console", "--agents", agents)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = environ, os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		if x, ok := err.(*exec.ExitError); ok {
			return x.ExitCode()
		}
		fmt.Fprintf(stderr, "ocx-console: ocx console: %v\n", err)
		return 1
	}
	return 0
}
