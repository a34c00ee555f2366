package host

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "proc", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseStat(t *testing.T) {
	cases := []struct {
		file   string
		want   Stat
		kernel bool
		zombie bool
	}{
		{"stat-cat.txt", Stat{PID: 10305, Comm: "cat", State: 'R', PPID: 10303, PGID: 10303, SID: 4528, Flags: 4194304, Start: 93340}, false, false},
		{"stat-kthreadd.txt", Stat{PID: 2, Comm: "kthreadd", State: 'S', PPID: 0, PGID: 0, SID: 0, Flags: 2129984, Start: 18}, true, false},
		{"stat-parens.txt", Stat{PID: 4242, Comm: "we ird) (name)", State: 'S', PPID: 1, PGID: 4242, SID: 4242, Flags: 4194560, Start: 987654321}, false, false},
		{"stat-zombie.txt", Stat{PID: 77, Comm: "workspace", State: 'Z', PPID: 50, PGID: 77, SID: 77, Flags: 4227148, Start: 5555}, false, true},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			got, err := ParseStat(fixture(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("ParseStat = %+v, want %+v", got, c.want)
			}
			if got.Kernel() != c.kernel || got.Zombie() != c.zombie {
				t.Fatalf("Kernel %v Zombie %v, want %v %v", got.Kernel(), got.Zombie(), c.kernel, c.zombie)
			}
			if got.Ending() != c.zombie {
				t.Fatalf("Ending %v, want %v", got.Ending(), c.zombie)
			}
		})
	}
	// A process in its exit (PF_EXITING), not yet a zombie: a PID
	// namespace's first process while the kernel ends the rest (D100).
	if !(Stat{State: 'D', Flags: 4194304 | 0x4}).Ending() {
		t.Error("a process with PF_EXITING is not ending")
	}
	init, err := ParseStat(fixture(t, "stat-init.txt"))
	if err != nil || init.PID != 1 || init.PPID != 0 {
		t.Fatalf("init: %+v %v", init, err)
	}
}

