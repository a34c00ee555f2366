// Package plantest runs a node action's plan in tests: as a dry run and as
// a real run, with fake effects that record what they were asked, in
// order. The planners' unit tests in workspaces, tools and node/setup use
// it (node's own cannot: they are inside node).
package plantest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node"
)

// Run runs a plan as a dry run and as a real run, and returns their
// answers; a dry run that fails fails the test.
func Run(t *testing.T, p node.Plan) (dry, real *node.Answer) {
	t.Helper()
	dry = node.NewAnswer("test", true)
	if err := node.Execute(context.Background(), dry, p); err != nil {
		t.Fatalf("a dry run failed: %v", err)
	}
	real = node.NewAnswer("test", false)
	real.Stop(node.Execute(context.Background(), real, p))
	return dry, real
}

// Effects records, in order, the effects a plan runs, and fails the one
// named Fail (or whose call begins with Fail and a space). A test's fake
// of an action's effects embeds it.
type Effects struct {
	Calls []string
	Fail  string
	posts int
}

// Do records call and returns its failure, if it is the one to fail.
func (f *Effects) Do(call string) error {
	f.Calls = append(f.Calls, call)
	if f.Fail != "" && (call == f.Fail || strings.HasPrefix(call, f.Fail+" ")) {
		return errors.New(call + " failed")
	}
	return nil
}

// Hash is the next hash a fake write returns: 64 ones, then twos, ...
func (f *Effects) Hash() string {
	f.posts++
	return strings.Repeat(fmt.Sprint(f.posts), 64)
}
