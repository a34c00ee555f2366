package harness_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/itest/harness"
)

func TestServerServesAndEnds(t *testing.T) {
	var pid int
	var dir string
	t.Run("server", func(t *testing.T) {
		start := time.Now()
		srv := harness.StartServer(t, harness.Options{
			Users:    []harness.User{{Login: "alice", Password: "alice-pw", Caps: "gio"}},
			Settings: map[string]string{"backoffice-nodelay": "1"},
		})
		t.Logf("started in %v", time.Since(start))
		pid, dir = srv.PID, srv.Dir
		if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") || len(srv.ProjectCode) != 40 {
			t.Fatalf("server %+v", srv)
		}
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(srv.URL + "timeline")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "initial empty check-in") {
			t.Fatalf("GET /timeline: %s", resp.Status)
		}
		out, err := srv.Fossil("user", "capabilities", "alice", "-R", srv.Repo)
		if err != nil || strings.TrimSpace(out) != "gio" {
			t.Fatalf("alice's caps: %q %v", out, err)
		}
		out, _ = srv.Fossil("settings", "backoffice-nodelay", "-R", srv.Repo)
		if !strings.Contains(out, "1") {
			t.Fatalf("setting not applied: %q", out)
		}
		// A private FOSSIL_HOME: the global config is in the server's directory.
		if _, err := os.Stat(filepath.Join(srv.Home, ".fossil")); err != nil {
			t.Fatalf("no private global config: %v", err)
		}
		if err := srv.Backoffice(); err != nil {
			t.Fatal(err)
		}
		if !harness.Alive(pid) {
			t.Fatal("server not running")
		}
	})
	if harness.Alive(pid) {
		t.Fatalf("server %d still alive after its test", pid)
	}
	if out, _ := exec.Command("pgrep", "-f", dir).Output(); len(out) > 0 {
		t.Fatalf("processes naming %s remain: %s", dir, out)
	}
}

func TestTrackFailsOnASurvivor(t *testing.T) {
	var pid int
	ft := &fakeT{TB: t}
	func() {
		defer ft.runCleanups()
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait()
		pid = cmd.Process.Pid
		harness.Track(ft, pid)
	}()
	if !ft.failed {
		t.Fatal("Track did not fail the test for a process left alive")
	}
	deadline := time.Now().Add(5 * time.Second)
	for harness.Alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("Track did not kill the process")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTrackPassesWhenEnded(t *testing.T) {
	ft := &fakeT{TB: t}
	func() {
		defer ft.runCleanups()
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		harness.Track(ft, cmd.Process.Pid)
		cmd.Wait()
	}()
	if ft.failed {
		t.Fatal("Track failed a test whose process had ended")
	}
}

// fakeT records cleanups and failures, so a test can check what Track does
// to a test that leaves a process behind.
type fakeT struct {
	testing.TB
	cleanups []func()
	failed   bool
}

func (f *fakeT) Cleanup(fn func())                 { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Errorf(format string, args ...any) { f.failed = true }
func (f *fakeT) Helper()                           {}
func (f *fakeT) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// TestServerDiesWithTheTestBinary: a test binary that dies without running its
// cleanups (as a test timeout makes it) takes its servers with it.
func TestServerDiesWithTheTestBinary(t *testing.T) {
	if os.Getenv("HARNESS_HELPER") == "1" {
		srv := harness.StartServer(t, harness.Options{})
		os.Stdout.WriteString(strconv.Itoa(srv.PID) + "\n")
		time.Sleep(time.Minute) // until the parent kills this process
		return
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTheTestBinary$", "-test.v=false")
	// The helper dies without its cleanups: its temporary directories go
	// into this test's own, which is removed.
	helper.Env = append(os.Environ(), "HARNESS_HELPER=1", "TMPDIR="+t.TempDir())
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("the helper printed no server PID: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the helper printed %q", line)
	}
	harness.Track(t, pid) // a survivor is killed by PID and fails the test
	helper.Process.Kill()
	helper.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for harness.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the server %d outlived its test binary", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