func TestParseStatRefusesMalformed(t *testing.T) {
	for _, b := range [][]byte{
		fixture(t, "stat-truncated.txt"),
		nil,
		[]byte("12 cat S 1 2 3"),
		[]byte("x (cat) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0"),
		[]byte("12 (cat) S one 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0"),
		[]byte("12 (cat) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 soon 0 0"),
	} {
		if _, err := ParseStat(b); !errors.Is(err, errBadStat) {
			t.Errorf("ParseStat(%q) = %v, want ErrBadStat", b, err)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	for _, n := range []string{"stat-cat.txt", "stat-kthreadd.txt", "stat-parens.txt", "stat-zombie.txt", "stat-truncated.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", "proc", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStat(b)
		if err == nil && s.PID <= 0 {
			t.Fatalf("accepted pid %d", s.PID)
		}
	})
}

// argvOf is ParseCmdline's arguments, for a command line read whole.
func argvOf(t testing.TB, b []byte) []string {
	t.Helper()
	argv, cut := ParseCmdline(b)
	if cut {
		t.Fatalf("a command line of %d bytes read as cut", len(b))
	}
	return argv
}

func TestParseCmdline(t *testing.T) {
	got := argvOf(t, fixture(t, "cmdline-serve.bin"))
	want := []string{"/var/lib/ocx/release/releases/abc/workspace", "serve", "alice/demo", "--root", "/var/lib/ocx/agents", "--launch", "aaaabbbbccccddddeeeeffff0000111122223333"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q", got)
	}
	if got := argvOf(t, fixture(t, "cmdline-empty.bin")); got != nil {
		t.Fatalf("empty: %q", got)
	}
	// An argument that is itself empty survives; only trailing NULs go.
	if got := argvOf(t, []byte("a\x00\x00b\x00")); !reflect.DeepEqual(got, []string{"a", "", "b"}) {
		t.Fatalf("got %q", got)
	}
	if !MayName(fixture(t, "cmdline-serve.bin")) || !MayName(fixture(t, "cmdline-bwrap.bin")) {
		t.Fatal("MayName refused a workspace or bwrap command line")
	}
	if MayName(fixture(t, "cmdline-init.bin")) || MayName(nil) || MayName([]byte("/bin/workspaces\x00serve")) {
		t.Fatal("MayName accepted another program")
	}
}

// A command line longer than MaxCmdline is cut there: the arguments
// whole within its first MaxCmdline bytes, and cut said; the argument the
// bound falls in is dropped, so a path cut short is never read as the
// shorter path it begins with. One of MaxCmdline bytes is whole.
func TestParseCmdlineCut(t *testing.T) {
	l := mustLayout(t, "/var/lib/ocx/agents")
	whole := fixture(t, "cmdline-binds.bin") // issue 39's look-alike, 1,000 binds
	for _, b := range [][]byte{whole, whole[:MaxCmdline+1]} {
		argv, cut := ParseCmdline(b)
		if !cut {
			t.Fatalf("%d bytes read: not cut", len(b))
		}
		if n := cmdlineLen(argv); n > MaxCmdline || !bytes.HasPrefix(whole, cmdlineBytes(argv)) {
			t.Fatalf("%d bytes read: %d bytes of arguments, not the command line's first whole ones", len(b), n)
		}
		// Every bind whose source ends within the bound names its
		// workspace, and no other.
		want, off := 0, 0
		for _, a := range bytes.Split(whole, []byte{0}) {
			off += len(a) + 1
			if bytes.HasPrefix(a, []byte("/var/lib/ocx/agents/")) && off <= MaxCmdline {
				want++
			}
		}
		names := Namings(argv, l)
		last := names[len(names)-1].Key
		if len(names) != want || last.Login != "u"+strconv.Itoa(want-1) {
			t.Fatalf("%d bytes read: %d namings, the last %s; want %d", len(b), len(names), last, want)
		}
	}
	argv, cut := ParseCmdline(fixture(t, "cmdline-cut-path.bin"))
	if !cut || argv[len(argv)-1] != "--bind" {
		t.Fatalf("cut %v, ends %q: want the path the bound falls in dropped", cut, argv[len(argv)-3:])
	}
	if names := Namings(argv, l); len(names) != 1 || names[0].Key.Login != "alice" {
		t.Fatalf("the part read names %+v; want alice's workspace alone, never zed/p, the start of zed/pqr", names)
	}
	exact := bytes.Repeat([]byte("a\x00"), MaxCmdline/2)
	if argv, cut := ParseCmdline(exact); cut || len(argv) != MaxCmdline/2 {
		t.Fatalf("a command line of exactly MaxCmdline bytes: %d arguments, cut %v", len(argv), cut)
	}
	if argv, cut := ParseCmdline(append(bytes.Repeat([]byte("a"), MaxCmdline), 0)); !cut || argv != nil {
		t.Fatalf("one argument past the bound: %q, cut %v; want nothing read whole", argv, cut)
	}
}

func mustLayout(t testing.TB, root string) Layout {
	t.Helper()
	l, err := NewLayout(root)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNamings(t *testing.T) {
	l := mustLayout(t, "/var/lib/ocx/agents")
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	hash := "aaaabbbbccccddddeeeeffff0000111122223333"
	cases := []struct {
		name string
		argv []string
		want []Naming
	}{
		{"serve from fixture", argvOf(t, fixture(t, "cmdline-serve.bin")),
			[]Naming{{Verb: VerbServe, Key: k, Root: l.Root(), Launch: hash}}},
		{"run", []string{"workspace", "run", "alice/demo", "--root", "/var/lib/ocx/agents"},
			[]Naming{{Verb: VerbRun, Key: k, Root: l.Root()}}},
		{"start, -root=, unclean", []string{"/opt/workspace", "start", "-root=/var/lib/ocx//agents/", "alice/demo"},
			[]Naming{{Verb: VerbStart, Key: k, Root: l.Root()}}},
		{"other flags and --", []string{"workspace", "serve", "--verbose", "--launch=" + hash, "--root", "/var/lib/ocx/agents", "--", "alice/demo"},
			[]Naming{{Verb: VerbServe, Key: k, Root: l.Root(), Launch: hash}}},
		{"another root", []string{"workspace", "run", "alice/demo", "--root", "/srv/agents"}, nil},
		{"relative root", []string{"workspace", "run", "alice/demo", "--root", "agents"},
			[]Naming{{Verb: VerbRun, Key: k, Root: "agents", Unsure: true}}},
		{"no root", []string{"workspace", "run", "alice/demo"},
			[]Naming{{Verb: VerbRun, Key: k, Unsure: true}}},
		{"bad key", []string{"workspace", "run", "alice", "--root", "/var/lib/ocx/agents"}, nil},
		{"pseudo-user key", []string{"workspace", "run", "nobody/demo", "--root", "/var/lib/ocx/agents"}, nil},
		{"other verb", []string{"workspace", "gc", "alice/demo", "--root", "/var/lib/ocx/agents"}, nil},
		{"other program", []string{"/bin/workspaces", "run", "alice/demo", "--root", "/var/lib/ocx/agents"}, nil},
		{"bwrap fixture", argvOf(t, fixture(t, "cmdline-bwrap.bin")),
			[]Naming{{Verb: VerbBind, Key: k, Root: l.Root()}}},
		{"bwrap bind-try inside", []string{"/usr/bin/bwrap", "--bind-try", "/var/lib/ocx/agents/alice/projects/demo/tree", "/w", "--", "sh"},
			[]Naming{{Verb: VerbBind, Key: k, Root: l.Root()}}},
		{"bwrap two workspaces", []string{"bwrap", "--bind", "/var/lib/ocx/agents/alice/projects/demo", "/a", "--bind", "/var/lib/ocx/agents/bob/projects/demo", "/b"},
			[]Naming{{Verb: VerbBind, Key: k, Root: l.Root()}, {Verb: VerbBind, Key: messages.WorkspaceKey{Login: "bob", Project: "demo"}, Root: l.Root()}}},
		{"bwrap one workspace thrice", []string{"bwrap", "--bind", "/var/lib/ocx/agents/alice/projects/demo", "/a",
			"--bind-try", "/var/lib/ocx/agents/alice/projects/demo/tree", "/b", "--bind", "/var/lib/ocx/agents/alice/projects/demo/x", "/c"},
			[]Naming{{Verb: VerbBind, Key: k, Root: l.Root()}}},
		{"bwrap three workspaces, one of them again", []string{"bwrap", "--bind", "/var/lib/ocx/agents/alice/projects/demo", "/a",
			"--bind", "/var/lib/ocx/agents/bob/projects/demo", "/b", "--bind", "/var/lib/ocx/agents/alice/projects/demo", "/a",
			"--bind", "/var/lib/ocx/agents/carol/projects/demo", "/c", "--bind", "/var/lib/ocx/agents/bob/projects/demo/tree", "/b"},
			[]Naming{{Verb: VerbBind, Key: k, Root: l.Root()}, {Verb: VerbBind, Key: messages.WorkspaceKey{Login: "bob", Project: "demo"}, Root: l.Root()},
				{Verb: VerbBind, Key: messages.WorkspaceKey{Login: "carol", Project: "demo"}, Root: l.Root()}}},
		{"bwrap ro-bind", []string{"bwrap", "--ro-bind", "/var/lib/ocx/agents/alice/projects/demo", "/a"}, nil},
		{"bwrap agents root", []string{"bwrap", "--bind", "/var/lib/ocx/agents", "/a"}, nil},
		{"bwrap dest only", []string{"bwrap", "--bind", "/x", "/var/lib/ocx/agents/alice/projects/demo"}, nil},
		{"empty", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Namings(c.argv, l)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Namings(%q) = %+v, want %+v", c.argv, got, c.want)
			}
		})
	}
}

