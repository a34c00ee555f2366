package host

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func claudeSandbox() RunSandbox {
	ws := "/var/lib/ocx/release/root/claude-1/projects/demo/abc"
	return RunSandbox{
		UID: 1000, GID: 1000, Capabilities: []string{"CAP_NET_BIND_SERVICE"}, Network: true, OwnSession: true,
		EndsWithNode: true,
		ReadOnly:     []string{"/usr", "/bin", "/etc/ssl/certs", "/var/lib/ocx/release/releases/r1", "/srv/both"},
		ReadWrite:    []string{ws, "/srv/both"},
		Homes:        []string{"/root/.claude", "/root/.claude.json"},
		Files:        []RunFile{{At: "/etc/passwd", Text: "claude-1:x:1000:1000::" + ws + ":/bin/sh\n"}},
		Proc:         "/proc", Dev: "/dev", Tmp: "/tmp",
		Workspace: ws,
	}
}

// Table 6's fields become bwrap's arguments in the table's order, so that a
// later one is seen over an earlier one; nothing else of the host is bound.
// A run's bwrap names no workspace of the agents root, wherever its
// workspace lies below the run root ($$root$$, AGENTS/ocxd.work, a name
// no login may have): its length is the run's own, and the process table
// counts it for no workspace however long it is (D78).
func TestRunBwrapArgsNamesNoWorkspace(t *testing.T) {
	sb := claudeSandbox()
	sb.Workspace = "/var/lib/ocx/agents/ocxd.work/claude-1/projects/demo/abc"
	sb.ReadWrite = []string{sb.Workspace}
	got, err := RunBwrapArgs(sb, RunFDs{Status: 3, Block: 4, Files: 5}, sb.Workspace, []string{"sh", "-c", strings.Repeat("x", 2*MaxCmdline)})
	if err != nil {
		t.Fatal(err)
	}
	l := mustLayout(t, "/var/lib/ocx/agents")
	for _, argv := range [][]string{got, func() []string { a, _ := ParseCmdline(cmdlineBytes(got)); return a }()} {
		if names := Namings(argv, l); len(names) != 0 {
			t.Fatalf("a run's bwrap names %+v", names)
		}
	}
}

