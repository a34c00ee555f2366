package procs

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/host/version"
	"github.com/ocx-go/ocx/messages"
)

// The runners a node offers (E9, issue 15): of the runners the protocol
// knows (messages.Runners, whose other names make a definition malformed),
// those whose program ocx-runner-NAME is an executable file in the release
// directory the node's tools and its daemon's sessions run. A session on a
// runner not offered is refused before anything is written.

// versionWait bounds how long a runner is given to answer --version.
const versionWait = 3 * time.Second

// runnerVersion asks the runner program at path for its version: the
// version of a version line (PROGRAM version VERSION checkin CHECKIN, as
// this repository's programs print it), else the first line it printed
// when it exited 0, else messages.VersionUnknown.
func runnerVersion(ctx context.Context, path string) string {
	ctx, cancel := context.WithTimeout(ctx, versionWait)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Stdout = &out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return messages.VersionUnknown
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	first = strings.TrimSpace(messages.CleanText(first))
	if info, err := version.Parse(first); err == nil {
		return info.Version + " checkin " + info.Checkin
	}
	if first == "" || len(first) > messages.MaxShortLen {
		return messages.VersionUnknown
	}
	return first
}

// RunnerOffers lists the runners release directory dir offers, each with its
// version.
func RunnerOffers(ctx context.Context, dir string) []messages.RunnerOffer {
	var out []messages.RunnerOffer
	for _, r := range unixhost.OfferedRunners(dir) {
		out = append(out, messages.RunnerOffer{Name: r, Version: runnerVersion(ctx, filepath.Join(dir, host.RunnerPrefix+r))})
	}
	return out
}

// RequireOffered refuses a runner the release directory dir does not
// hold, naming it and the runners offered.
func RequireOffered(dir, runner string) error {
	offered := unixhost.OfferedRunners(dir)
	for _, r := range offered {
		if r == runner {
			return nil
		}
	}
	what := "none"
	if len(offered) > 0 {
		what = strings.Join(offered, ", ")
	}
	return fmt.Errorf("runner: %q is not offered by this node: its release %s holds no %s%s (it offers: %s)", runner, dir, host.RunnerPrefix, runner, what)
}
