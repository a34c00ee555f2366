package consolepage

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/wire"

	"go.uber.org/goleak"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const evil = `<script>alert("x")</script>`

// TestPagesRender: every page renders with its data filled in, for an
// admin and for a reader, and whatever the data holds is escaped: the
// pages read by GET (console's test has the forms').
func TestPagesRender(t *testing.T) {
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	mark := uint64(7)
	sess := &messages.SessionStatus{Login: "agent-1", Project: "demo", Record: strings.Repeat("a", 64), PID: 42, StartTime: 9,
		StartedBy: messages.OriginDaemon, State: messages.SessionIdle, Listening: true, Release: evil, Older: true, Hears: []string{"admin"}}
	code := 0
	end := &record.SessionEnd{End: &messages.EndNote{Status: messages.EndExited, ExitCode: &code, Seen: time.Unix(1_700_000_000, 0)},
		Report: &messages.ReportNote{Outcome: messages.ReportDone, Summary: evil}}
	chart := tallyUsage([]*messages.EndNote{{Login: evil, Project: "demo", Seen: time.Now(), Usage: &messages.SessionUsage{Runner: &messages.RunnerReport{Cost: messages.CostUSD(evil)}}}},
		[]messages.SessionStatus{*sess}, "demo", time.Now())
	data := map[string]any{
		"index":  indexData{Usage: &chart},
		"hook":   hookData{Hooks: []messages.HookStatus{{Project: "demo", Repository: evil, Installed: true, Newest: 9, Mark: &mark}}},
		"logins": struct{ Logins []loginRow }{[]loginRow{{Login: "agent-1", Here: true, Caps: evil}}},
		"workspaces": struct{ Workspaces []messages.WorkspaceStatus }{[]messages.WorkspaceStatus{{Login: "agent-1", Project: "demo",
			Record: strings.Repeat("b", 64), State: messages.WorkspaceIdle}}},
		"workspace": workspaceData{Key: k, State: messages.WorkspaceActive, Record: strings.Repeat("b", 64), Definition: evil, Session: sess, End: endText(end), Log: evil},
		"sessions": sessionsData{Sessions: []messages.SessionStatus{*sess}, Ended: []endedRow{{Key: messages.WorkspaceKey{Login: "agent-2", Project: "demo"},
			Record: strings.Repeat("f", 64), Completed: reportText(end.Report), End: endText(end)}}, Usage: &chart},
		"session": sessionData{Key: k, Session: sess, Completed: reportText(end.Report), End: endText(end), ListenerCount: 2, Log: evil,
			Response: &messages.ResponseStatus{Record: strings.Repeat("b", 64), Hash: strings.Repeat("f", 64), Outcome: messages.ResponseStopped, Note: evil},
			Usage:    &messages.SessionUsage{Model: &messages.ModelCount{Requests: 1}, Turns: 1, Runner: &messages.RunnerReport{Cost: messages.CostUSD(evil)}}},
		"listeners": listenersData{Key: k, Kind: "ticket", Listeners: []messages.Listener{{Login: "agent-1", Project: "demo", Kind: messages.ListenTicket, Names: evil}},
			Recent: []option{{Value: evil, Label: evil}}},
	}
	for name, d := range data {
		for _, admin := range []bool{true, false} {
			v := View{Title: evil, Script: "/ext/console", Nonce: "abc123", Project: "demo", Viewer: evil, Admin: admin, Data: d}
			if admin {
				v.Token = "tok"
			}
			var b bytes.Buffer
			if err := Pages().ExecuteTemplate(&b, name, v); err != nil {
				t.Fatalf("%s (admin %v): %v", name, admin, err)
			}
			out := b.String()
			if strings.Contains(out, evil) {
				t.Errorf("%s: the data is not escaped:\n%s", name, out)
			}
			if !strings.HasPrefix(out, "<div class='fossil-doc'") {
				t.Errorf("%s: does not open with Fossil's fossil-doc div, so Fossil would not wrap it in its skin", name)
			}
			if !strings.Contains(out, `<script nonce="abc123">`) {
				t.Errorf("%s: the page's script carries no nonce", name)
			}
			if forms := strings.Count(out, `method="POST"`); forms != strings.Count(out, `name="token" value="tok"`) {
				t.Errorf("%s (admin %v): %d POST forms, %d tokens", name, admin, forms, strings.Count(out, `name="token"`))
			}
			if !admin && strings.Contains(out, `method="POST"`) {
				t.Errorf("%s: a reader is shown a button", name)
			}
		}
	}
}

