// Package actors is ocxd's actor tree: a node, one actor per workspace, per
// session process and per branch listener. Each actor's decisions are a pure
// core (state and message in, effects out); a thin protoactor shell runs the
// effects through the small interfaces declared here and feeds results back.
package actors
