package main

import (
	"slices"
	"strings"
	"testing"
)

// TestCommandTable: the one table is sorted by name, each name once, each
// with a summary and a run.
func TestCommandTable(t *testing.T) {
	if !slices.IsSortedFunc(commands, func(a, b *command) int { return strings.Compare(a.name, b.name) }) {
		t.Error("the command table is not sorted by name")
	}
	for i, c := range commands {
		if i > 0 && commands[i-1].name == c.name {
			t.Errorf("command %q is in the table twice", c.name)
		}
		if c.summary == "" || c.run == nil {
			t.Errorf("command %q has no summary or no run", c.name)
		}
	}
}
