package host

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

func TestParseNSLink(t *testing.T) {
	for _, c := range []struct {
		link string
		want uint64
	}{
		{"pid:[4026531836]", 4026531836},
		{"pid:[1]", 1},
	} {
		got, err := ParseNSLink(c.link, "pid")
		if err != nil || got != c.want {
			t.Errorf("ParseNSLink(%q) = %d, %v; want %d", c.link, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "pid:", "pid:[]", "pid:[0]", "pid:[x]", "net:[4026531840]", "pid:[12", "pid:4026531836", "pid:[-3]", "pid:[4026531836] "} {
		if got, err := ParseNSLink(bad, "pid"); !errors.Is(err, errBadNSLink) {
			t.Errorf("ParseNSLink(%q) = %d, %v; want ErrBadNSLink", bad, got, err)
		}
	}
}

func TestParseNSpid(t *testing.T) {
	for _, c := range []struct {
		file string
		want int
	}{
		{"status-host.txt", 1},
		{"status-sandboxed.txt", 2},
		{"status-nested.txt", 3},
	} {
		got, err := ParseNSpid(fixture(t, c.file))
		if err != nil || got != c.want {
			t.Errorf("%s: ParseNSpid = %d, %v; want %d", c.file, got, err, c.want)
		}
	}
	for _, bad := range [][]byte{nil, []byte("Name:\tcat\nPid:\t12\n"), []byte("NSpid:\n"), []byte("NSpid:\t12\tx\n"), []byte("NSpid:\t0\n")} {
		if got, err := ParseNSpid(bad); !errors.Is(err, errNoNSpid) {
			t.Errorf("ParseNSpid(%q) = %d, %v; want ErrNoNSpid", bad, got, err)
		}
	}
}

func TestSandboxRecordRoundTrip(t *testing.T) {
	r := SandboxRecord{Bwrap: protocol.ProcID{PID: 100, Start: 5}, Init: protocol.ProcID{PID: 101, Start: 6}, PIDNamespace: 4026532180}
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"bwrap":{"pid":100,"start":5},"init":{"pid":101,"start":6},"pid_namespace":4026532180}`+"\n" {
		t.Errorf("Encode = %s", b)
	}
	if got, err := DecodeSandboxRecord(b); err != nil || got != r {
		t.Errorf("Decode = %+v, %v", got, err)
	}
	for _, bad := range []string{
		``, `{}`, `[]`, `{"bwrap":{"pid":100,"start":5},"init":{"pid":101,"start":6}}`,
		`{"bwrap":{"pid":100,"start":5},"init":{"pid":0,"start":6},"pid_namespace":7}`,
		`{"bwrap":{"pid":100,"start":5},"init":{"pid":101,"start":6},"pid_namespace":7,"extra":1}`,
	} {
		if _, err := DecodeSandboxRecord([]byte(bad)); err == nil {
			t.Errorf("DecodeSandboxRecord(%s) accepted", bad)
		}
	}
	if _, err := (SandboxRecord{}).Encode(); err == nil {
		t.Error("an empty record encoded")
	}
}

// The fixtures of the classification: the host's PID namespace is 1000;
// the node's uid 1001. alice's sandbox (namespace 2000) was made by bwrap
// 10, a child of the daemon; bob's by bwrap 20 (namespace 3000); a
// namespace nobody made (4000) is a sandbox's inside alice's.
const (
	hostNS  = 1000
	aliceNS = 2000
	bobNS   = 3000
	deepNS  = 4000
	nodeUID = 1001
)

var (
	alice = messages.WorkspaceKey{Login: "alice", Project: "demo"}
	bob   = messages.WorkspaceKey{Login: "bob", Project: "demo"}
)

func serveOf(pid, ppid int, ns uint64, k messages.WorkspaceKey) Process {
	return Process{ID: protocol.ProcID{PID: pid, Start: uint64(pid) * 7}, PPID: ppid, PIDNS: ns, UID: nodeUID,
		Argv:  []string{"workspace", "serve", k.String(), "--root", "/agents"},
		Names: []Naming{{Verb: VerbServe, Key: k, Root: "/agents", Launch: "aaaa"}}}
}

func bwrapOf(pid, ppid int, ns uint64, k messages.WorkspaceKey) Process {
	return Process{ID: protocol.ProcID{PID: pid, Start: uint64(pid) * 7}, PPID: ppid, PIDNS: ns, UID: nodeUID,
		Argv:  []string{"bwrap", "--bind", "/agents/" + k.Login + "/projects/demo", "/agents/" + k.Login + "/projects/demo"},
		Names: []Naming{{Verb: VerbBind, Key: k, Root: "/agents"}}}
}

// sandboxOf is a session in its sandbox: bwrap (a child of parent, in the
// host's namespace), its init (bwrap's child, inside) and `workspace
// serve` (the init's child).
func sandboxOf(base, parent int, ns uint64, k messages.WorkspaceKey) []Process {
	return []Process{bwrapOf(base, parent, hostNS, k), bwrapOf(base+1, base, ns, k), serveOf(base+2, base+1, ns, k)}
}

func provenance() Provenance {
	return Provenance{Self: hostNS, Users: []int{0, nodeUID}}
}

func pidsOf(ps []Process) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.ID.PID)
	}
	return out
}

