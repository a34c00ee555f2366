package main

import (
	"testing"

	"github.com/ocx-go/ocx/host/runner"
	"github.com/ocx-go/ocx/host/runner/runnertest"
)

// kit is the runner and the stand-in claude, built once by TestMain.
var kit = &runnertest.Kit{Name: "claude", Model: "sonnet"}

func TestMain(m *testing.M) { kit.Main(m) }

const socket = runnertest.Socket

// fixture is one session (runnertest.Fixture).
type fixture struct{ *runnertest.Fixture }

func newFixture(t *testing.T) *fixture { return &fixture{kit.NewFixture(t)} }

func input(text string) runner.Input { return runnertest.Input(text) }

func (f *fixture) turn(t *testing.T, in runner.Input, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	return f.Turn(t, in, argv...)
}

// stored is the session id the conversation store holds, and its turns.
func (f *fixture) stored(t *testing.T) (string, int) {
	t.Helper()
	var st state
	turns := f.Stored(t, &st)
	return st.SessionID, turns
}
