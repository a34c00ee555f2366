package host

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages"
	"pgregory.net/rapid"
)

func TestBwrapArgs(t *testing.T) {
	ws := "/var/lib/ocx/agents/ci-ocx/projects/ollama"
	s := SandboxSpec{
		Sandbox: messages.Sandbox{
			Network:   true,
			ReadOnly:  []string{"/usr", "/etc/ssl", "/usr", "/opt/shared"},
			ReadWrite: []string{ws, "/opt/shared", "/srv/cache"},
			Homes:     []string{"/root/.claude", "/root/.claude.json"},
			Path:      []string{"/var/lib/ocx/release/current", "/usr/bin", "/bin"},
		},
		Workspace: ws,
		Release:   "/var/lib/ocx/release/releases/abc",
		MCPDir:    "/var/lib/ocx/agents/ci-ocx/mcp/ollama",
	}
	got, err := BwrapArgs(s, 3, ws+"/tree", []string{"/var/lib/ocx/release/releases/abc/workspace", "serve", "ci-ocx/ollama"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bwrap", "--new-session", "--unshare-all", "--cap-drop", "CAP_SYS_RESOURCE", "--share-net",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind-try", "/usr", "/usr", "--ro-bind-try", "/etc/ssl", "/etc/ssl",
		"--bind", "/opt/shared", "/opt/shared", "--bind", "/srv/cache", "/srv/cache",
		"--bind", ws, ws,
		"--ro-bind", "/var/lib/ocx/release/releases/abc", "/var/lib/ocx/release/releases/abc",
		"--bind", "/root/.claude", ws + "/.claude", "--bind", "/root/.claude.json", ws + "/.claude.json",
		"--ro-bind", "/var/lib/ocx/agents/ci-ocx/mcp/ollama", MCPMount,
		"--setenv", "HOME", ws, "--setenv", "PATH", "/var/lib/ocx/release/current:/usr/bin:/bin",
		"--chdir", ws + "/tree", "--json-status-fd", "3",
		"--", "/var/lib/ocx/release/releases/abc/workspace", "serve", "ci-ocx/ollama"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("BwrapArgs =\n%q\nwant\n%q", got, want)
	}
	// No network: every namespace stays unshared. No status fd, no release,
	// no PATH, and the workspace as the directory.
	s.Sandbox = messages.Sandbox{ReadOnly: []string{"/usr"}}
	s.Release, s.MCPDir = "", ""
	got, err = BwrapArgs(s, 0, "", []string{"sh", "-c", "echo --die-with-parent"})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"bwrap", "--new-session", "--unshare-all", "--cap-drop", "CAP_SYS_RESOURCE", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind-try", "/usr", "/usr", "--bind", ws, ws, "--setenv", "HOME", ws, "--chdir", ws,
		"--", "sh", "-c", "echo --die-with-parent"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("BwrapArgs =\n%q\nwant\n%q", got, want)
	}
	// What a session must never get, whatever it asks.
	for _, a := range got[:slices.Index(got, "--")] {
		if a == "--die-with-parent" || a == "--share-net" {
			t.Fatalf("got %s", a)
		}
	}
	// The built command names its workspace for the process table.
	l := mustLayout(t, "/var/lib/ocx/agents")
	if n := Namings(got, l); len(n) != 1 || n[0].Key != (messages.WorkspaceKey{Login: "ci-ocx", Project: "ollama"}) {
		t.Fatalf("the bwrap command names %+v", n)
	}
}

