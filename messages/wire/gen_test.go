package wire

import (
	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
)

// genLogin draws a login messages.ValidateLogin takes.
func genLogin() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 9).Draw(t, "long") == 0 {
			return "a" + rapid.StringMatching(`[A-Za-z0-9._-]{63}`).Draw(t, "name64")
		}
		return rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9._-]{0,20}`).Draw(t, "name")
	}).Filter(func(s string) bool { return messages.ValidateLogin(s) == nil })
}

func genHash() *rapid.Generator[string] {
	return rapid.OneOf(rapid.StringMatching(`[0-9a-f]{40}`), rapid.StringMatching(`[0-9a-f]{64}`))
}

func genOpt(g *rapid.Generator[string]) *rapid.Generator[string] {
	return rapid.OneOf(rapid.Just(""), g)
}
