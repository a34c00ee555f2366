package runmsg

import (
	"maps"
	"slices"
	"strings"
)

// Values (seed 004, section 2): how a string names something the node
// knows, written $$name$$. The node sets its values before the workspace;
// each step sets more for what comes after it.

// RunValues maps a value's name to its value: what started lists.
type RunValues map[string]string

// Names lists the values' names, sorted.
func (v RunValues) Names() []string { return slices.Sorted(maps.Keys(v)) }

// The values of section 2's table, then those the steps set (section 5).
const (
	ValueRoot      = "root"
	ValueProject   = "project"
	ValueUser      = "user"
	ValueRun       = "run"
	ValueNode      = "node"
	ValueServer    = "server"
	ValueRelease   = "release"
	ValueWorkspace = "workspace"
	ValueClone     = "clone"
	valueTree      = "tree"
	valueCheckout  = "checkout"
)

// nodeValueNames lists the values the node sets before any step.
var nodeValueNames = []string{ValueRoot, ValueProject, ValueUser, ValueRun, ValueNode, ValueServer, ValueRelease}

// validValueName: one or more letters, digits or _.
func validValueName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isValueByte(s[i]) {
			return false
		}
	}
	return true
}

func isValueByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// scanValues splits s into literal text and the names it holds, calling
// lit and name in order. A reference is $$, a name of letters, digits or
// _, then $$; the leftmost one wins, as the regular expression
// \$\$([A-Za-z0-9_]+)\$\$ finds them. Everything else is literal: a lone
// $, ${HOME}, $$ not followed by a name and $$.
func scanValues(s string, lit func(string), name func(string)) {
	start := 0
	for i := 0; i+1 < len(s); {
		if s[i] != '$' || s[i+1] != '$' {
			i++
			continue
		}
		j := i + 2
		for j < len(s) && isValueByte(s[j]) {
			j++
		}
		if j == i+2 || j+1 >= len(s) || s[j] != '$' || s[j+1] != '$' {
			i++
			continue
		}
		if start < i {
			lit(s[start:i])
		}
		name(s[i+2 : j])
		i = j + 2
		start = i
	}
	if start < len(s) {
		lit(s[start:])
	}
}

// valueRefs lists the names s holds, in order, each as often as written.
func valueRefs(s string) []string {
	var out []string
	scanValues(s, func(string) {}, func(n string) { out = append(out, n) })
	return out
}

// expandString puts the values in place in s. It returns the first name s
// holds that vals does not set, and false, if there is one.
func expandString(s string, vals RunValues) (string, string, bool) {
	if !strings.Contains(s, "$$") {
		return s, "", true
	}
	var b strings.Builder
	missing := ""
	scanValues(s, func(l string) { b.WriteString(l) }, func(n string) {
		v, ok := vals[n]
		if !ok && missing == "" {
			missing = n
		}
		b.WriteString(v)
	})
	if missing != "" {
		return "", missing, false
	}
	return b.String(), "", true
}