// generousSandbox is a session's sandbox far more generous than seed
// 000's example: 40 read-only paths, 10 read-write, 10 homes, 10
// directories in PATH, each of a length seen on real hosts.
func generousSandbox(ws string) SandboxSpec {
	var sb messages.Sandbox
	for i := range 40 {
		sb.ReadOnly = append(sb.ReadOnly, fmt.Sprintf("/usr/local/share/toolchains/vendor-%02d/lib/x86_64-linux-gnu", i))
	}
	for i := range 10 {
		sb.ReadWrite = append(sb.ReadWrite, fmt.Sprintf("/srv/cache/ocx/shared-build-cache-%02d/objects", i))
		sb.Homes = append(sb.Homes, fmt.Sprintf("/home/ci/.config/tool-%02d-settings", i))
		sb.Path = append(sb.Path, fmt.Sprintf("/opt/toolchains/vendor-%02d/bin", i))
	}
	return SandboxSpec{Sandbox: sb, Workspace: ws,
		Release: "/var/lib/ocx/release/releases/" + strings.Repeat("a", 64),
		MCPDir:  "/var/lib/ocx/agents/ci-ocx/mcp/ollama", BlockFD: 4}
}

// The node never builds a session's bwrap whose command line the process
// table would read cut (D78): a generous sandbox is far within the bound,
// names its one workspace, and one past the bound is refused, naming why.
func TestBwrapArgsBounded(t *testing.T) {
	ws := "/var/lib/ocx/agents/ci-ocx/projects/ollama"
	command := []string{"/var/lib/ocx/release/releases/" + strings.Repeat("a", 64) + "/workspace", "serve", "ci-ocx/ollama",
		"--root", "/var/lib/ocx/agents", "--launch", strings.Repeat("b", 64)}
	seed := SandboxSpec{Sandbox: messages.Sandbox{Network: true,
		ReadOnly: []string{"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc/ssl", "/etc/pki", "/etc/ca-certificates", "/etc/resolv.conf",
			"/etc/hosts", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/opt", "/var/lib/ocx/release/current"},
		ReadWrite: []string{ws}, Path: []string{"/var/lib/ocx/release/current", "/usr/local/bin", "/usr/bin", "/bin"}},
		Workspace: ws, Release: "/var/lib/ocx/release/releases/" + strings.Repeat("a", 64), MCPDir: "/var/lib/ocx/agents/ci-ocx/mcp/ollama", BlockFD: 4}
	argv, err := BwrapArgs(seed, 3, ws+"/tree", command)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed 000's example sandbox's bwrap: %d arguments, %d bytes", len(argv), cmdlineLen(argv))
	s := generousSandbox(ws)
	argv, err = BwrapArgs(s, 3, ws+"/tree", command)
	if err != nil {
		t.Fatal(err)
	}
	n := cmdlineLen(argv)
	t.Logf("a generous sandbox's bwrap: %d arguments, %d bytes (the bound %d)", len(argv), n, MaxCmdline)
	if n > MaxCmdline*6/10 {
		t.Errorf("a generous sandbox's bwrap is %d bytes, more than 60%% of the bound %d", n, MaxCmdline)
	}
	l := mustLayout(t, "/var/lib/ocx/agents")
	if names := Namings(argv, l); len(names) != 1 || names[0].Key.String() != "ci-ocx/ollama" {
		t.Errorf("a session's bwrap names %+v; want its own workspace alone", names)
	}
	if got, cut := ParseCmdline(cmdlineBytes(argv)); cut || !reflect.DeepEqual(got, argv) {
		t.Errorf("its command line does not read whole (cut %v)", cut)
	}
	for i := range 100 {
		s.Sandbox.ReadOnly = append(s.Sandbox.ReadOnly, fmt.Sprintf("/usr/local/share/more-toolchains/vendor-%02d/lib", i))
	}
	if _, err := BwrapArgs(s, 3, ws+"/tree", command); err == nil || !strings.Contains(err.Error(), "past the 16384 the process table reads") {
		t.Errorf("a sandbox of %d read-only paths: %v; want it refused naming the bound", len(s.Sandbox.ReadOnly), err)
	}
}

func TestBwrapArgsRefuses(t *testing.T) {
	ws := "/a/alice/projects/demo"
	base := func() SandboxSpec { return SandboxSpec{Workspace: ws} }
	cases := map[string]func(*SandboxSpec){
		"relative workspace":   func(s *SandboxSpec) { s.Workspace = "a/b" },
		"unclean read_only":    func(s *SandboxSpec) { s.Sandbox.ReadOnly = []string{"/usr/../etc"} },
		"relative read_write":  func(s *SandboxSpec) { s.Sandbox.ReadWrite = []string{"tmp"} },
		"NUL":                  func(s *SandboxSpec) { s.Sandbox.ReadOnly = []string{"/usr\x00"} },
		"proc":                 func(s *SandboxSpec) { s.Sandbox.ReadOnly = []string{"/proc"} },
		"inside dev":           func(s *SandboxSpec) { s.Sandbox.ReadWrite = []string{"/dev/shm"} },
		"tmp itself":           func(s *SandboxSpec) { s.Sandbox.ReadWrite = []string{"/tmp"} },
		"root":                 func(s *SandboxSpec) { s.Sandbox.ReadOnly = []string{"/"} },
		"home named tree":      func(s *SandboxSpec) { s.Sandbox.Homes = []string{"/root/tree"} },
		"homes sharing a name": func(s *SandboxSpec) { s.Sandbox.Homes = []string{"/root/.x", "/home/u/.x"} },
		"path with colon":      func(s *SandboxSpec) { s.Sandbox.Path = []string{"/usr/bin:/bin"} },
		"relative release":     func(s *SandboxSpec) { s.Release = "rel" },
		"relative MCP dir":     func(s *SandboxSpec) { s.MCPDir = "mcp" },
		"over the MCP mount":   func(s *SandboxSpec) { s.Sandbox.ReadWrite = []string{MCPMount} },
		"inside the MCP mount": func(s *SandboxSpec) { s.Sandbox.ReadOnly = []string{MCPMount + "/x"} },
	}
	for name, mutate := range cases {
		s := base()
		mutate(&s)
		if _, err := BwrapArgs(s, 3, "", []string{"true"}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := BwrapArgs(base(), 3, "", nil); err == nil {
		t.Error("no command: accepted")
	}
	if _, err := BwrapArgs(base(), 3, "rel", []string{"true"}); err == nil {
		t.Error("relative directory: accepted")
	}
	s := base()
	s.Sandbox.ReadWrite = []string{"/tmp/scratch"}
	if _, err := BwrapArgs(s, 3, "", []string{"true"}); err != nil {
		t.Errorf("a path inside /tmp was refused: %v", err)
	}
}

func node() NodeFiles {
	return NodeFiles{
		Repositories: []string{"/srv/fossil/demo.fossil", "/srv/other/x.fossil"},
		Agents:       "/var/lib/ocx/agents",
		ReleaseRoot:  "/var/lib/ocx/release",
		Release:      "/var/lib/ocx/release/releases/abc",
		Workspace:    "/var/lib/ocx/agents/alice/projects/demo",
		State:        "/var/lib/ocx/runs",
		Passwords:    "/etc/ocx/passwords",
	}
}

func TestNodeFilesCheck(t *testing.T) {
	n := node()
	allowed := []string{
		"/usr", "/etc/ssl", "/srv/fossil2", "/srv/fossil/demo", "/var/lib/ocx/other",
		n.Workspace, n.Workspace + "/tree", n.Release, n.Release + "/workspace",
	}
	refused := []string{
		"/", "/srv", "/srv/fossil", "/srv/fossil/demo.fossil", "/srv/fossil/demo.fossil-wal",
		"/srv/other/x.fossil", "/var", "/var/lib/ocx", n.Agents, n.Agents + "/ocxd.lock",
		n.Agents + "/node.json", n.Agents + "/alice/password", n.Agents + "/alice",
		n.Agents + "/alice/projects", n.Agents + "/bob/projects/demo", n.Agents + "/alice/projects/demo2",
		n.ReleaseRoot, n.ReleaseRoot + "/releases", n.ReleaseRoot + "/releases/def", n.ReleaseRoot + "/current",
		"/proc", "/proc/1", "/dev", "/tmp", "relative", "/usr/../srv",
	}
	for _, p := range allowed {
		if err := n.Check(p); err != nil {
			t.Errorf("Check(%q) = %v, want allowed", p, err)
		}
	}
	for _, p := range refused {
		err := n.Check(p)
		if !errors.Is(err, errRefused) {
			t.Errorf("Check(%q) = %v, want refused", p, err)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", p)) {
			t.Errorf("Check(%q): the error does not name the path: %v", p, err)
		}
	}
	// Read-only, any release may be seen (the current link on a rollback).
	if err := n.CheckReadOnly(n.ReleaseRoot + "/releases/def"); err != nil {
		t.Errorf("CheckReadOnly(other release) = %v", err)
	}
	for _, p := range []string{n.ReleaseRoot + "/releases", n.ReleaseRoot, n.ReleaseRoot + "/staged"} {
		if err := n.CheckReadOnly(p); !errors.Is(err, errRefused) {
			t.Errorf("CheckReadOnly(%q) = %v, want refused", p, err)
		}
	}
}

func TestCheckSandbox(t *testing.T) {
	n := node()
	links := map[string]string{
		"/etc/app":                     "/srv/fossil", // a link planted to the repositories
		"/var/lib/ocx/release/current": n.Release,
	}
	resolve := func(p string) (string, error) {
		if p == "/broken" {
			return "", errors.New("permission denied")
		}
		for from, to := range links {
			if within(p, from) {
				return to + strings.TrimPrefix(p, from), nil
			}
		}
		return p, nil
	}
	ok := messages.Sandbox{ReadOnly: []string{"/usr", "/var/lib/ocx/release/current"}, ReadWrite: []string{n.Workspace}}
	if err := n.CheckSandbox(ok, resolve); err != nil {
		t.Fatalf("CheckSandbox(ok) = %v", err)
	}
	for name, sb := range map[string]messages.Sandbox{
		"link to repositories": {ReadOnly: []string{"/etc/app"}},
		"link into a repo":     {ReadOnly: []string{"/etc/app/demo.fossil"}},
		"agents root":          {ReadWrite: []string{n.Agents}},
		"password as home":     {Homes: []string{n.Agents + "/alice/password"}},
		"unresolvable":         {ReadOnly: []string{"/broken"}},
	} {
		err := n.CheckSandbox(sb, resolve)
		var re *RefusalError
		if !errors.As(err, &re) || !errors.Is(err, errRefused) {
			t.Errorf("%s: %v, want a RefusalError", name, err)
			continue
		}
		stated := slices.Concat(sb.ReadOnly, sb.ReadWrite, sb.Homes)[0]
		if re.Path != stated {
			t.Errorf("%s: the error names %q, want the path as stated %q", name, re.Path, stated)
		}
	}
}

// A path stated inside the workspace whose links, planted by the agent,
// lead out of it is refused, wherever they lead; one whose links stay in
// the workspace is not (issue 22).
func TestCheckSandboxLinkOutOfTheWorkspace(t *testing.T) {
	n := node()
	// The agents root is reached through a link, as /tmp may be: the
	// stated path names the workspace through it.
	stated := "/agents/alice/projects/demo"
	links := map[string]string{
		"/agents":                  "/var/lib/ocx/agents",
		n.Workspace + "/tree/etc":  "/opt",                    // out, to a path no rule names
		n.Workspace + "/tree/deep": n.Workspace + "/clone.d",  // in
		n.Workspace + "/up":        "/var/lib/ocx/agents/bob", // out, into the agents root
	}
	resolve := func(p string) (string, error) {
		for changed := true; changed; {
			changed = false
			for from, to := range links {
				if within(p, from) {
					p, changed = to+strings.TrimPrefix(p, from), true
				}
			}
		}
		return p, nil
	}
	for _, p := range []string{stated + "/tree/etc", n.Workspace + "/tree/etc", stated + "/tree/etc/shadow"} {
		for _, sb := range []messages.Sandbox{{ReadWrite: []string{p}}, {ReadOnly: []string{p}}, {Homes: []string{p}}} {
			err := n.CheckSandbox(sb, resolve)
			var re *RefusalError
			if !errors.As(err, &re) || re.Path != p || !strings.Contains(err.Error(), "a link there leads it out") {
				t.Errorf("%+v: %v, want a refusal naming %q and the link", sb, err, p)
			}
		}
	}
	for _, sb := range []messages.Sandbox{{ReadWrite: []string{"/sys/fs/cgroup"}}, {Homes: []string{"/sys"}}, {ReadWrite: []string{"/sys/fs/cgroup/memory/ocx"}}} {
		if err := n.CheckSandbox(sb, resolve); err == nil || !strings.Contains(err.Error(), "leave its cgroup") {
			t.Errorf("%+v: %v, want /sys refused read-write", sb, err)
		}
	}
	if err := n.CheckSandbox(messages.Sandbox{ReadOnly: []string{"/sys"}}, resolve); err != nil {
		t.Errorf("/sys read-only: %v", err)
	}
	if err := n.CheckSandbox(messages.Sandbox{ReadWrite: []string{stated + "/up"}}, resolve); err == nil {
		t.Error("a link out of the workspace into the agents root is let through")
	}
	for _, p := range []string{stated, stated + "/tree/deep", n.Workspace + "/tree/deep/x", "/usr"} {
		if err := n.CheckSandbox(messages.Sandbox{ReadWrite: []string{p}}, resolve); err != nil {
			t.Errorf("%s: %v, want it let through", p, err)
		}
	}
}

// A refused path's parent is refused too: what holds a node file holds it.
func TestNodeFilesRefusalIsUpwardClosed(t *testing.T) {
	n := node()
	parts := []string{"srv", "fossil", "demo.fossil", "var", "lib", "ocx", "agents", "alice", "projects", "demo",
		"release", "releases", "abc", "def", "password", "tree", "usr", "proc", "tmp", "runs", "etc", "passwords"}
	rapid.Check(t, func(t *rapid.T) {
		comps := rapid.SliceOfN(rapid.SampledFrom(parts), 1, 7).Draw(t, "path")
		p := "/" + strings.Join(comps, "/")
		for _, readOnly := range []checkMode{checkSession, checkSessionReadOnly, checkRun} {
			if n.check(p, readOnly) == nil {
				continue
			}
			for q := filepath.Dir(p); ; q = filepath.Dir(q) {
				if n.check(q, readOnly) == nil {
					t.Fatalf("%q is refused (mode %v) but its ancestor %q is not", p, readOnly, q)
				}
				if q == "/" {
					break
				}
			}
		}
	})
}

func TestParseBwrapStatus(t *testing.T) {
	ran := []byte("{ \"child-pid\": 6575, \"cgroup-namespace\": 4026532181, \"pid-namespace\": 4026532180 }\n{ \"exit-code\": 7 }\n")
	if st := ParseBwrapStatus(ran); st != (BwrapStatus{ChildPID: 6575, PIDNamespace: 4026532180, Exited: true, ExitCode: 7}) {
		t.Fatalf("ran: %+v", st)
	}
	failed := []byte("{ \"child-pid\": 6586, \"mnt-namespace\": 4026532177 }\n")
	if st := ParseBwrapStatus(failed); st != (BwrapStatus{ChildPID: 6586}) {
		t.Fatalf("failed: %+v", st)
	}
	partial := []byte("{ \"child-pid\": 1 }\n{ \"exit-co")
	if st := ParseBwrapStatus(partial); st != (BwrapStatus{ChildPID: 1}) {
		t.Fatalf("partial: %+v", st)
	}
	if st := ParseBwrapStatus([]byte("garbage\n{\"exit-code\": 0}\n")); st != (BwrapStatus{Exited: true}) {
		t.Fatalf("garbage: %+v", st)
	}
}
