package host

import (
	"fmt"
	"testing"
)

// manyBinds is the command line of issue 39's look-alike: `bwrap` (as its
// argv[0]) running a shell loop, with n --bind pairs each naming a
// made-up workspace of root.
func manyBinds(root string, n int) []string {
	argv := []string{"bwrap", "-c", "while :; do sleep 0.05 & wait; done", "x"}
	for i := range n {
		argv = append(argv, "--bind", fmt.Sprintf("%s/u%d/projects/p", root, i), "/x")
	}
	return argv
}

// BenchmarkNamings: the namings of a session's bwrap, and of a look-alike
// with 20,000 binds, parsed from the bytes a read of /proc gives.
func BenchmarkNamings(b *testing.B) {
	l, _ := NewLayout("/var/lib/ocx/agents")
	session := []string{"bwrap", "--new-session", "--unshare-all", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind-try", "/usr", "/usr", "--bind", "/var/lib/ocx/agents/alice/projects/demo", "/var/lib/ocx/agents/alice/projects/demo",
		"--", "/var/lib/ocx/release/current/workspace", "serve", "alice/demo", "--root", "/var/lib/ocx/agents"}
	for _, c := range []struct {
		name string
		argv []string
	}{{"session", session}, {"binds=20000", manyBinds(l.Root(), 20000)}} {
		raw := cmdlineBytes(c.argv)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				argv, _ := ParseCmdline(raw)
				if len(Namings(argv, l)) == 0 {
					b.Fatal("no naming")
				}
			}
			b.ReportMetric(float64(len(raw)), "bytes")
		})
	}
}

func cmdlineBytes(argv []string) []byte {
	var out []byte
	for _, a := range argv {
		out = append(append(out, a...), 0)
	}
	return out
}