// TestSessionPageShowsUsage: the session page shows a running session's
// use of the node (D50), the node's count of its model apart from what its
// runner reported of itself, and an ended one's as its end note says it.
func TestSessionPageShowsUsage(t *testing.T) {
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	u := &messages.SessionUsage{Model: &messages.ModelCount{Requests: 2, Tokens: modelapi.Tokens{Input: 250, Output: 30, Cached: 100}, Refused: 1},
		Limit: 1000, Turns: 3, WallMS: 5400, CPUMS: 800, Runner: &messages.RunnerReport{Tokens: modelapi.Tokens{Input: 2, Output: 2}, Cost: "0.0123"}}
	for _, ended := range []bool{false, true} {
		var b bytes.Buffer
		d := sessionData{Key: k, Usage: u, Ended: ended}
		if err := Pages().ExecuteTemplate(&b, "session", View{Script: "/ext/console", Data: d}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range []string{`id="ocx-tokens-in">250<`, `id="ocx-tokens-out">30<`, "(100 cached)", "in 2 requests", `id="ocx-tokens-limit">1000<`,
			"1 refused past the limit", `id="ocx-turns">3<`, "5.4 s wall, 0.8 s CPU", "what its runner reported (its own word)", "2 tokens in, 2 out, $0.0123"} {
			if !strings.Contains(out, want) {
				t.Errorf("ended %v: the page lacks %q:\n%s", ended, want, out)
			}
		}
		if caption := "What its last run used"; ended != strings.Contains(out, caption) {
			t.Errorf("ended %v: caption %q shown: %v", ended, caption, !ended)
		}
	}
	var b bytes.Buffer
	if err := Pages().ExecuteTemplate(&b, "session", View{Script: "/ext/console", Data: sessionData{Key: k}}); err != nil || strings.Contains(b.String(), "ocx-usage") {
		t.Errorf("a session with no usage shows a usage table: %v", err)
	}
}

// TestCGIWriter: the reply is a CGI reply Fossil reads: a Status line, the
// headers (a header's CR or LF cannot start another), a blank line, the
// body; a reply without a Content-Type is plain text, never sniffed.
func TestCGIWriter(t *testing.T) {
	w := NewCGIWriter()
	w.Header().Set("X-Name", "a\r\nSet-Cookie: x=1")
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte("<html>"))
	var b bytes.Buffer
	if code := w.Flush(&b); code != 0 {
		t.Fatal(code)
	}
	want := "Status: 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nX-Name: a  Set-Cookie: x=1\r\nContent-Length: 6\r\n\r\n<html>"
	if b.String() != want {
		t.Fatalf("reply:\n%q\nwant\n%q", b.String(), want)
	}
}

// TestFossilFromEnv: the request's Fossil side, from Fossil's variables
// alone; a request without FOSSIL_REPOSITORY did not come from Fossil.
func TestFossilFromEnv(t *testing.T) {
	env := map[string]string{"FOSSIL_USER": "admin", "FOSSIL_CAPABILITIES": "as", "FOSSIL_NONCE": "n1", "FOSSIL_REPOSITORY": "demo.fossil",
		"REQUEST_SCHEME": "https", "HTTP_HOST": "example.org", "FOSSIL_URI": "/cgi/demo", "SCRIPT_NAME": "/cgi/demo/ext/console", "PATH_INFO": "/hook"}
	f, err := fossilFromEnv(func(k string) string { return env[k] })
	if err != nil || f.Base != "https://example.org/cgi/demo" || f.Script != "/ext/console" || f.Path != "/hook" || !f.Admin() || f.Nonce != "n1" {
		t.Fatalf("%+v %v", f, err)
	}
	delete(env, "FOSSIL_REPOSITORY")
	if _, err := fossilFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "extroot") {
		t.Fatalf("without Fossil: %v", err)
	}
	for caps, want := range map[string][2]bool{"cghjnorz": {true, false}, "as": {true, true}, "s": {true, true}, "gh": {false, false}} {
		g := Fossil{Viewer: "v", Caps: caps}
		if g.MayRead() != want[0] || g.Admin() != want[1] {
			t.Errorf("caps %q: read %v admin %v, want %v", caps, g.MayRead(), g.Admin(), want)
		}
	}
}