func TestTableNaming(t *testing.T) {
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	other := messages.WorkspaceKey{Login: "bob", Project: "demo"}
	named := Process{ID: protocol.ProcID{PID: 10, Start: 100}, Names: []Naming{{Verb: VerbServe, Key: k}}}
	unsure := Process{ID: protocol.ProcID{PID: 11, Start: 110}, Names: []Naming{{Verb: VerbRun, Key: k, Unsure: true}}}
	elsewhere := Process{ID: protocol.ProcID{PID: 12, Start: 120}, Names: []Naming{{Verb: VerbRun, Key: other}}}
	cases := []struct {
		name  string
		table Table
		want  Evidence
	}{
		{"empty", Table{}, No},
		{"other workspace", Table{Procs: []Process{elsewhere}}, No},
		{"named", Table{Procs: []Process{elsewhere, named}}, Yes},
		{"named and unreadable", Table{Procs: []Process{named}, Unreadable: []Unreadable{{PID: 5}}}, Yes},
		{"unsure root", Table{Procs: []Process{unsure}}, Unknown},
		{"unreadable", Table{Procs: []Process{elsewhere}, Unreadable: []Unreadable{{PID: 5, Err: "permission denied"}}}, Unknown},
	}
	for _, c := range cases {
		v := c.table.Naming(k)
		if v.Named != c.want {
			t.Errorf("%s: Named = %v, want %v (%s)", c.name, v.Named, c.want, v)
		}
		if (v.Named == Yes) != (len(v.By) > 0) {
			t.Errorf("%s: By = %v with %v", c.name, v.By, v.Named)
		}
	}
	v := Table{Procs: []Process{named}}.Naming(k)
	if v.String() != "workspace alice/demo is named by 10@100" {
		t.Fatalf("String = %q", v.String())
	}
}

