package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHostIsolated: a host of the test's own sees none of the directories
// it hides and none of the test's network, but what the test forwards, and
// the test reaches the host only through what it exposes; at the end
// nothing of the host is left running.
func TestHostIsolated(t *testing.T) {
	srv := StartServer(t, Options{})
	h := NewHost(t, srv.Dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(name string, args ...string) (string, error) {
		out, err := h.Command(ctx, name, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("ls", "-A", srv.Dir); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("the hidden directory on the host: %q %v; want it empty", out, err)
	}
	if _, err := os.Stat(srv.Repo); err != nil {
		t.Fatalf("the test itself no longer sees the repository: %v", err)
	}
	home := t.TempDir()
	clone := func(port int) error {
		cmd := h.Command(ctx, "fossil", "clone", "--once", "--no-open", fmt.Sprintf("http://127.0.0.1:%d/", port), filepath.Join(home, fmt.Sprintf("probe-%d.fossil", time.Now().UnixNano())))
		cmd.Env = FossilEnv(home, "probe")
		out, err := cmd.CombinedOutput()
		if err == nil && !strings.Contains(string(out), "project-id") {
			err = fmt.Errorf("no clone: %s", out)
		}
		return err
	}
	if err := clone(srv.Port); err == nil {
		t.Error("the host reached the test's server before it was forwarded")
	}
	h.Reach(srv.Port)
	if err := clone(srv.Port); err != nil {
		t.Errorf("the host did not reach the test's server through the forwarder: %v", err)
	}
	// A server on the host, over a copy of the repository the host sees,
	// exposed to the test.
	b, err := os.ReadFile(srv.Repo)
	if err != nil {
		t.Fatal(err)
	}
	seen := filepath.Join(t.TempDir(), "seen.fossil")
	if err := os.WriteFile(seen, b, 0o600); err != nil {
		t.Fatal(err)
	}
	hostSrv := h.Command(nil, "fossil", "server", "--port", "18292", "--localhost", seen)
	hostSrv.Env = FossilEnv(home, "probe")
	if err := hostSrv.Start(); err != nil {
		t.Fatal(err)
	}
	outer := h.Expose(18292)
	var resp *http.Response
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/", outer))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the test did not reach the host's server through Expose: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the host's server answered %s", resp.Status)
	}
	if pids := h.PIDs(); len(pids) == 0 {
		t.Error("the host runs nothing, though its server runs")
	}
	h.KillAll()
	if pids := h.PIDs(); len(pids) != 0 {
		t.Errorf("after KillAll the host runs %v", pids)
	}
	hostSrv.Wait()
}
