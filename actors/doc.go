// Package actors is ocxd's actor tree: a node, one actor per workspace,
// per session process, per branch listener and per run (seed 004). Each
// actor's decisions are a pure core (state and message in, effects out);
// one protoactor shell (shell.go) runs every core's effects through the
// small interfaces declared here (deps.go) and feeds the results back.
// cmd/internal/daemon implements those interfaces with host and fossilio;
// the tests with fakes. The pure cores that run outside the tree are
// subpackages: hookwatch (the daemon's hook watch), pull (a node on
// another host's pull), wake (the hook's decisions) and turn (a session's
// turn, which `workspace serve` applies).
package actors
