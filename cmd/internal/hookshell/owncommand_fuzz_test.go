package hookshell

import (
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host"
)

// quote is a word as `ocx hook install` writes it for /bin/sh.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// FuzzOwnCommand: shellWords reads any line without failing, and the words
// it reads, written again in single quotes, read back the same; OCX's own
// command for an agents root, however its paths are spelled, is its own
// for that root and no other.
func FuzzOwnCommand(f *testing.F) {
	f.Add(`'/opt/ocx/current/ocx-hook' --agents '/srv/agents' --repo %R`, "/opt/ocx/current", "/srv/agents")
	f.Add(`/bin/sh /srv/hook.sh %R`, "/opt/o'cx", "/srv/it's")
	f.Add(`'a'\''b' "c" $d`, "/x y", "/a\tb")
	f.Fuzz(func(t *testing.T, line, dir, agents string) {
		if words, ok := shellWords(line); ok {
			quoted := make([]string, len(words))
			for i, w := range words {
				quoted[i] = quote(w)
			}
			if again, ok := shellWords(strings.Join(quoted, " ")); !ok || !slices.Equal(again, words) {
				t.Fatalf("%q read %q; written again and read: %q (%v)", line, words, again, ok)
			}
		}
		if !strings.HasPrefix(dir, "/") || agents == "" || strings.ContainsAny(dir+agents, "\x00") {
			return
		}
		own := quote(dir+"/"+host.HookProgram) + " --agents " + quote(agents) + " --repo %R"
		if !ownCommand(own, agents) {
			t.Fatalf("%q is not taken for OCX's own command for %q", own, agents)
		}
		if ownCommand(own, agents+"x") {
			t.Fatalf("%q is taken for OCX's own command for %q", own, agents+"x")
		}
	})
}
