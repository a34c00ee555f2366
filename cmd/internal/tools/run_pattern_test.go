package tools_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// page pushes a version of a wiki page as login, dated at, and returns
// its hash.
func (f *fix) page(login, pw string, at time.Time, name, prev, text string) string {
	f.T.Helper()
	b, err := fossilio.WikiDraft{Date: at, User: login, Name: name, Prev: prev, Text: text}.Bytes()
	if err != nil {
		f.T.Fatal(err)
	}
	c := &fossilio.Client{URL: f.Srv.URL, Login: login, Password: pw, ProjectCode: f.Srv.ProjectCode}
	h, err := c.PushAll(f.Ctx, b)
	if err != nil {
		f.T.Fatal(err)
	}
	return h[0]
}

const echoLayers = `{"process": {"user": "builder", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`

func fenced(s string) string { return "The pattern.\n\n```json\n" + s + "\n```\n" }

// TestRunPostFromAPattern (D84): `ocx run post --pattern echo` takes the
// pattern from the wiki page run/echo as an admin last sent it (alice's
// later version, dated 2099, counts for nothing, nor does her own page),
// lists the patterns with the problem of one that makes no run, refuses
// before writing anything a caller without admin or setup, a pattern
// nobody privileged wrote and a run section 11 refuses, shows the run in
// full in a dry run, and posts it in full as the caller: the record's run
// is the one written in full, whatever the page holds later.
func TestRunPostFromAPattern(t *testing.T) {
	f := newFix(t)
	admin, adminPW := f.Srv.AdminLogin, f.Srv.AdminPassword
	day := func(d int) time.Time { return time.Date(2026, 1, d, 0, 0, 0, 0, time.UTC) }
	v1 := f.page(admin, adminPW, day(1), "run/echo", "", fenced(echoLayers))
	f.page(person, personPW, time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), "run/echo", v1, fenced(`{"process": {"user": "builder", "command": ["sh", "-c", "rm -rf ~"]}}`))
	f.page(person, personPW, day(2), "run/hers", "", fenced(echoLayers))
	f.page(admin, adminPW, day(3), "run/broken", "", fenced(`{"node": "lab-1", "process": {}}`))
	f.page(admin, adminPW, day(3), "run/a b", "", fenced(echoLayers))

	ps, err := tools.Of(f.N).RunPatterns(f.Ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].Name != "a b" || !strings.Contains(ps[0].Problem, "not a pattern's name") ||
		ps[1].Name != "broken" || !strings.Contains(ps[1].Problem, "a pattern names no node") ||
		ps[2].Name != "echo" || ps[2].Version != v1 || ps[2].Sender != admin || strings.Join(ps[2].Layers, ",") != "process" || ps[2].Problem != "" {
		t.Fatalf("the patterns: %+v", ps)
	}

	before := f.Posts()
	in := tools.RunInput{Pattern: "echo", Objective: "Say hello.", DryRun: true}
	a := f.OK(tools.Of(f.N).RunPost(f.Ctx, in))
	log := strings.Join(a.Log, "\n")
	for _, want := range []string{"run/echo", v1, `"command": [`, `"echo",`, `"hello"`, `"node": "` + f.N.Config.User + `"`, `"objective": "Say hello."`} {
		if !strings.Contains(log, want) {
			t.Errorf("the dry run's log does not show %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "rm -rf") {
		t.Errorf("the dry run took alice's version:\n%s", log)
	}
	if f.Posts() != before || a.Result != nil {
		t.Fatalf("a dry run wrote: %d posts (were %d), result %v", f.Posts(), before, a.Result)
	}

	// Refused before anything is written.
	alice := tools.Of(f.Open(person, personPW))
	f.Refused(alice.RunPost(f.Ctx, tools.RunInput{Pattern: "echo", Objective: "Say hello."}), "admin (a) or setup (s)", "row 1")
	f.Refused(tools.Of(f.N).RunPost(f.Ctx, tools.RunInput{Pattern: "hers", Objective: "x"}), `no pattern "hers"`, "admin or setup")
	f.Refused(tools.Of(f.N).RunPost(f.Ctx, tools.RunInput{Pattern: "broken", Objective: "x"}), "pattern run/broken", "node")
	f.Refused(tools.Of(f.N).RunPost(f.Ctx, tools.RunInput{Pattern: "../x", Objective: "x"}), "not a pattern's name")
	f.Refused(tools.Of(f.N).RunPost(f.Ctx, tools.RunInput{Pattern: "echo"}), "objective: is missing")
	f.Refused(tools.Of(f.N).RunPost(f.Ctx, tools.RunInput{Pattern: "echo", Objective: "x", Message: []byte(`{"process": {"user": "` + admin + `"}}`)}),
		"row 4", "process.user", "holds admin or setup", "nothing written")
	if f.Posts() != before {
		t.Fatalf("a refusal wrote: %d posts, were %d", f.Posts(), before)
	}

	a = f.OK(tools.Of(f.N).RunPost(f.Ctx, tools.RunInput{Pattern: "echo", Message: []byte(`{"objective": "Say hello.", "process": {"env": {"LANG": "C"}}}`)}))
	if a.Result == nil || f.Posts() != before+1 {
		t.Fatalf("no run posted: %+v", a)
	}
	// A later version of the page changes nothing on the record.
	f.page(admin, adminPW, day(4), "run/echo", v1, fenced(`{"process": {"user": "builder", "command": ["echo", "bye"]}}`))
	p := f.Post(*a.Result)
	if p.Sender != admin || !strings.Contains(p.Text, "`run/echo`") || !strings.Contains(p.Text, v1) {
		t.Errorf("the run's post, sent by %q, does not name its pattern's version:\n%s", p.Sender, p.Text)
	}
	m, err := runmsg.ReadMessage([]byte(p.Text))
	if err != nil {
		t.Fatal(err)
	}
	want := &runmsg.Run{Node: f.N.Config.User, Objective: "Say hello.", Process: runmsg.RunProcess{User: "builder", Command: []string{"echo", "hello"},
		Env: map[string]string{"PATH": "/usr/bin:/bin", "LANG": "C"}, Keep: &runmsg.RunKeep{StdoutWhen: "always"}}}
	wb, err := want.Encode()
	if err != nil {
		t.Fatal(err)
	}
	gb, err := m.Encode()
	if err != nil || !bytes.Equal(gb, wb) {
		t.Errorf("the run on the record:\n%s\nwant, in full:\n%s", gb, wb)
	}
}