func lookAlikePIDs(ls []LookAlike) []int {
	var out []int
	for _, l := range ls {
		out = append(out, l.ID.PID)
	}
	return out
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSeparateLookAlikes(t *testing.T) {
	const daemon = 5
	cases := []struct {
		name      string
		procs     []Process
		un        []Unreadable
		prov      Provenance
		kept      []int // the PIDs left in Procs
		look      []int // the PIDs of the look-alikes
		alice     Evidence
		bob       Evidence
		bobUnsure bool // bob's answer is unknown
		why       string
	}{
		{
			name:  "two sessions in their own sandboxes",
			procs: append(sandboxOf(10, daemon, aliceNS, alice), sandboxOf(20, daemon, bobNS, bob)...),
			prov:  provenance(), kept: []int{10, 11, 12, 20, 21, 22}, alice: Yes, bob: Yes,
		},
		{
			name:  "a process in alice's sandbox claiming bob's workspace",
			procs: append(sandboxOf(10, daemon, aliceNS, alice), serveOf(13, 11, aliceNS, bob)),
			prov:  provenance(), kept: []int{10, 11, 12}, look: []int{13}, alice: Yes, bob: No,
			why: "pid:[2000], which is not the sandbox the node made for bob/demo",
		},
		{
			name: "the same beside bob's real session",
			procs: append(append(sandboxOf(10, daemon, aliceNS, alice), serveOf(13, 11, aliceNS, bob)),
				sandboxOf(20, daemon, bobNS, bob)...),
			prov: provenance(), kept: []int{10, 11, 12, 20, 21, 22}, look: []int{13}, alice: Yes, bob: Yes,
		},
		{
			name:  "a bwrap inside alice's sandbox binding bob's workspace, its child in a namespace of its own",
			procs: append(sandboxOf(10, daemon, aliceNS, alice), bwrapOf(13, 12, aliceNS, bob), serveOf(14, 13, deepNS, bob)),
			prov:  provenance(), kept: []int{10, 11, 12}, look: []int{13, 14}, alice: Yes, bob: No,
		},
		{
			name:  "a nested sandbox of alice's claiming alice's own workspace",
			procs: append(sandboxOf(10, daemon, aliceNS, alice), bwrapOf(13, 12, aliceNS, alice), serveOf(14, 13, deepNS, alice)),
			prov:  provenance(), kept: []int{10, 11, 12, 13}, look: []int{14}, alice: Yes, bob: No,
		},
		{
			name:  "a session at a terminal on the host",
			procs: []Process{{ID: protocol.ProcID{PID: 30, Start: 1}, PPID: 29, PIDNS: hostNS, UID: nodeUID, Names: []Naming{{Verb: VerbRun, Key: bob, Root: "/agents"}}}},
			prov:  provenance(), kept: []int{30}, alice: No, bob: Yes,
		},
		{
			name:  "a process of another user on the host",
			procs: []Process{{ID: protocol.ProcID{PID: 30, Start: 1}, PPID: 29, PIDNS: hostNS, UID: 1002, Names: []Naming{{Verb: VerbServe, Key: bob, Root: "/agents"}}}},
			prov:  provenance(), look: []int{30}, alice: No, bob: No, why: "uid 1002",
		},
		{
			name:  "root's process on the host",
			procs: []Process{{ID: protocol.ProcID{PID: 30, Start: 1}, PPID: 29, PIDNS: hostNS, UID: 0, Names: []Naming{{Verb: VerbServe, Key: bob, Root: "/agents"}}}},
			prov:  provenance(), kept: []int{30}, alice: No, bob: Yes,
		},
		{
			name:  "an uid unknown counts",
			procs: []Process{{ID: protocol.ProcID{PID: 30, Start: 1}, PPID: 29, PIDNS: hostNS, UID: -1, Names: []Naming{{Verb: VerbServe, Key: bob, Root: "/agents"}}}},
			prov:  provenance(), kept: []int{30}, alice: No, bob: Yes,
		},
		{
			name:  "no users given admits any",
			procs: []Process{{ID: protocol.ProcID{PID: 30, Start: 1}, PPID: 29, PIDNS: hostNS, UID: 1002, Names: []Naming{{Verb: VerbServe, Key: bob, Root: "/agents"}}}},
			prov:  Provenance{Self: hostNS}, kept: []int{30}, alice: No, bob: Yes,
		},
		{
			name: "a bwrap of another user anchors nothing",
			procs: func() []Process {
				ps := sandboxOf(20, daemon, bobNS, bob)
				ps[0].UID = 1002
				return ps
			}(),
			prov: provenance(), look: []int{20, 21, 22}, alice: No, bob: No,
		},
		{
			name: "an orphaned sandbox (its bwrap gone) the node recorded",
			procs: func() []Process {
				ps := sandboxOf(20, daemon, bobNS, bob)[1:]
				ps[0].PPID = 1
				return ps
			}(),
			prov: Provenance{Self: hostNS, Users: []int{0, nodeUID}, Recorded: map[messages.WorkspaceKey]uint64{bob: bobNS}},
			kept: []int{21, 22}, alice: No, bob: Yes,
		},
		{
			name: "an orphaned sandbox the node did not record",
			procs: func() []Process {
				ps := sandboxOf(20, daemon, bobNS, bob)[1:]
				ps[0].PPID = 1
				return ps
			}(),
			prov: provenance(), look: []int{21, 22}, alice: No, bob: No,
		},
		{
			name:  "a record of bob's sandbox anchors nothing of alice's",
			procs: append(sandboxOf(10, daemon, aliceNS, alice), serveOf(13, 11, aliceNS, bob)),
			prov:  Provenance{Self: hostNS, Users: []int{0, nodeUID}, Recorded: map[messages.WorkspaceKey]uint64{bob: bobNS}},
			kept:  []int{10, 11, 12}, look: []int{13}, alice: Yes, bob: No,
		},
		{
			name: "a namespace that cannot be read, of a process known to be below ours",
			procs: func() []Process {
				p := serveOf(13, 11, 0, bob)
				p.NSLevels = 2
				return append(sandboxOf(10, daemon, aliceNS, alice), p)
			}(),
			prov: provenance(), kept: []int{10, 11, 12}, look: []int{13}, alice: Yes, bob: No, why: "cannot be read",
		},
		{
			name: "a namespace that cannot be read, of a process known to be ours",
			procs: func() []Process {
				p := serveOf(30, 29, 0, bob)
				p.NSLevels = 1
				return []Process{p}
			}(),
			prov: provenance(), kept: []int{30}, alice: No, bob: Yes,
		},
		{
			name:  "a namespace that cannot be read at all",
			procs: []Process{serveOf(30, 29, 0, bob)},
			prov:  provenance(), kept: []int{30}, alice: No, bob: Unknown, bobUnsure: true,
		},
		{
			name:  "the reader's own namespace unknown",
			procs: sandboxOf(20, daemon, bobNS, bob),
			prov:  Provenance{Users: []int{0, nodeUID}}, kept: []int{20, 21, 22}, alice: No, bob: Unknown, bobUnsure: true,
		},
		{
			name:  "a process that vanished in another sandbox is a look-alike",
			procs: sandboxOf(10, daemon, aliceNS, alice),
			un:    []Unreadable{{PID: 13, Err: "vanished", Names: []Naming{{Verb: VerbServe, Key: bob}}, PIDNS: aliceNS}},
			prov:  provenance(), kept: []int{10, 11, 12}, look: []int{13}, alice: Yes, bob: No,
		},
		{
			name:  "a process that vanished in its own sandbox stays unknown",
			procs: sandboxOf(20, daemon, bobNS, bob),
			un:    []Unreadable{{PID: 23, Err: "vanished", Names: []Naming{{Verb: VerbServe, Key: bob}}, PIDNS: bobNS}},
			prov:  provenance(), kept: []int{20, 21, 22}, alice: Unknown, bob: Yes,
		},
		{
			name: "a process that vanished on the host stays unknown",
			un:   []Unreadable{{PID: 23, Err: "vanished", Names: []Naming{{Verb: VerbServe, Key: bob}}, PIDNS: hostNS}},
			prov: provenance(), alice: Unknown, bob: Unknown,
		},
		{
			name:  "a bwrap on the host naming two workspaces",
			procs: []Process{manyNamed(30, 29, hostNS, 2, false)},
			prov:  provenance(), look: []int{30}, alice: No, bob: No, why: "names 2 workspaces",
		},
		{
			name:  "a bwrap on the host naming two workspaces anchors neither",
			procs: []Process{manyNamed(30, daemon, hostNS, 2, false), serveOf(31, 30, bobNS, messages.WorkspaceKey{Login: "u1", Project: "p"})},
			prov:  provenance(), look: []int{30, 31}, alice: No, bob: No,
		},
		{
			name: "a command line cut on the host names unsure",
			procs: func() []Process {
				p := serveOf(30, 29, hostNS, bob)
				p.Cut = true
				return []Process{p}
			}(),
			prov: provenance(), kept: []int{30}, alice: No, bob: Unknown, bobUnsure: true,
		},
		{
			name: "a bwrap whose command line was cut anchors nothing",
			procs: func() []Process {
				ps := sandboxOf(20, daemon, bobNS, bob)
				ps[0].Cut = true
				return ps
			}(),
			prov: provenance(), kept: []int{20}, look: []int{21, 22}, alice: No, bob: Unknown, bobUnsure: true,
		},
		{
			name: "a command line cut in alice's sandbox claiming bob's workspace",
			procs: func() []Process {
				p := serveOf(13, 11, aliceNS, bob)
				p.Cut = true
				return append(sandboxOf(10, daemon, aliceNS, alice), p)
			}(),
			prov: provenance(), kept: []int{10, 11, 12}, look: []int{13}, alice: Yes, bob: No,
		},
		{
			name:  "issue 39's look-alike beside bob's session",
			procs: append(append(sandboxOf(10, daemon, aliceNS, alice), manyNamed(13, 12, aliceNS, 1000, true)), sandboxOf(20, daemon, bobNS, bob)...),
			prov:  provenance(), kept: []int{10, 11, 12, 20, 21, 22}, look: []int{13}, alice: Yes, bob: Yes,
		},
		{
			name:  "a process whose command line could not be read stays unknown",
			procs: sandboxOf(10, daemon, aliceNS, alice),
			un:    []Unreadable{{PID: 13, Err: "EIO"}},
			prov:  provenance(), kept: []int{10, 11, 12}, alice: Yes, bob: Unknown,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tab := Table{Procs: append([]Process(nil), c.procs...), Unreadable: append([]Unreadable(nil), c.un...)}
			tab.SeparateLookAlikes(c.prov)
			if got := pidsOf(tab.Procs); !sameInts(got, c.kept) {
				t.Errorf("kept %v, want %v", got, c.kept)
			}
			if got := lookAlikePIDs(tab.LookAlikes); !sameInts(got, c.look) {
				t.Errorf("look-alikes %v, want %v", got, c.look)
			}
			if v := tab.Naming(alice); v.Named != c.alice {
				t.Errorf("alice: %s, want %s", v, c.alice)
			}
			v := tab.Naming(bob)
			if v.Named != c.bob {
				t.Errorf("bob: %s, want %s", v, c.bob)
			}
			if c.bobUnsure && len(v.Unsure) == 0 {
				t.Errorf("bob: %s names no unsure process", v)
			}
			for _, l := range tab.LookAlikes {
				if !strings.Contains(l.Why, c.why) {
					t.Errorf("look-alike %d: why %q, want it to say %q", l.ID.PID, l.Why, c.why)
				}
				if l.Claims(bob) && !strings.Contains(v.String(), "pid "+strconv.Itoa(l.ID.PID)+" only looks like a session of bob/demo") {
					t.Errorf("bob's verdict does not name the look-alike %d: %s", l.ID.PID, v)
				}
			}
			for _, p := range tab.Procs {
				for _, n := range p.Names {
					if n.Key == bob && p.PIDNS != 0 && p.PIDNS != hostNS && p.PIDNS != bobNS {
						t.Errorf("process %d in namespace %d kept naming bob's workspace", p.ID.PID, p.PIDNS)
					}
				}
			}
		})
	}
}

