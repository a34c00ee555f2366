package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
)

func init() {
	register(command{name: "init", summary: "make the agents root and node.json; provision the node user", run: runInit})
}

// projectsFlag collects repeated --project NAME=REPO,URL.
type projectsFlag []node.InitProject

func (p *projectsFlag) String() string {
	var s []string
	for _, x := range *p {
		s = append(s, x.Name+"="+x.Repository+","+x.URL)
	}
	return strings.Join(s, " ")
}

func (p *projectsFlag) Set(v string) error {
	x, err := node.ParseInitProject(v)
	if err != nil {
		return err
	}
	*p = append(*p, x)
	return nil
}

var _ flag.Value = (*projectsFlag)(nil)

func runInit(ctx context.Context, e *env, args []string) error {
	var c common
	fs := c.flags(e, "init", "init --agents AGENTS --project NAME=REPO,URL ... [--node-user ocx] [--release DIR] [--extroot DIR]", false, true)
	var projects projectsFlag
	fs.Var(&projects, "project", "a repository of the login group: NAME=REPOSITORY,URL (repeat for each)")
	user := fs.String("node-user", node.DefaultNodeUser, "the node user's login")
	release := fs.String("release", "", "the release root (current and previous link to releases/ID/); none for a developer's build")
	extroot := fs.String("extroot", "", "Fossil's extension root (fossil server --extroot DIR): install the web console's entry there too")
	pos, _, err := parse(fs, args)
	if err != nil {
		return usageErr(err)
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, pos[0])
	}
	a := node.Init(ctx, c.agents, node.InitInput{Projects: projects, NodeUser: *user, ReleaseRoot: *release, DryRun: c.dryRun}, node.Options{Log: e.log})
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
