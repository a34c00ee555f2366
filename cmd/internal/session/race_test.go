//go:build race

package session_test

// raceEnabled builds the workspace binary with the race detector too, so the
// session process itself is checked when the tests are.
const raceEnabled = true
