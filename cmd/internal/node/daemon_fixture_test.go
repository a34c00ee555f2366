package node_test

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

	"github.com/ocx-go/ocx/cmd/internal/daemonclient"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// built is the release the daemon's tests run: ocx, ocxd and workspace
// built once from this tree, on the first test that needs them, and
// removed after the tests (TestMain).
var built struct {
	once sync.Once
	dir  string
	err  error
}

// releaseDir builds the release once and returns its directory.
func releaseDir(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "ocx-node-release-"); built.err != nil {
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

// newFixDaemon is newFix whose tools run the release built from this tree,
// so that an action that hands the daemon a line starts the real ocxd, and
// it the real sessions in bwrap. At the end, every session still running
// is stopped through the daemon and the daemon is ended with TERM, by PID.
func newFixDaemon(t *testing.T) *fix {
	t.Helper()
	f := newFixIn(t, releaseDir(t))
	t.Cleanup(f.endDaemon)
	return f
}

// endDaemon stops the sessions the test left running, then the daemon.
func (f *fix) endDaemon() {
	for _, k := range f.serving() {
		workspaces.Of(f.n).SessionStop(f.ctx, k, false)
	}
	f.waitFor("no session to run", 20*time.Second, func() bool { return len(f.serving()) == 0 })
	pid, _ := daemonclient.PID(f.n.Layout)
	if pid == 0 {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if p, _ := daemonclient.PID(f.n.Layout); p != pid {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.t.Errorf("the daemon (pid %d) did not end on TERM", pid)
	syscall.Kill(pid, syscall.SIGKILL)
}

// serving lists the workspaces a `workspace serve` of this agents root
// names, from /proc.
func (f *fix) serving() []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(f.agents)) {
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

// waitFor polls cond until it holds, failing the test after bound.
func (f *fix) waitFor(what string, bound time.Duration, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(f.agents, "ocxd.log"))
			f.t.Fatalf("waited %s for %s\nocxd.log:\n%s", bound, what, lastLines(log, 40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}

// client writes on the record as login over sync: the admin, alice, or a
// login whose password the agents root keeps (the node user).
func (f *fix) client(login string) *fossilio.Client {
	f.t.Helper()
	pw := map[string]string{f.srv.AdminLogin: f.srv.AdminPassword, person: personPW}[login]
	if pw == "" {
		var err error
		if pw, err = fossilio.ReadPasswordFile(filepath.Join(f.agents, login, "password")); err != nil {
			f.t.Fatal(err)
		}
	}
	return &fossilio.Client{URL: f.srv.URL, Login: login, Password: pw, ProjectCode: f.srv.ProjectCode}
}

// reply posts text in the thread root as login, replying to its root.
func (f *fix) reply(login, root, text string) string {
	f.t.Helper()
	h, err := f.client(login).Reply(f.ctx, root, root, text)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

func (f *fix) block(n messages.Note) string {
	f.t.Helper()
	b, err := n.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// binding reads a workspace's binding.json.
func (f *fix) binding(login string) *messages.Binding {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(f.agents, login, "projects", "demo", "binding.json"))
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := messages.DecodeBinding(data)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}