// TestLoadKey: the key is made once, 0600, and two consoles starting at
// once read the same one; a key file another user could read is refused.
func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	keys := make([][]byte, 8)
	errs := make([]error, 8)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], errs[i] = LoadKey(dir)
		}()
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || !bytes.Equal(keys[i], keys[0]) || len(keys[i]) != 32 {
			t.Fatalf("load %d: %x %v, want the one key", i, keys[i], errs[i])
		}
	}
	st, err := os.Stat(filepath.Join(dir, keyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v %v", st, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".console.key.*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	os.Chmod(filepath.Join(dir, keyFile), 0o644)
	if _, err := LoadKey(dir); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Fatalf("a readable key: %v", err)
	}
}

// TestLoginCookie: the viewer's cookie is the one named for this project,
// among any others the browser sends; a malformed one is none.
func TestLoginCookie(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Cookie", "fossil-ffffffffffffffff=A%2Fffffffffffffffff%2Fbob; theme=dark; fossil-0123456789abcdef=H%2F0123456789abcdef%2Fadmin")
	if got := loginCookie(r, "0123456789abcdef"); got != "fossil-0123456789abcdef=H%2F0123456789abcdef%2Fadmin" {
		t.Fatalf("got %q", got)
	}
	r.Header.Set("Cookie", "fossil-0123456789abcdef=garbage")
	if got := loginCookie(r, "0123456789abcdef"); got != "" {
		t.Fatalf("a malformed cookie: %q", got)
	}
}

