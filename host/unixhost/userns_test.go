package unixhost

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// inotifyScript takes inotify instances, then watches on files of its own
// /tmp, until the kernel refuses one or it has taken 20 and 200 (never the
// node's all: the host's limits are the node uid's and every sandbox's
// together, which other processes of this machine count against too),
// and says how many it took; then it tries to raise its own user
// namespace's limit through a /proc of its own mounting.
const inotifyScript = `
import ctypes, errno, os
libc = ctypes.CDLL("libc.so.6", use_errno=True)
fds = []
why = "none"
while len(fds) < 20:
    fd = libc.inotify_init1(0)
    if fd < 0:
        why = errno.errorcode[ctypes.get_errno()]
        break
    fds.append(fd)
print("instances", len(fds), why)
for fd in fds[1:]:
    os.close(fd)
os.makedirs("/tmp/w", exist_ok=True)
n, why = 0, "none"
while n < 200:
    p = "/tmp/w/%d" % n
    open(p, "w").close()
    if libc.inotify_add_watch(fds[0], p.encode(), 2) < 0:
        why = errno.errorcode[ctypes.get_errno()]
        break
    n += 1
print("watches", n, why)
for line in open("/proc/self/status"):
    if line.startswith("CapEff:"):
        print("sys_resource", (int(line.split()[1], 16) >> 24) & 1)
try:
    os.makedirs("/tmp/p", exist_ok=True)
    if libc.mount(b"proc", b"/tmp/p", b"proc", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mount")
    with open("/tmp/p/sys/user/max_inotify_instances", "w") as f:
        f.write("1000\n")
    print("raised")
except OSError as e:
    print("not raised", errno.errorcode.get(e.errno, e.errno))
`

// TestSandboxUserNSHeldToItsCounts: a session's sandbox and a run's each
// run in a user namespace of their own, held by the launcher, before
// their first instruction, to the inotify instances and watches it was
// given (here 4 and 32): past them the kernel refuses the sandbox
// (EMFILE, ENOSPC), whatever the node's uid has left; the sandbox has no
// CAP_SYS_RESOURCE and cannot raise them. Before D82 they took all 20
// and 200 the script asks.
func TestSandboxUserNSHeldToItsCounts(t *testing.T) {
	dir := t.TempDir()
	l, err := NewLauncher(LauncherOptions{UserNS: &host.UserNSLimits{InotifyInstances: 4, InotifyWatches: 32}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if why := l.UserNSWhy(); why != "" {
		t.Skip(why)
	}
	check := func(what, out string) {
		t.Helper()
		t.Logf("%s:\n%s", what, out)
		for _, want := range []string{"instances 4 EMFILE", "watches 32 ENOSPC", "sys_resource 0", "not raised"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: want %q:\n%s", what, want, out)
			}
		}
	}
	ro := []string{"/usr", "/bin", "/lib", "/lib64"}
	log := filepath.Join(dir, "log")
	x := newExits()
	id, err := l.Spawn(host.SpawnSpec{Path: "/usr/bin/python3", Args: []string{"python3", "-c", inotifyScript}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir, Log: log,
		Sandbox: &host.SandboxSpec{Sandbox: messages.Sandbox{ReadOnly: ro}, Workspace: dir}}, x.on)
	if err != nil {
		t.Fatal(err)
	}
	if e := x.wait(t, id); e.Status().String() != "exited 0" {
		t.Errorf("the session: %s", e)
	}
	check("a session", readFile(t, log))

	sb := systemSandbox()
	r := run(t, l, host.RunSpec{Command: []string{"/usr/bin/python3", "-c", inotifyScript}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Sandbox: &sb})
	check("a run", r.stdout+r.stderr)
}