func TestRunBwrapArgs(t *testing.T) {
	sb := claudeSandbox()
	ws := sb.Workspace
	got, err := RunBwrapArgs(sb, RunFDs{Status: 3, Block: 4, Files: 5}, ws+"/tree", []string{"claude", "--remote-control"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bwrap",
		"--unshare-user", "--unshare-pid", "--unshare-uts", "--unshare-ipc", "--unshare-cgroup-try",
		"--hostname", RunHostname,
		"--uid", "1000", "--gid", "1000",
		"--cap-drop", "ALL", "--cap-add", "CAP_NET_BIND_SERVICE",
		"--new-session", "--die-with-parent",
		"--ro-bind", "/usr", "/usr", "--ro-bind", "/bin", "/bin", "--ro-bind", "/etc/ssl/certs", "/etc/ssl/certs",
		"--ro-bind", "/var/lib/ocx/release/releases/r1", "/var/lib/ocx/release/releases/r1",
		"--bind", ws, ws, "--bind", "/srv/both", "/srv/both",
		"--bind", "/root/.claude", ws + "/.claude", "--bind", "/root/.claude.json", ws + "/.claude.json",
		"--perms", "0644", "--ro-bind-data", "5", "/etc/passwd",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--chdir", ws + "/tree", "--json-status-fd", "3", "--block-fd", "4",
		"--", "claude", "--remote-control"}
	if !slices.Equal(got, want) {
		t.Fatalf("RunBwrapArgs =\n%q\nwant\n%q", got, want)
	}

	// No network, no session of its own, not ending with the node, no
	// capabilities, no block: the arguments say so and nothing more.
	sb = RunSandbox{UID: 0, GID: 0, Proc: "/p", Dev: "/d", Tmp: "/t"}
	got, err = RunBwrapArgs(sb, RunFDs{Status: 3, Files: 4}, "/", []string{"/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"bwrap",
		"--unshare-user", "--unshare-pid", "--unshare-uts", "--unshare-ipc", "--unshare-cgroup-try",
		"--hostname", RunHostname, "--uid", "0", "--gid", "0", "--cap-drop", "ALL", "--unshare-net",
		"--proc", "/p", "--dev", "/d", "--tmpfs", "/t", "--chdir", "/", "--json-status-fd", "3", "--", "/bin/true"}
	if !slices.Equal(got, want) {
		t.Fatalf("RunBwrapArgs =\n%q\nwant\n%q", got, want)
	}
	sb = RunSandbox{UID: 0, GID: 0, Proc: "/p", Dev: "/d", Tmp: "/t"}
	got, _ = RunBwrapArgs(sb, RunFDs{Status: 3, Files: 4}, "/", []string{"/bin/true"})
	for _, a := range got {
		if a == "--share-net" || a == "--die-with-parent" || a == "--new-session" || a == "--setenv" {
			t.Fatalf("%q given unasked: %q", a, got)
		}
	}
}

// A sandbox whose shape is wrong is refused naming the field.
func TestCheckRunSandboxNamesTheField(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*RunSandbox)
		field string
	}{
		{"negative uid", func(s *RunSandbox) { s.UID = -1 }, "sandbox.uid"},
		{"negative gid", func(s *RunSandbox) { s.GID = -2 }, "sandbox.gid"},
		{"unknown capability", func(s *RunSandbox) { s.Capabilities = []string{"CAP_CHOWN", "CAP_FLY"} }, "sandbox.capabilities[1]"},
		{"lower-case capability", func(s *RunSandbox) { s.Capabilities = []string{"net_raw"} }, "sandbox.capabilities[0]"},
		{"relative read_only", func(s *RunSandbox) { s.ReadOnly = []string{"/usr", "usr"} }, "sandbox.read_only[1]"},
		{"unclean read_write", func(s *RunSandbox) { s.ReadWrite = []string{"/srv/../etc"} }, "sandbox.read_write[0]"},
		{"root as a home", func(s *RunSandbox) { s.Homes = []string{"/"} }, "sandbox.homes[0]"},
		{"two homes by one name", func(s *RunSandbox) { s.Homes = []string{"/a/.x", "/b/.x"} }, "sandbox.homes[1]"},
		{"homes without a workspace", func(s *RunSandbox) { s.Workspace = "" }, "sandbox's workspace, where homes are seen,"},
		{"relative file", func(s *RunSandbox) { s.Files = []RunFile{{At: "etc/passwd"}} }, "sandbox.files[0].at"},
		{"file at /", func(s *RunSandbox) { s.Files = []RunFile{{At: "/"}} }, "sandbox.files[0].at"},
		{"no proc", func(s *RunSandbox) { s.Proc = "" }, "sandbox.proc"},
		{"relative dev", func(s *RunSandbox) { s.Dev = "dev" }, "sandbox.dev"},
		{"NUL in tmp", func(s *RunSandbox) { s.Tmp = "/t\x00mp" }, "sandbox.tmp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb := claudeSandbox()
			c.edit(&sb)
			_, err := RunBwrapArgs(sb, RunFDs{Status: 3}, "/", []string{"x"})
			var fe *RunFieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("err = %v, want one naming %q", err, c.field)
			}
		})
	}
	if _, err := RunBwrapArgs(claudeSandbox(), RunFDs{Status: 3}, "tree", []string{"x"}); err == nil || !strings.Contains(err.Error(), "process.cwd") {
		t.Fatalf("relative cwd: %v", err)
	}
	if _, err := RunBwrapArgs(claudeSandbox(), RunFDs{Status: 3}, "/", nil); err == nil || !strings.Contains(err.Error(), "process.command") {
		t.Fatalf("no command: %v", err)
	}
}