// TestSessionPageShowsTheResponse (D51): a session's page shows the
// response of its last run's v1 record: its outcome, its note and a link to
// its post and to the record.
func TestSessionPageShowsTheResponse(t *testing.T) {
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	rec, hash := strings.Repeat("b", 64), strings.Repeat("f", 64)
	d := sessionData{Key: k, End: "signaled SIGTERM", Response: &messages.ResponseStatus{Record: rec, Hash: hash,
		Outcome: messages.ResponseStopped, Note: "signaled SIGTERM; its agent's last report: done"}}
	var b bytes.Buffer
	if err := Pages().ExecuteTemplate(&b, "session", View{Script: "/ext/console", Project: "demo", Data: d}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{`id="ocx-response"`, `<b data-ocx-field="outcome" id="ocx-response-outcome">stopped</b>`,
		"signaled SIGTERM; its agent&#39;s last report: done", "/forumpost/" + hash, "/forumpost/" + rec, "by agent-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the session page lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	d.Response = nil
	if err := Pages().ExecuteTemplate(&b, "session", View{Script: "/ext/console", Project: "demo", Data: d}); err != nil || strings.Contains(b.String(), "ocx-response") {
		t.Errorf("a page without a response shows one: %v", err)
	}
}

// TestSessionsPageFlagsAndEnds (issue 27 items 6 and 10): the Sessions page
// flags a session on a release older than current, and only that one, and
// says "completed: REPORT" of a workspace whose last session ended on its
// report, "ended: ..." of one that ended otherwise.
func TestSessionsPageFlagsAndEnds(t *testing.T) {
	older := messages.SessionStatus{Login: "agent-1", Project: "demo", Record: strings.Repeat("a", 64), PID: 42,
		StartedBy: messages.OriginDaemon, State: messages.SessionIdle, Listening: true, Release: "aaaa", Older: true}
	current := older
	current.Login, current.Release, current.Older = "agent-2", "bbbb", false
	code := 0
	seen := time.Unix(1_700_000_000, 0)
	done := &record.SessionEnd{End: &messages.EndNote{Status: messages.EndExited, ExitCode: &code, Seen: seen},
		Report: &messages.ReportNote{Outcome: messages.ReportDone, Summary: "all green"}}
	stopped := &record.SessionEnd{End: &messages.EndNote{Status: messages.EndExited, ExitCode: &code, Seen: seen}}
	d := sessionsData{Sessions: []messages.SessionStatus{older, current}, Ended: []endedRow{
		{Key: messages.WorkspaceKey{Login: "agent-3", Project: "demo"}, Completed: reportText(done.Report), End: endText(done)},
		{Key: messages.WorkspaceKey{Login: "agent-4", Project: "demo"}, End: endText(stopped)}}}
	var b bytes.Buffer
	if err := Pages().ExecuteTemplate(&b, "sessions", View{Script: "/ext/console", Nonce: "n", Project: "demo", Data: d}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	row := func(attr string) string {
		i := strings.Index(out, attr)
		if i < 0 {
			t.Fatalf("no row %s:\n%s", attr, out)
		}
		j := strings.Index(out[i:], "</tr>")
		return out[i : i+j]
	}
	if r := row(`data-ocx-session="agent-1/demo"`); !strings.Contains(r, `class="ocx-flag"`) || !strings.Contains(r, "older than the current release") {
		t.Errorf("the session on an older release is not flagged: %s", r)
	}
	if r := row(`data-ocx-session="agent-2/demo"`); strings.Contains(r, "ocx-flag") {
		t.Errorf("the session on the current release is flagged: %s", r)
	}
	if r := row(`data-ocx-ended="agent-3/demo"`); !strings.Contains(r, `<td data-ocx-field="end">completed: done: all green</td>`) {
		t.Errorf("the completed session's row: %s", r)
	}
	if r := row(`data-ocx-ended="agent-4/demo"`); !strings.Contains(r, "ended: exited 0 at 2023-11-14") || strings.Contains(r, "completed") {
		t.Errorf("the stopped session's row: %s", r)
	}
}

// failingReads read nothing: each read fails.
type failingReads struct{}

var errUnread = errors.New("unread")

func (failingReads) Status(context.Context) (*messages.NodeState, string, error) {
	return nil, "", errUnread
}
func (failingReads) StateDoc(context.Context) ([]byte, error) { return nil, errUnread }
func (failingReads) Repo(string) (*fossilio.Repo, error)      { return nil, errUnread }
func (failingReads) Index(*fossilio.Repo) *record.Index       { return nil }
func (failingReads) Metrics(context.Context) ([]byte, error)  { return nil, errUnread }
func (failingReads) ProjectCode(context.Context, string) (string, error) {
	return "", errUnread
}

// TestServeOwnsTheGETPages: the pages read by GET are this package's,
// answered whatever their reads say; a form, the releases, the tools,
// the patterns and the git mirror are not, and nothing is written for
// them (the daemon refuses them, for ocx console to serve).
func TestServeOwnsTheGETPages(t *testing.T) {
	layout, err := host.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for path, own := range map[string]bool{
		"": true, "state": true, "metrics": true, "thread/0123456789ab": true, "hook": true, "logins": true, "workspaces": true,
		"workspace/agent-1": true, "sessions": true, "session/agent-1": true, "session/agent-1/listeners": true,
		"receipt": true, "receipt/" + strings.Repeat("a", 40): true,
		"workspaces/add": false, "workspace/agent-1/start": false, "releases": false, "tools": false, "tool/post": false,
		"patterns": false, "pattern/echo": false, "git/info/refs": false, "nothing": false,
	} {
		w := httptest.NewRecorder()
		p := &Page{W: w, R: httptest.NewRequest(http.MethodGet, "/"+path, nil), F: Fossil{Viewer: "admin", Caps: "as", Path: "/" + path},
			Ctx: context.Background(), Layout: layout, Config: &messages.NodeConfig{}, Reads: failingReads{}, Project: "demo",
			Refusals: unixhost.NewRefusalLog(slog.New(slog.DiscardHandler))}
		if got := p.Serve(wire.ConsolePath(p.F.Path)); got != own {
			t.Errorf("%q: served %v, want %v", path, got, own)
		}
		if !own && (w.Body.Len() > 0 || len(w.Header()) > 0) {
			t.Errorf("%q: not this package's, yet answered: %d %s", path, w.Code, w.Body)
		}
		if own && w.Body.Len() == 0 {
			t.Errorf("%q: served with no reply", path)
		}
	}
}
