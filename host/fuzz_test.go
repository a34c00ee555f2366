package host

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
)

// seedFiles adds each of the named fixtures of testdata/proc to f.
func seedFiles(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", "proc", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParseNSLink: a namespace link is taken only as KIND:[INODE] with an
// inode above zero.
func FuzzParseNSLink(f *testing.F) {
	for _, s := range []string{"pid:[4026531836]", "pid:[0]", "pid:[]", "mnt:[4026531840]", "pid:[1", "pid:[-1]", "pid:[99999999999999999999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ino, err := ParseNSLink(s, "pid")
		if err == nil && ino == 0 {
			t.Fatalf("ParseNSLink(%q) took inode 0", s)
		}
	})
}

// FuzzParseNSpid: a status is taken only with an NSpid line of positive
// PIDs, and says at least one level.
func FuzzParseNSpid(f *testing.F) {
	seedFiles(f, "status-host.txt", "status-sandboxed.txt", "status-nested.txt")
	f.Add([]byte("NSpid:\n"))
	f.Add([]byte("NSpid:\t12\t-1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseNSpid(b)
		if err == nil && n < 1 {
			t.Fatalf("ParseNSpid took %d levels", n)
		}
	})
}

// FuzzDecodeSandboxRecord: what the decoder takes is valid, and encodes to
// what decodes the same.
func FuzzDecodeSandboxRecord(f *testing.F) {
	f.Add([]byte(`{"bwrap":{"pid":10,"start":5},"init":{"pid":11,"start":6},"pid_namespace":4026532000}` + "\n"))
	f.Add([]byte(`{"bwrap":{"pid":10,"start":5},"init":{"pid":0,"start":6},"pid_namespace":4026532000}`))
	f.Add([]byte(`{"bwrap":{"pid":10,"start":5},"init":{"pid":11,"start":6},"pid_namespace":1,"x":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeSandboxRecord(b)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded an invalid record %+v: %v", r, err)
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		again, err := DecodeSandboxRecord(enc)
		if err != nil || again != r {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, r)
		}
	})
}

// FuzzParseCgroupMounts: every mount read is a cgroup hierarchy, v1 or v2,
// mounted somewhere; a v2 one names no controller.
func FuzzParseCgroupMounts(f *testing.F) {
	seedFiles(f, "mountinfo-hybrid", "mountinfo-v2")
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range ParseCgroupMounts(b) {
			if m.Version != cgroupV1 && m.Version != CgroupV2 {
				t.Fatalf("a mount of version %d: %+v", m.Version, m)
			}
			if m.Version == CgroupV2 && len(m.Controllers) != 0 {
				t.Fatalf("a v2 mount names controllers: %+v", m)
			}
		}
		// The read is a pure function of the bytes.
		if a, b := ParseCgroupMounts(b), ParseCgroupMounts(b); !reflect.DeepEqual(a, b) {
			t.Fatal("two reads of the same bytes differ")
		}
	})
}

// FuzzParseCgroupFiles: the events, the limits and the host's memory are
// read from any bytes without a panic, and a limit is named only when a
// count says it was reached.
func FuzzParseCgroupFiles(f *testing.F) {
	for _, n := range [][2]string{{"memory.oom_control-v1", "pids.events"}, {"memory.events-v2", "pids.events"}, {"proc-stat.txt", "stat-cat.txt"}} {
		var pair [2][]byte
		for i, name := range n {
			b, err := os.ReadFile(filepath.Join("testdata", "proc", name))
			if err != nil {
				f.Fatal(err)
			}
			pair[i] = b
		}
		f.Add(pair[0], pair[1])
	}
	f.Add([]byte("oom_kill 18446744073709551615\n"), []byte("max -1\n"))
	f.Fuzz(func(t *testing.T, memory, pids []byte) {
		e := ParseCgroupEvents(memory, pids)
		if (e.Limit() != "") != (e.OOMKills > 0 || e.PidsMax > 0) {
			t.Fatalf("events %+v name the limit %q", e, e.Limit())
		}
		l := ParseCgroupLimits(memory, pids)
		if l.Memory >= 1<<62 || l.Processes >= 1<<62 {
			t.Fatalf("limits past any host: %+v", l)
		}
		if n, ok := ParseMemTotal(memory); ok && n%1024 != 0 {
			t.Fatalf("MemTotal of %d bytes is not whole kilobytes", n)
		}
	})
}

// FuzzParseHookMark: a hook mark reads as "MARK" or "MARK WORKING" with
// WORKING past MARK, never a negative receipt; what it reads it writes
// back as it read it.
func FuzzParseHookMark(f *testing.F) {
	for _, s := range []string{"803\n", "803 821\n", "0\n", "803 803\n", "-1\n", "803 12\n", "", "1 2 3\n", "x\n", " 7 \n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, w, ok := ParseHookMarkWorking(b)
		if !ok {
			return
		}
		if m < 0 || (w != 0 && w <= m) {
			t.Fatalf("%q read as mark %d working %d", b, m, w)
		}
		again := HookMarkContent(m)
		if w != 0 {
			again = HookMarkWorkingContent(m, w)
		}
		m2, w2, ok2 := ParseHookMarkWorking(again)
		if !ok2 || m2 != m || w2 != w {
			t.Fatalf("%q written back as %q reads %d %d %v", b, again, m2, w2, ok2)
		}
		if v, ok := ParseHookMark(b); !ok || v != m {
			t.Fatalf("ParseHookMark(%q) = %d %v, want %d", b, v, ok, m)
		}
	})
}

// FuzzParseWoken: a ledger of woken posts reads each whole line that is
// one, and writes back as it read; a line that does not read is counted,
// never taken.
func FuzzParseWoken(f *testing.F) {
	post := "557d95234d2b0fb7174f3befba10ef0c34555930e72a10a4a4d1c85696eadd9b"
	ticket := "346d34a0f0d96ddaf66e2099f5ecba91b7674a31"
	for _, s := range []string{
		post + " thread " + post + " 1796635533758433950\n",
		post + " ticket " + ticket + " 1\n" + post + " thread " + post + " 2\n",
		post + " thread " + post + " 17966355", // cut by a full disk
		post + " branch trunk 1\n", post + " thread ../x 1\n", "\n\n", "x y z w\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		posts, _ := ParseWoken(b)
		var again []byte
		for _, w := range posts {
			again = append(again, w.Line()...)
		}
		back, bad := ParseWoken(again)
		if bad != 0 || !reflect.DeepEqual(back, posts) {
			t.Fatalf("%q read as %v, written back as %q, read again as %v (%d bad)", b, posts, again, back, bad)
		}
	})
}

// FuzzParseCmdline: a command line of at most MaxCmdline bytes is read
// whole, its arguments joined again giving it back; a longer one is cut,
// its arguments the first whole ones, within the bound; and what the part
// read names surely the whole names too, never a workspace a cut-short
// path would (D78).
func FuzzParseCmdline(f *testing.F) {
	seedFiles(f, "cmdline-serve.bin", "cmdline-bwrap.bin", "cmdline-init.bin", "cmdline-empty.bin", "cmdline-binds.bin", "cmdline-cut-path.bin")
	l, _ := NewLayout("/var/lib/ocx/agents")
	f.Fuzz(func(t *testing.T, b []byte) {
		argv, cut := ParseCmdline(b)
		if cut != (len(b) > MaxCmdline) {
			t.Fatalf("%d bytes: cut %v", len(b), cut)
		}
		got := cmdlineBytes(argv)
		if !cut {
			if want := bytes.TrimRight(b, "\x00"); !bytes.Equal(bytes.TrimRight(got, "\x00"), want) {
				t.Fatalf("read whole: %q, want %q", got, want)
			}
			return
		}
		if len(got) > MaxCmdline || !bytes.HasPrefix(b, got) {
			t.Fatalf("cut: %d bytes of arguments %q, not the first whole ones of %d", len(got), argv, len(b))
		}
		// Each workspace the part read names surely, the whole names too
		// (a `--root` past the bound leaves the key unsure: refused).
		all := map[messages.WorkspaceKey]bool{}
		for _, n := range Namings(strings.Split(string(b), "\x00"), l) {
			all[n.Key] = true
		}
		for _, n := range Namings(argv, l) {
			if !n.Unsure && !all[n.Key] {
				t.Fatalf("the part read names %s, the whole command line does not", n.Key)
			}
		}
	})
}

// FuzzParseMounts: any bytes parse without a panic, each mount with a
// mount point.
func FuzzParseMounts(f *testing.F) {
	f.Add([]byte(diskMountinfo))
	f.Add([]byte("1 2 3 4 5 - \n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range ParseMounts(b) {
			if m.At == "" && m.Dev == "" {
				t.Fatalf("a mount of nothing: %+v", m)
			}
		}
		MountedBelow(ParseMounts(b), "/")
	})
}