func TestCapabilityMask(t *testing.T) {
	m, err := CapabilityMask([]string{"CAP_NET_BIND_SERVICE"})
	if err != nil || m != 0x400 {
		t.Fatalf("CAP_NET_BIND_SERVICE = %#x %v, want 0x400", m, err)
	}
	m, err = CapabilityMask(Capabilities[:])
	if err != nil || m != 1<<41-1 {
		t.Fatalf("every capability = %#x %v", m, err)
	}
	if m, err := CapabilityMask(nil); err != nil || m != 0 {
		t.Fatalf("none = %#x %v", m, err)
	}
	if _, err := CapabilityMask([]string{"CAP_NOPE"}); err == nil || !strings.Contains(err.Error(), `"CAP_NOPE"`) {
		t.Fatalf("unknown: %v", err)
	}
}

// Refusal row 8: a setting or a limit the host cannot provide is refused,
// naming it.
func TestRunSupportCheck(t *testing.T) {
	sb := claudeSandbox()
	all := RunSupport{}
	cases := []struct {
		name  string
		s     RunSupport
		sb    *RunSandbox
		l     RunLimits
		field string // "" for none
	}{
		{"everything provided", all, &sb, RunLimits{CPU: 10, Processes: 50}, ""},
		{"unconfined, no limits", all, nil, RunLimits{}, ""},
		{"no bwrap", RunSupport{Sandbox: "bwrap is not installed"}, &sb, RunLimits{}, "sandbox"},
		{"no bwrap, unconfined", RunSupport{Sandbox: "bwrap is not installed"}, nil, RunLimits{}, ""},
		{"memory", RunSupport{Memory: "no controller"}, &sb, RunLimits{Memory: 1 << 30}, "limits.memory"},
		{"processes as root", RunSupport{Processes: "root"}, &sb, RunLimits{Processes: 8}, "limits.processes"},
		{"processes below the floor", all, &sb, RunLimits{Processes: 1}, "limits.processes"},
		{"cpu unconfined", all, nil, RunLimits{CPU: 5}, "limits.cpu"},
		{"processes unconfined", all, nil, RunLimits{Processes: 5}, "limits.processes"},
		{"memory unconfined, no controller", RunSupport{Memory: "no controller"}, nil, RunLimits{Memory: 5}, "limits.memory"},
		{"disk, no loop devices", RunSupport{Disk: "no loop devices"}, &sb, RunLimits{Disk: 1 << 30}, "limits.disk"},
		{"disk unconfined", all, nil, RunLimits{Disk: 1 << 30}, ""},
		{"memory where a cgroup can be made", all, &sb, RunLimits{Memory: 1 << 30, Processes: 50}, ""},
		{"memory unconfined", all, nil, RunLimits{Memory: 1 << 30}, "limits.memory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.s.Check(c.sb, c.l)
			if c.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ne *NotProvidedError
			if !errors.As(err, &ne) || ne.Field != c.field || !errors.Is(err, ErrNotProvided) {
				t.Fatalf("err = %v, want one naming %q", err, c.field)
			}
		})
	}
}

