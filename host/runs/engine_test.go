package runs

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/runmsg"
	"github.com/ocx-go/ocx/messages/strictjson"
)

func TestTailKeepsTheEnd(t *testing.T) {
	tl := &Tail{Max: 4}
	for _, s := range []string{"ab", "cde", "f", "0123456789"} {
		tl.Write([]byte(s))
	}
	end, total := tl.Bytes()
	if string(end) != "6789" || total != 16 {
		t.Errorf("end %q of %d, want 6789 of 16", end, total)
	}
}

// TestKept: STDERR whenever it printed, STDOUT when kept always or on
// failure (table 8's keep, section 8.2).
func TestKept(t *testing.T) {
	e := KeptStream{Name: "stderr", End: []byte("x"), Total: 1}
	o := KeptStream{Name: "stdout", End: []byte("y"), Total: 1}
	none := KeptStream{Name: "stdout"}
	k := Keep{Stderr: 10, Stdout: 10}
	for _, c := range []struct {
		keep Keep
		exit int
		out  KeptStream
		want string
	}{
		{k, 0, o, "stderr"},
		{k, 1, o, "stderr stdout"},
		{Keep{Stderr: 10, Stdout: 10, StdoutAlways: true}, 0, o, "stderr stdout"},
		{k, 1, none, "stderr"},
	} {
		var names []string
		for _, s := range Kept(c.keep, c.exit, e, c.out) {
			names = append(names, s.Name)
		}
		if got := strings.Join(names, " "); got != c.want {
			t.Errorf("keep %+v exit %d: %q, want %q", c.keep, c.exit, got, c.want)
		}
	}
}

func TestKeptLogsTextHoldsNoMessage(t *testing.T) {
	text := KeptLogsText(strings.Repeat("a", 64), 1, "0", []KeptStream{{Name: "stdout", End: []byte("```json\n{\"ocx\": 1}\n```\n"), Total: 30}})
	if !strings.Contains(text, "````stdout\n") || !strings.Contains(text, "Its exit: 0.") {
		t.Errorf("not fenced past its content, or no exit:\n%s", text)
	}
	if _, err := runmsg.ReadMessage([]byte(text)); !errors.Is(err, strictjson.ErrNotANote) {
		t.Errorf("the kept logs read as a message: %v\n%s", err, text)
	}
}

// TestStepLogText: a command step's output is posted as a kept log is, a
// plain post that reads as no message, fenced past its content, with its
// command and its end; a cut end says how much was printed.
func TestStepLogText(t *testing.T) {
	s := StepLog{Step: 4, Run: []string{"sh", "-c", "make deps"}, End: []byte("```json\n{\"ocx\": 1}\n```\nexit"), Total: 1000, Exit: "exit 3"}
	text := StepLogText(strings.Repeat("a", 64), s)
	for _, want := range []string{"workspace[4], a command step", `Its command: "sh" "-c" "make deps"`, "````output\n", "The last 27 of 1000 bytes", "exit\n````\n", "Its end: exit 3."} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	if _, err := runmsg.ReadMessage([]byte(text)); !errors.Is(err, strictjson.ErrNotANote) {
		t.Errorf("the step's output reads as a message: %v\n%s", err, text)
	}
}

// TestPrepareSeedEcho maps section 14's first run onto the host's terms
// as the engine calls its Preparer: echo hello in /, exactly its env, its
// values set, nothing made on the host.
func TestPrepareSeedEcho(t *testing.T) {
	m, err := runmsg.ReadMessage([]byte("```json\n" + `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "Say hello.",
"process": {"user": "builder", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"},
"keep": {"stdout_when": "always"}}}` + "\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("c", 64)
	root, rel := t.TempDir(), t.TempDir()
	var p Preparer = &Layers{}
	got, err := p.Prepare(context.Background(), m.(*runmsg.Run), hash, NodeValues{Root: root, Project: "demo", Node: "lab-1", Server: "http://s/", Release: rel})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Spec.Command, " ") != "echo hello" || got.Spec.Dir != "/" || strings.Join(got.Spec.Env, " ") != "PATH=/usr/bin:/bin" || got.Spec.Sandbox != nil {
		t.Errorf("spec %+v", got.Spec)
	}
	if got.Values["run"] != hash || got.Values["user"] != "builder" || !got.Keep.StdoutAlways || got.Keep.Stdout != 64<<10 || got.Workspace != "" {
		t.Errorf("values %v keep %+v workspace %q", got.Values, got.Keep, got.Workspace)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("a run without a workspace made %d entries in the root", len(entries))
	}
}