func TestSetOrigins(t *testing.T) {
	k := messages.WorkspaceKey{Login: "alice", Project: "demo"}
	n := []Naming{{Verb: VerbServe, Key: k}}
	const daemon = 500
	// daemon 500 -> bwrap 501 -> init 502 -> serve 503: all of them "daemon".
	// shell 600 -> run 601: "terminal". 1 -> serve 701: "orphan".
	// subreaper 800 -> bwrap 801: "orphan". bwrap 900 (parent 1) -> a process
	// naming another workspace 901: its own chain, parent 900 names another key.
	tab := Table{Procs: []Process{
		{ID: protocol.ProcID{PID: 503, Start: 1}, PPID: 502, Names: n},
		{ID: protocol.ProcID{PID: 501, Start: 1}, PPID: daemon, Names: n},
		{ID: protocol.ProcID{PID: 502, Start: 1}, PPID: 501, Names: n},
		{ID: protocol.ProcID{PID: 601, Start: 1}, PPID: 600, Names: n},
		{ID: protocol.ProcID{PID: 701, Start: 1}, PPID: 1, Names: n},
		{ID: protocol.ProcID{PID: 801, Start: 1}, PPID: 800, Names: n},
		{ID: protocol.ProcID{PID: 900, Start: 1}, PPID: daemon, Names: []Naming{{Key: messages.WorkspaceKey{Login: "bob", Project: "x"}}}},
		{ID: protocol.ProcID{PID: 901, Start: 1}, PPID: 900, Names: n},
	}}
	tab.SetOrigins(daemon, func(pid int) bool { return pid == 800 })
	want := map[int]messages.Origin{503: messages.OriginDaemon, 501: messages.OriginDaemon, 502: messages.OriginDaemon, 601: messages.OriginTerminal,
		701: messages.OriginOrphan, 801: messages.OriginOrphan, 900: messages.OriginDaemon, 901: messages.OriginTerminal}
	for _, p := range tab.Procs {
		if p.Origin != want[p.ID.PID] {
			t.Errorf("pid %d: origin %q, want %q", p.ID.PID, p.Origin, want[p.ID.PID])
		}
	}
	// Without a daemon, the daemon's former children are terminal sessions
	// of whoever is their parent now, or orphans.
	tab.SetOrigins(0, nil)
	if tab.Procs[0].Origin != messages.OriginTerminal || tab.Procs[4].Origin != messages.OriginOrphan {
		t.Fatalf("without daemon: %q %q", tab.Procs[0].Origin, tab.Procs[4].Origin)
	}
	// A cycle of parents (impossible, but a scan is not atomic) ends.
	loop := Table{Procs: []Process{{ID: protocol.ProcID{PID: 2000, Start: 1}, PPID: 2001, Names: n}, {ID: protocol.ProcID{PID: 2001, Start: 1}, PPID: 2000, Names: n}}}
	loop.SetOrigins(daemon, nil)
	if loop.Procs[0].Origin == "" {
		t.Fatal("cycle left no origin")
	}
}

func TestReleaseOf(t *testing.T) {
	cases := []struct{ exe, root, want string }{
		{"/var/lib/ocx/release/releases/abc123/workspace", "/var/lib/ocx/release", "abc123"},
		{"/var/lib/ocx/release/releases/abc123/bin/workspace", "/var/lib/ocx/release/", "abc123"},
		{"/var/lib/ocx/release/current/workspace", "/var/lib/ocx/release", "/var/lib/ocx/release/current"},
		{"/home/dev/ocx/bin/workspace", "/var/lib/ocx/release", "/home/dev/ocx/bin"},
		{"/home/dev/ocx/bin/workspace", "", "/home/dev/ocx/bin"},
		{"/var/lib/ocx/release/releases/workspace", "/var/lib/ocx/release", "/var/lib/ocx/release/releases"},
	}
	for _, c := range cases {
		if got := ReleaseOf(c.exe, c.root); got != c.want {
			t.Errorf("ReleaseOf(%q, %q) = %q, want %q", c.exe, c.root, got, c.want)
		}
	}
}

