// Command ocx-hook is the after-receive hook as Fossil runs it (`ocx-hook
// --agents AGENTS --repo %R`), small so that it starts fast: it hands
// what arrived to the daemon on its socket (AGENTS/ocxd.sock, D66), which
// does the hook's work on its own open repository, and waits for it to be
// done. When no daemon answers, or it takes no ask within
// nodesock.AnswerWait (it is stopped, D75), or it refuses, or it fails
// mid-answer, it runs `ocx hook` beside it with the same list, which does
// the work itself and starts a daemon; the hook's mark keeps the two from
// doing any of it twice. It always exits 0: Fossil ignores the status.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/wire"
)

// doneWait bounds the wait for the daemon to finish a hook's work it took
// (it says so at once, nodesock.AnswerWait): the hook's own process waits
// at most this for the mark's lock (hook's DefaultLockWait, 10 s) and then
// works; past it the hook runs itself.
const doneWait = 60 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stderr))
}

func run(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := flag.NewFlagSet("ocx-hook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agents := fs.String("agents", "", "the agents root")
	repo := fs.String("repo", "", "the repository Fossil received into (%R)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *agents == "" || *repo == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "ocx-hook: usage: ocx-hook --agents AGENTS --repo REPOSITORY")
		return 2
	}
	in, _ := io.ReadAll(io.LimitReader(stdin, wire.MaxAskLen))
	err := askDaemon(*agents, *repo, in)
	if err == nil {
		return 0
	}
	// Without the daemon: the whole hook, which logs why in AGENTS/hook.log
	// and starts a daemon for the next time.
	if ferr := fallBack(*agents, *repo, in, err); ferr != nil {
		fmt.Fprintf(stderr, "ocx-hook: %v; and the hook itself: %v\n", err, ferr)
	}
	return 0
}

// askDaemon hands the list to the daemon and waits until its work is done.
func askDaemon(agents, repo string, in []byte) error {
	layout, err := host.NewLayout(agents)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	a := wire.NewAsk(wire.AskHook)
	a.Repo = abs
	a.Hashes = wire.HookHashes(bytes.NewReader(in))
	_, err = nodesock.Ask(context.Background(), layout, a, doneWait)
	return err
}

// fallBack runs `ocx hook` of this release with the list on its standard
// input, telling it (OCX_HOOK_FALLBACK) why the daemon did not do it.
func fallBack(agents, repo string, in []byte, why error) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(filepath.Dir(self), "ocx"), "hook", "--agents", agents, "--repo", repo)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(), wire.HookFallbackEnv+"="+messages.ClipText(messages.CleanText(why.Error()), 300))
	return cmd.Run()
}