// Refusal row 9 for a run: the node's repository, its run state, its release
// root and its password file may not be seen, links followed; the release
// and the workspace themselves may.
func TestNodeFilesCheckRunSandbox(t *testing.T) {
	n := node()
	links := map[string]string{
		"/home/x/link-to-state": n.State + "/r1",
		"/home/x/link-to-pw":    "/etc/ocx",
		"/home/x/link-to-repo":  "/srv/fossil",
		"/home/x/link-to-other": "/var/lib/ocx/release/releases/def",
	}
	resolve := func(p string) (string, error) {
		if r, ok := links[p]; ok {
			return r, nil
		}
		return p, nil
	}
	ok := RunSandbox{ReadOnly: []string{"/usr", n.Release}, ReadWrite: []string{n.Workspace, n.Workspace + "/tree"},
		Homes: []string{"/root/.claude"}, Workspace: n.Workspace}
	if err := n.CheckRunSandbox(ok, resolve); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		list string
		p    string
	}{
		{"read_only", "/home/x/link-to-state"}, {"read_write", "/home/x/link-to-pw"}, {"homes", "/home/x/link-to-repo"},
		{"read_only", "/home/x/link-to-other"}, {"read_only", n.State}, {"read_write", "/etc"},
		{"homes", n.Passwords}, {"read_only", "/var/lib/ocx/release"}, {"read_write", "/"},
	} {
		sb := ok
		switch c.list {
		case "read_only":
			sb.ReadOnly = []string{"/usr", c.p}
		case "read_write":
			sb.ReadWrite = []string{c.p}
		case "homes":
			sb.Homes = []string{c.p}
		}
		err := n.CheckRunSandbox(sb, resolve)
		var re *RefusalError
		if !errors.As(err, &re) || re.Path != c.p || !errors.Is(err, errRefused) {
			t.Errorf("%s %q: err = %v, want a refusal naming it", c.list, c.p, err)
		}
	}
	// A state directory or a password file inside the workspace is still
	// the node's.
	n2 := n
	n2.State = n.Workspace + "/state"
	sb := ok
	sb.ReadWrite = []string{n.Workspace}
	if err := n2.CheckRunSandbox(sb, resolve); err == nil {
		t.Fatal("a workspace holding the state directory was let through")
	}
	// Unlike a session's sandbox, a run's may name its own /tmp or /proc
	// paths of the host: its own are stated, and seen over them.
	sb = ok
	sb.ReadOnly = []string{"/tmp/x", "/proc/sys"}
	if err := n.CheckRunSandbox(sb, resolve); err != nil {
		t.Fatal(err)
	}
}

func TestCgroupParsers(t *testing.T) {
	cg, err := os.ReadFile("testdata/proc/cgroup-hybrid")
	if err != nil {
		t.Fatal(err)
	}
	mi, err := os.ReadFile("testdata/proc/mountinfo-hybrid")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := parseProcCgroup(cg)
	if !ok || p != "/" {
		t.Fatalf("ParseProcCgroup = %q %v", p, ok)
	}
	mounts := parseCgroup2Mounts(mi)
	if len(mounts) != 1 || mounts[0] != (cgroup2Mount{Root: "/", At: "/sys/fs/cgroup/unified"}) {
		t.Fatalf("ParseCgroup2Mounts = %+v", mounts)
	}
	dir, ok := cgroup2Dir(mounts, p)
	if !ok || dir != "/sys/fs/cgroup/unified" {
		t.Fatalf("Cgroup2Dir = %q %v", dir, ok)
	}
	if _, ok := parseProcCgroup([]byte("4:memory:/x\n")); ok {
		t.Fatal("a v1 line read as v2")
	}
	m := parseCgroup2Mounts([]byte(`30 1 0:26 /user.slice /sys/fs/cgroup\040x rw - cgroup2 cgroup2 rw` + "\n"))
	if len(m) != 1 || m[0].At != "/sys/fs/cgroup x" || m[0].Root != "/user.slice" {
		t.Fatalf("escaped mount = %+v", m)
	}
	if d, ok := cgroup2Dir(m, "/user.slice/u1/s"); !ok || d != "/sys/fs/cgroup x/u1/s" {
		t.Fatalf("Cgroup2Dir below a root = %q %v", d, ok)
	}
	if _, ok := cgroup2Dir(m, "/user.slicer"); ok {
		t.Fatal("a sibling read as within the root")
	}
}

