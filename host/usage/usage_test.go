package usage_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/host/usage"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

const launch = "93b653f3e69fdc88a716e5e3428a4947e7af5d21926850ad9673c8469d94913d"

func setup(t *testing.T) (*unixhost.Root, host.Workspace) {
	t.Helper()
	l, err := host.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := l.Workspace(messages.WorkspaceKey{Login: "native-7", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{ws.Session, ws.MCPDir} {
		if err := os.MkdirAll(d, 0o700); err != nil { // trust:outside the test's own directory
			t.Fatal(err)
		}
	}
	root, err := unixhost.OpenRoot(l.Root())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, ws
}

// TestReadSumsBothFiles: the node's count and the session's turns, of the
// same launch, summed; another launch's file is none; a turns file the
// agent made a link is refused by name, and the node's count stands.
func TestReadSumsBothFiles(t *testing.T) {
	root, ws := setup(t)
	if u, _, err := usage.Read(root, ws, launch); u != nil || err != nil {
		t.Fatalf("nothing yet: %+v %v", u, err)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	c := messages.ModelCount{Requests: 2, Tokens: modelapi.Tokens{Input: 900, Output: 142}}
	if err := usage.WriteModel(root, ws, &messages.ModelUsage{Launch: launch, Count: c, Limit: 1000,
		Reached: messages.TokensReached(c, 1000), Updated: at}); err != nil {
		t.Fatal(err)
	}
	tr, err := usage.StartTurns(root, ws, launch)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Add(usage.Turn(launch, at, 1500*time.Millisecond, 200*time.Millisecond, &messages.RunnerReport{Tokens: modelapi.Tokens{Input: 10, Output: 1}})); err != nil {
		t.Fatal(err)
	}
	u, reached, err := usage.Read(root, ws, launch)
	if err != nil || u == nil || u.Model == nil || *u.Model != c || u.Limit != 1000 || u.Turns != 1 || u.WallMS != 1500 || u.CPUMS != 200 ||
		u.Runner == nil || u.Runner.Input != 10 || !strings.Contains(reached, "1042 tokens") {
		t.Fatalf("%+v %q %v", u, reached, err)
	}
	if u, _, err := usage.Read(root, ws, strings.Repeat("a", 40)); u != nil || err != nil {
		t.Errorf("another launch's: %+v %v", u, err)
	}
	// The agent replaces its turns file by a link to the node's count.
	if err := os.Remove(ws.TurnsFile()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws.ModelUsage(), ws.TurnsFile()); err != nil {
		t.Fatal(err)
	}
	u, _, err = usage.Read(root, ws, launch)
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || u == nil || u.Model == nil || u.Turns != 0 {
		t.Errorf("a link for the turns: %+v %v", u, err)
	}
}

// TestRunnerReportTakenOnce: a turn's report is read and removed; none
// is none.
func TestRunnerReportTakenOnce(t *testing.T) {
	root, ws := setup(t)
	b, _ := (&messages.RunnerReport{Tokens: modelapi.Tokens{Input: 5, Output: 6}, Cost: "0.01"}).Encode()
	if err := os.WriteFile(ws.RunnerUsage(), b, 0o600); err != nil { // trust:outside the test's own directory
		t.Fatal(err)
	}
	r, err := usage.TakeRunnerReport(root, ws)
	if err != nil || r == nil || r.Input != 5 || r.Cost != "0.01" {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := usage.TakeRunnerReport(root, ws); r != nil || err != nil {
		t.Errorf("taken twice: %+v %v", r, err)
	}
	if err := os.WriteFile(ws.RunnerUsage(), []byte(`{"ocx": "runner-usage", "input": "lots"}`), 0o600); err != nil { // trust:outside the test's own directory
		t.Fatal(err)
	}
	if r, err := usage.TakeRunnerReport(root, ws); r != nil || err == nil {
		t.Errorf("a report that does not read: %+v %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(ws.RunnerUsage())); !os.IsNotExist(err) {
		t.Errorf("a report that does not read is left: %v", err)
	}
}