// A process whose command line names two workspaces is one look-alike
// claiming both, even in the sandbox of one of them (D78): each process
// of a session names its own workspace alone.
func TestSeparateLookAlikesManyNames(t *testing.T) {
	p := bwrapOf(13, 12, aliceNS, alice)
	p.Names = append(p.Names, Naming{Verb: VerbBind, Key: bob, Root: "/agents"})
	tab := Table{Procs: append(sandboxOf(10, 5, aliceNS, alice), p)}
	tab.SeparateLookAlikes(provenance())
	if _, ok := tab.Find(p.ID); ok {
		t.Fatalf("kept %d, which names two workspaces", p.ID.PID)
	}
	if len(tab.LookAlikes) != 1 || len(tab.LookAlikes[0].Names) != 2 || !tab.LookAlikes[0].Claims(bob) || !tab.LookAlikes[0].Claims(alice) ||
		!strings.Contains(tab.LookAlikes[0].Why, "names 2 workspaces") {
		t.Fatalf("look-alikes %+v; want one claiming both workspaces", tab.LookAlikes)
	}
	if v := tab.Naming(alice); v.Named != Yes || len(v.By) != 3 {
		t.Fatalf("alice: %s; want her own sandbox", v)
	}
}

// manyNamed is a process of pid, parent ppid in namespace ns, whose
// command line names n made-up workspaces and, cut, says it was read in
// part.
func manyNamed(pid, ppid int, ns uint64, n int, cut bool) Process {
	p := Process{ID: protocol.ProcID{PID: pid, Start: uint64(pid) * 7}, PPID: ppid, PIDNS: ns, UID: nodeUID, Argv: []string{"bwrap"}, Cut: cut}
	for i := range n {
		k := messages.WorkspaceKey{Login: "u" + strconv.Itoa(i), Project: "p"}
		p.Argv = append(p.Argv, "--bind", "/agents/"+k.Login+"/projects/p", "/x")
		p.Names = append(p.Names, Naming{Verb: VerbBind, Key: k, Root: "/agents"})
	}
	return p
}

