package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/setup"
	"github.com/ocx-go/ocx/messages"
)

// projectsFlag collects repeated --project NAME=REPO,URL.
type projectsFlag []setup.InitProject

func (p *projectsFlag) String() string {
	var s []string
	for _, x := range *p {
		s = append(s, x.Name+"="+x.Repository+","+x.URL)
	}
	return strings.Join(s, " ")
}

func (p *projectsFlag) Set(v string) error {
	x, err := setup.ParseInitProject(v)
	if err != nil {
		return err
	}
	*p = append(*p, x)
	return nil
}

var _ flag.Value = (*projectsFlag)(nil)

func runInit(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "init", "init --agents AGENTS --project NAME=REPO,URL ... [--node-user ocx] [--release DIR] [--extroot DIR] [--confined-only]\n       init --other-host --agents AGENTS --project NAME=CLONE,URL ... --node-user USER --password-file FILE [--pull-every 2s] [--poke-listen IP:PORT --poke-secret-file FILE] [--release DIR]", false, true)
	var projects projectsFlag
	fs.Var(&projects, "project", "a repository of the login group: NAME=REPOSITORY,URL (repeat for each)")
	user := fs.String("node-user", setup.DefaultNodeUser, "the node user's login")
	release := fs.String("release", "", "the release root (current and previous link to releases/ID/); none for a developer's build")
	extroot := fs.String("extroot", "", "Fossil's extension root (fossil server --extroot DIR): install the web console's entry there too")
	var sbRO, sbPath pathsFlag
	fs.Var(&sbRO, "sandbox-read-only", "a host path every sandbox the node proposes sees read-only, such as the agent CLIs' install (repeat for each)")
	fs.Var(&sbPath, "sandbox-path", "a directory put on the PATH of every sandbox the node proposes, after the release's (repeat for each)")
	confined := fs.Bool("confined-only", false, "the node runs nothing unconfined: its daemon refuses a run without a sandbox (--confined-only=false undoes it; left out, node.json's stays)")
	otherHost := fs.Bool("other-host", false, "a node on another host than the server's: each --project NAME=CLONE,URL is a clone it makes and pulls as the node user (D72)")
	pwFile := fs.String("password-file", "", "with --other-host: a file holding the node user's password on the server (mode 0600); else $OCX_PASSWORD")
	every := fs.String("pull-every", "", "with --other-host: how often the daemon pulls (default 2s)")
	pokes := fs.String("poke-listen", "", "with --other-host: the IP:PORT the daemon takes the server's pokes on")
	secretFile := fs.String("poke-secret-file", "", "with --poke-listen: a file holding the secret each poke carries (mode 0600), as the server's node.json holds it")
	if _, _, err := parseArgs(fs, args, noArgs); err != nil {
		return err
	}
	if *otherHost {
		pw, err := passwordOf(*pwFile)
		if err != nil {
			return err
		}
		in := setup.OtherHostInput{Projects: projects, NodeUser: *user, Password: pw, ReleaseRoot: *release, DryRun: c.dryRun}
		secret, err := secretOf(*secretFile)
		if err != nil {
			return err
		}
		if *every != "" || *pokes != "" || secret != "" {
			in.Pull = &messages.NodePull{Every: *every, Listen: *pokes, Secret: secret}
		}
		return c.answer(e, setup.InitOtherHost(ctx, c.agents, in, node.Options{Log: e.log}))
	}
	if *pwFile != "" || *every != "" || *pokes != "" || *secretFile != "" {
		return fmt.Errorf("%w: --password-file, --pull-every, --poke-listen and --poke-secret-file are for a node on another host (--other-host)", errUsage)
	}
	in := setup.InitInput{Projects: projects, NodeUser: *user, ReleaseRoot: *release, DryRun: c.dryRun}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "confined-only" {
			in.ConfinedOnly = confined
		}
	})
	if len(sbRO) > 0 || len(sbPath) > 0 {
		in.Sandbox = &messages.NodeSandbox{ReadOnly: sbRO, Path: sbPath}
	}
	a := setup.Init(ctx, c.agents, in, node.Options{Log: e.log})
	if *extroot != "" && a.OK() && !c.dryRun {
		n, err := node.Open(c.agents, node.Options{Log: e.log})
		if err != nil {
			return err
		}
		ci := n.ConsoleInstall(*extroot, false)
		a.Log = append(a.Log, ci.Log...)
		a.Stopped = ci.Stopped
	}
	return c.answer(e, a)
}

// pathsFlag is a repeatable flag of paths.
type pathsFlag []string

func (p *pathsFlag) String() string { return strings.Join(*p, ",") }

func (p *pathsFlag) Set(v string) error {
	*p = append(*p, v)
	return nil
}