func TestExitOutcome(t *testing.T) {
	cases := []struct {
		e      Exit
		out    outcome
		status int
	}{
		{Exit{Known: true, Code: 3}, OutcomeExited, 3},
		{Exit{Known: true, Signal: 15}, OutcomeSignaled, 143},
		{Exit{Known: false, Code: 3}, OutcomeUnknown, 0},
		{Exit{Known: true, Code: 0, Sandbox: &SandboxExit{ChildPID: 9, Reported: true, Code: 143}}, OutcomeExited, 143},
		{Exit{Known: true, Code: 1, Sandbox: &SandboxExit{ChildPID: 9}}, OutcomeSandboxFailed, 1},
		{Exit{Known: true, Signal: 9, Sandbox: &SandboxExit{ChildPID: 9}}, OutcomeSignaled, 137},
	}
	for _, c := range cases {
		out, status := c.e.Outcome()
		if out != c.out || status != c.status {
			t.Errorf("%+v: Outcome = %s %d, want %s %d", c.e, out, status, c.out, c.status)
		}
		if c.e.String() == "" {
			t.Errorf("empty String for %+v", c.e)
		}
	}
	got := Exit{ID: protocol.ProcID{PID: 7, Start: 70}, Known: true, Code: 1, Sandbox: &SandboxExit{ChildPID: 9}}.String()
	if got != "exit 7@70 sandbox-failed status 1 sandbox-child 9 bwrap-code 1 bwrap-signal 0 user 0s system 0s maxrss 0" {
		t.Fatalf("String = %q", got)
	}
}

func TestSignalName(t *testing.T) {
	for n, want := range map[int]string{15: "SIGTERM", 9: "SIGKILL", 31: "SIGSYS", 34: "SIGRTMIN+0", 64: "SIGRTMIN+30", 0: "signal 0", 32: "signal 32", 99: "signal 99"} {
		if got := SignalName(n); got != want {
			t.Errorf("SignalName(%d) = %q, want %q", n, got, want)
		}
	}
	if SIGTERM.String() != "SIGTERM" {
		t.Error(SIGTERM.String())
	}
}

// TestByWorkspaceAnswersAsNaming: the table indexed by workspace answers,
// for every workspace, what Naming reads from the whole table: random
// tables of processes naming a few workspaces, surely or not, several
// times in one command line, beside unreadable processes and look-alikes.
func TestByWorkspaceAnswersAsNaming(t *testing.T) {
	keys := []messages.WorkspaceKey{{Login: "a", Project: "p"}, {Login: "b", Project: "p"}, {Login: "a", Project: "q"}}
	naming := rapid.Custom(func(t *rapid.T) Naming {
		return Naming{Verb: VerbServe, Key: rapid.SampledFrom(keys).Draw(t, "key"), Unsure: rapid.Bool().Draw(t, "unsure")}
	})
	rapid.Check(t, func(rt *rapid.T) {
		var tab Table
		for i := range rapid.IntRange(0, 12).Draw(rt, "procs") {
			tab.Procs = append(tab.Procs, Process{ID: protocol.ProcID{PID: 100 + i, Start: 7}, Names: rapid.SliceOfN(naming, 0, 3).Draw(rt, "names")})
		}
		for i := range rapid.IntRange(0, 2).Draw(rt, "unreadable") {
			tab.Unreadable = append(tab.Unreadable, Unreadable{PID: 500 + i, Err: "gone"})
		}
		for i := range rapid.IntRange(0, 2).Draw(rt, "lookalikes") {
			p := Process{ID: protocol.ProcID{PID: 600 + i, Start: 7}, Names: rapid.SliceOfN(naming, 1, 2).Draw(rt, "lookalike names")}
			tab.LookAlikes = append(tab.LookAlikes, LookAlike{Process: p, Why: "another sandbox"})
		}
		by := tab.ByWorkspace()
		for _, k := range append(keys, messages.WorkspaceKey{Login: "none", Project: "p"}) {
			if got, want := by.Naming(k), tab.Naming(k); !reflect.DeepEqual(got, want) {
				rt.Fatalf("%s: indexed %+v, from the whole table %+v", k, got, want)
			}
		}
	})
}