// A look-alike names the first few workspaces it claims and counts the
// rest, in its own words and in a verdict's; a verdict counts the
// look-alikes past the first few.
func TestLookAlikeWordsBounded(t *testing.T) {
	p := manyNamed(13, 11, aliceNS, 20000, true)
	tab := Table{Procs: append(sandboxOf(10, 5, aliceNS, alice), p)}
	for i := range 10 {
		q := manyNamed(100+i, 11, aliceNS, 2, false)
		q.Names[1].Key = bob
		tab.Procs = append(tab.Procs, q)
	}
	tab.SeparateLookAlikes(provenance())
	if len(tab.LookAlikes) != 11 {
		t.Fatalf("%d look-alikes; want 11", len(tab.LookAlikes))
	}
	s := tab.LookAlikes[0].String()
	if !strings.Contains(s, "pid 13 only looks like a session of u0/p, u1/p, u2/p, 19997 more (") || len(s) > 1200 {
		t.Fatalf("the look-alike's words (%d bytes): %.300s", len(s), s)
	}
	v := tab.Naming(bob)
	if v.Named != No || len(v.LookAlikes) != 10 || !strings.HasSuffix(v.Ignored(), "; 7 more processes that only look like sessions of it") {
		t.Fatalf("bob: %s", v)
	}
}

// Unanchored asks for the node's records only where a live bwrap does not
// say which sandbox is whose.
func TestUnanchored(t *testing.T) {
	orphan := sandboxOf(20, 5, bobNS, bob)[1:]
	orphan[0].PPID = 1
	for _, c := range []struct {
		name  string
		procs []Process
		want  []messages.WorkspaceKey
	}{
		{"sessions with their bwraps", append(sandboxOf(10, 5, aliceNS, alice), sandboxOf(20, 5, bobNS, bob)...), nil},
		{"an orphaned sandbox", orphan, []messages.WorkspaceKey{bob}},
		{"a look-alike", append(sandboxOf(10, 5, aliceNS, alice), serveOf(13, 11, aliceNS, bob)), []messages.WorkspaceKey{bob}},
		{"the host only", []Process{serveOf(30, 29, hostNS, bob)}, nil},
		{"a look-alike naming many workspaces", append(sandboxOf(10, 5, aliceNS, alice), manyNamed(13, 12, aliceNS, 1000, true)), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Table{Procs: c.procs}.Unanchored(provenance())
			if len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
				t.Errorf("Unanchored = %v, want %v", got, c.want)
			}
		})
	}
}