// TestCheckRunSandboxHidden: proc, dev and tmp are applied last (table 6),
// so one at or above a path the sandbox shows before it would hide that
// path; the run is refused naming the field and the path it hides (issue
// 27 item 4: a node whose root lies under /tmp, and seed 004 section 14's
// second run, tmp "/tmp", whose workspace bwrap then cannot chdir to).
func TestCheckRunSandboxHidden(t *testing.T) {
	under := func(s *RunSandbox) {
		ws := "/tmp/TestX/001/agents/claude-1/projects/demo/abc"
		s.Workspace, s.ReadWrite = ws, []string{ws}
		s.Files = []RunFile{{At: "/etc/passwd", Text: "x"}}
	}
	cases := []struct {
		name        string
		edit        func(*RunSandbox)
		field, hide string
	}{
		{"the workspace under tmp", under, "sandbox.tmp", "/tmp/TestX/001/agents/claude-1/projects/demo/abc"},
		{"the workspace is tmp", func(s *RunSandbox) { under(s); s.Tmp = s.Workspace }, "sandbox.tmp", "/tmp/TestX/001/agents/claude-1/projects/demo/abc"},
		{"tmp above the workspace", func(s *RunSandbox) { s.Tmp = "/var/lib" }, "sandbox.tmp", "/var/lib/ocx/release/root/claude-1/projects/demo/abc"},
		{"a read_only path under tmp", func(s *RunSandbox) { s.ReadOnly = append(s.ReadOnly, "/tmp/tools") }, "sandbox.tmp", "/tmp/tools"},
		{"a file under dev", func(s *RunSandbox) { s.Files = append(s.Files, RunFile{At: "/dev/x"}) }, "sandbox.dev", "/dev/x"},
		{"a read_write path under proc", func(s *RunSandbox) { s.Proc = "/srv" }, "sandbox.proc", "/srv/both"},
		{"tmp at /", func(s *RunSandbox) { s.Tmp = "/" }, "sandbox.tmp", "/var/lib/ocx/release/root/claude-1/projects/demo/abc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb := claudeSandbox()
			c.edit(&sb)
			err := CheckRunSandbox(sb)
			var fe *RunFieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Why, " "+c.hide+":") {
				t.Fatalf("err = %v, want one naming %s and the path %s", err, c.field, c.hide)
			}
		})
	}
	// Beside a path, not above it, hides nothing: /tmp beside /tmpx, the
	// workspace's homes' places inside it, a read_only / above tmp.
	sb := claudeSandbox()
	sb.ReadOnly = append(sb.ReadOnly, "/", "/tmpx")
	if err := CheckRunSandbox(sb); err != nil {
		t.Fatalf("a sandbox that hides nothing: %v", err)
	}
}

// TestCheckRunReadOnly: a read_only path the host does not have is refused
// (seed 004 section 1, row 8, D83), naming the field and the path and
// stat's reason; one also in read_write (read-write) or at or below a
// path the steps are still to make is left to the launch or to the check
// after the steps.
func TestCheckRunReadOnly(t *testing.T) {
	present := map[string]bool{"/usr": true, "/bin": true}
	stat := func(p string) error {
		if present[p] {
			return nil
		}
		return &os.PathError{Op: "stat", Path: p, Err: os.ErrNotExist}
	}
	ws := "/srv/runs/u/projects/demo/abc"
	for _, c := range []struct {
		name     string
		readOnly []string
		rw       []string
		made     []string
		field    string
	}{
		{"every path there", []string{"/usr", "/bin"}, nil, nil, ""},
		{"one missing", []string{"/usr", "/lib64", "/opt/tool"}, nil, nil, "sandbox.read_only[1]"},
		{"missing but read-write", []string{"/usr", "/srv/both"}, []string{"/srv/both"}, nil, ""},
		{"the workspace the steps make", []string{ws, ws + "/tree/docs"}, nil, []string{ws, "", ws + "/tree"}, ""},
		{"beside what the steps make", []string{ws + "x"}, nil, []string{ws}, "sandbox.read_only[0]"},
		{"nothing made", []string{ws + "/tree"}, nil, nil, "sandbox.read_only[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckRunReadOnly(RunSandbox{ReadOnly: c.readOnly, ReadWrite: c.rw}, c.made, stat)
			if c.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *RunFieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Why, "is not on this node") || !strings.Contains(fe.Why, "does not exist") {
				t.Fatalf("CheckRunReadOnly = %v; want %s refused", err, c.field)
			}
			i := int(fe.Field[len("sandbox.read_only[")] - '0')
			if !strings.HasPrefix(fe.Why, c.readOnly[i]+" ") {
				t.Errorf("%s does not name %s first: %s", fe.Field, c.readOnly[i], fe.Why)
			}
		})
	}
}
