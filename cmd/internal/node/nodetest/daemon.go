package nodetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"go.uber.org/goleak"
)

// built is the release the daemon's tests run: ocx, ocxd and workspace
// built once from this tree, on the first test that needs them, and
// removed after the tests (TestMain).
var built struct {
	once sync.Once
	dir  string
	err  error
}

// ReleaseDir builds the release once and returns its directory.
func ReleaseDir(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "ocx-actions-release-"); built.err != nil {
			return
		}
		for _, name := range []string{"ocx", "ocxd", "workspace"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(built.dir, name), "github.com/ocx-go/ocx/cmd/"+name)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				built.err = fmt.Errorf("build %s: %v\n%s", name, err, out)
				return
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

// NewDaemon is New whose tools run the release built from this tree,
// so that an action that hands the daemon a line starts the real ocxd, and
// it the real sessions in bwrap. At the end, every session still running
// is stopped through the daemon and the daemon is ended with TERM, by PID.
func NewDaemon(t *testing.T) *Fix {
	t.Helper()
	f := newIn(t, ReleaseDir(t))
	t.Cleanup(f.endDaemon)
	return f
}

// endDaemon stops the sessions the test left running, then the daemon.
func (f *Fix) endDaemon() {
	for _, k := range f.Serving() {
		workspaces.Of(f.N).SessionStop(f.Ctx, k, false)
	}
	f.WaitFor("no session to run", 20*time.Second, func() bool { return len(f.Serving()) == 0 })
	pid, _ := daemonclient.PID(f.N.Layout)
	if pid == 0 {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if p, _ := daemonclient.PID(f.N.Layout); p != pid {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.T.Errorf("the daemon (pid %d) did not end on TERM", pid)
	syscall.Kill(pid, syscall.SIGKILL)
}

// Serving lists the workspaces a `workspace serve` of this agents root
// names, from /proc.
func (f *Fix) Serving() []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(f.Agents)) {
			continue
		}
		if st, err := unixhost.ReadStat(pid); err != nil || st.Zombie() {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if len(args) > 2 && filepath.Base(args[0]) == "workspace" && args[1] == "serve" && args[2] != "" {
			out = append(out, args[2])
		}
	}
	return out
}

// WaitFor polls cond until it holds, failing the test after bound.
func (f *Fix) WaitFor(what string, bound time.Duration, cond func() bool) {
	f.T.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(f.Agents, "ocxd.log"))
			f.T.Fatalf("waited %s for %s\nocxd.log:\n%s", bound, what, lastLines(log, 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastLines is the last n lines of b.
func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}

// Client writes on the record as login over sync: the admin, alice, or a
// login whose password the agents root keeps (the node user).
func (f *Fix) Client(login string) *fossilio.Client {
	f.T.Helper()
	pw := map[string]string{f.Srv.AdminLogin: f.Srv.AdminPassword, Person: PersonPW}[login]
	if pw == "" {
		var err error
		if pw, err = fossilio.ReadPasswordFile(filepath.Join(f.Agents, login, "password")); err != nil {
			f.T.Fatal(err)
		}
	}
	return &fossilio.Client{URL: f.Srv.URL, Login: login, Password: pw, ProjectCode: f.Srv.ProjectCode}
}

// Binding reads a workspace's binding.json.
func (f *Fix) Binding(login string) *messages.Binding {
	f.T.Helper()
	data, err := os.ReadFile(filepath.Join(f.Agents, login, "projects", "demo", "binding.json"))
	if err != nil {
		f.T.Fatal(err)
	}
	b, err := messages.DecodeBinding(data)
	if err != nil {
		f.T.Fatal(err)
	}
	return b
}

// Main runs a package's tests (TestMain): the actions run fossil commands
// and HTTP writes, which start goroutines, none of which may outlive the
// tests; the release ReleaseDir built is removed after them.
func Main(m *testing.M, pkg string) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, pkg+": goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}
