package itest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// consoleNode is a node whose fossil server serves the console: the
// server runs with --extroot, and `ocx console install` put the entry
// there. The hook is not installed: the console's own button does it.
func consoleNode(t testing.TB, people ...harness.User) *testNode {
	t.Helper()
	extroot := filepath.Join(t.TempDir(), "ext")
	if err := os.MkdirAll(extroot, 0o755); err != nil {
		t.Fatal(err)
	}
	users := append([]harness.User{{Login: person, Password: personPW, Caps: "cghijnorwz234"}}, people...)
	srv := harness.StartServer(t, harness.Options{Users: users, ExtRoot: extroot})
	n := &testNode{t: t, ctx: context.Background(), srv: srv, agents: filepath.Join(t.TempDir(), "agents"),
		pw: map[string]string{srv.AdminLogin: srv.AdminPassword}}
	for _, u := range users {
		n.pw[u.Login] = u.Password
	}
	t.Cleanup(n.shutdown)
	n.must("", "init", "--project", "demo="+srv.Repo+","+srv.URL, "--release", relRoot, "--extroot", extroot)
	return n
}

// viewer is a browser's side of the console without a browser: a cookie
// jar logged in through Fossil's login page (or none), and no redirects
// followed, so that each answer is seen.
type viewer struct {
	t     testing.TB
	base  string // the repository's URL, with its final slash
	c     *http.Client
	login string
}

func (n *testNode) viewer(login string) *viewer {
	n.t.Helper()
	jar, _ := cookiejar.New(nil)
	v := &viewer{t: n.t, base: n.srv.URL, login: login, c: &http.Client{Jar: jar, Timeout: 3 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if login != "" {
		form(n.t, v.c, v.base+"login", v.base+"login", url.Values{"u": {login}, "p": {n.pw[login]}, "in": {"Login"}})
		if v.cookie() == "" {
			n.t.Fatalf("logging in as %s through /login gave no cookie", login)
		}
	}
	return v
}

// cookie is the viewer's login cookie as the browser sends it.
func (v *viewer) cookie() string {
	u, _ := url.Parse(v.base)
	for _, c := range v.c.Jar.Cookies(u) {
		if strings.HasPrefix(c.Name, "fossil-") {
			return c.Name + "=" + c.Value
		}
	}
	return ""
}

// get fetches a console page and returns its status and body.
func (v *viewer) get(path string) (int, string) {
	v.t.Helper()
	resp, err := v.c.Get(v.base + "ext/console/" + path)
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post presses a console button: the form's fields, sent from referer.
func (v *viewer) post(path, referer string, fields url.Values) (int, string) {
	v.t.Helper()
	req, err := http.NewRequest(http.MethodPost, v.base+"ext/console/"+path, strings.NewReader(fields.Encode()))
	if err != nil {
		v.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if referer != "" {
		req.Header.Set("Referer", referer)
	}
	resp, err := v.c.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var tokenRE = regexp.MustCompile(`name="token" value="([0-9a-f]+)"`)

// token is the token a page's forms carry, "" when it shows none.
func token(page string) string {
	if m := tokenRE.FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return ""
}

// press loads the page a button is on and presses it with the page's token.
func (v *viewer) press(page, action string, fields url.Values) (int, string) {
	v.t.Helper()
	_, body := v.get(page)
	tok := token(body)
	if tok == "" {
		v.t.Fatalf("%s shows %s no button", page, v.login)
	}
	if fields == nil {
		fields = url.Values{}
	}
	fields.Set("token", tok)
	return v.post(action, v.base+"ext/console/"+page, fields)
}

// answerOf reads the tools' answer a button's page shows: its log, its
// result and why it stopped.
func answerOf(body string) (log []string, result, stopped string) {
	for _, m := range regexp.MustCompile(`<li>(.*?)</li>`).FindAllStringSubmatch(between(body, `<ol id="ocx-log">`, `</ol>`), -1) {
		log = append(log, html.UnescapeString(m[1]))
	}
	if m := regexp.MustCompile(`id="ocx-result">result: <code>([^<]*)</code>`).FindStringSubmatch(body); m != nil {
		result = m[1]
	}
	if m := regexp.MustCompile(`id="ocx-stopped">stopped: ([^<]*)</p>`).FindStringSubmatch(body); m != nil {
		stopped = html.UnescapeString(m[1])
	}
	return log, result, stopped
}

func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i+len(from):]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}

// senderOf is who the repository says sent an artifact (its receipt).
func (n *testNode) senderOf(hash string) string {
	n.t.Helper()
	r := n.repo()
	defer r.Close()
	info, err := r.Info(n.ctx, hash)
	if err != nil {
		n.t.Fatal(err)
	}
	return info.Sender
}

// TestConsoleSecurity (issue 12, item 6): a POST needs the token of the
// viewer's own login cookie and a Referer from this repository, from a
// viewer holding admin or setup; each other POST gets 403 and writes
// nothing; a GET never writes; every value shown is escaped; names are
// validated as the ocx commands validate them; no page shows a password.
func TestConsoleSecurity(t *testing.T) {
	needs(t, "ocxd")
	n := consoleNode(t)
	admin, alice, nobody := n.viewer(n.srv.AdminLogin), n.viewer(person), n.viewer("")
	page := n.srv.URL + "ext/console/logins"
	hookNow := func() bool {
		st := n.status()
		return len(st.Hooks) == 1 && st.Hooks[0].Installed
	}
	logins := func() int { return len(n.status().Logins) }

	// Anyone who may read sees the pages, and no button but the admin.
	for _, v := range []*viewer{admin, alice, nobody} {
		for _, p := range []string{"", "hook", "logins", "workspaces", "workspaces/add", "sessions"} {
			code, body := v.get(p)
			if code != 200 {
				t.Fatalf("%q sees %s as %d:\n%s", v.login, p, code, body)
			}
			hasButton := strings.Contains(body, `method="POST"`)
			withButtons := p == "hook" || p == "logins" || p == "workspaces/add" || p == "sessions"
			if hasButton != (v == admin && withButtons) {
				t.Errorf("%q on %q: a button shown %v", v.login, p, hasButton)
			}
		}
	}

	// The console's key is the node's: the test reads it to forge what a
	// page elsewhere cannot, a token for alice and one for another key.
	keyHex, err := os.ReadFile(filepath.Join(n.agents, "console.key"))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := hex.DecodeString(strings.TrimSpace(string(keyHex)))
	tokenFor := func(k []byte, cookie string) string {
		m := hmac.New(sha256.New, k)
		m.Write([]byte("ocx console token\x00" + cookie))
		return hex.EncodeToString(m.Sum(nil))
	}
	_, body := admin.get("logins")
	good := token(body)
	for _, c := range []struct {
		name   string
		v      *viewer
		ref    string
		tok    string
		status int
		words  string
	}{
		{"no token", admin, page, "", 403, "token is not this viewer's"},
		{"alice's token", admin, page, tokenFor(key, alice.cookie()), 403, "token is not this viewer's"},
		{"another key's token", admin, page, tokenFor(make([]byte, 32), admin.cookie()), 403, "token is not this viewer's"},
		{"no Referer", admin, "", good, 403, "not sent from a page of this repository"},
		{"a page on another port", admin, "http://127.0.0.1:1/attack.html", good, 403, "not sent from a page of this repository"},
		{"alice with her own token", alice, page, tokenFor(key, alice.cookie()), 403, "neither admin nor setup"},
		{"not logged in", nobody, page, good, 403, "log in first"},
	} {
		code, body := c.v.post("logins/add", c.ref, url.Values{"token": {c.tok}, "login": {"mallory"}})
		if code != c.status || !strings.Contains(html.UnescapeString(body), c.words) {
			t.Errorf("%s: %d, want %d saying %q:\n%s", c.name, code, c.status, c.words, between(body, "<h2>", "</div>"))
		}
		code, _ = c.v.post("hook/install", c.ref, url.Values{"token": {c.tok}})
		if code != c.status {
			t.Errorf("%s, hook/install: %d, want %d", c.name, code, c.status)
		}
		for _, restart := range []string{"sessions/restart", "sessions/restart/confirm"} {
			if code, _ = c.v.post(restart, c.ref, url.Values{"token": {c.tok}, "release": {"current"}}); code != c.status {
				t.Errorf("%s, %s: %d, want %d", c.name, restart, code, c.status)
			}
		}
	}
	if logins() != 0 || hookNow() {
		t.Fatalf("a refused POST wrote: %d logins, hook installed %v", logins(), hookNow())
	}
	// A GET of a button's address does nothing and says so.
	if code, _ := admin.get("logins/add?login=mallory&token=" + good); code != 404 || logins() != 0 {
		t.Fatalf("a GET of a button: %d, %d logins", code, logins())
	}

	// A name is validated as `ocx login add` validates it.
	code, body := admin.press("logins", "logins/add", url.Values{"login": {"../x"}})
	if _, _, stopped := answerOf(body); code != 422 || !strings.Contains(stopped, `"../x"`) || logins() != 0 {
		t.Fatalf("login ../x: %d, stopped %q, %d logins", code, stopped, logins())
	}
	code, body = admin.press("logins", "logins/add", url.Values{"login": {agent}})
	if log, _, stopped := answerOf(body); code != 200 || stopped != "" || len(log) == 0 || logins() != 1 {
		t.Fatalf("login add: %d %q %q", code, log, stopped)
	}
	// No page shows a password, nor what a password file holds.
	pw, err := fossilio.ReadPasswordFile(filepath.Join(n.agents, agent, "password"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", "hook", "logins", "workspaces", "workspaces/add", "sessions", "state"} {
		if _, body := admin.get(p); strings.Contains(body, pw) || strings.Contains(body, n.srv.AdminPassword) {
			t.Errorf("page %q shows a password", p)
		}
	}

	// Every value shown is escaped: a thread whose title is a script.
	c := n.pusher(person)
	d, _ := fossilio.PostDraft{Date: time.Now().UTC(), User: person, Title: `<script>alert("t")</script>`, Text: "x"}.Bytes()
	if _, err := c.Push(n.ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, body := admin.get("workspaces/add"); strings.Contains(body, `<script>alert("t")`) || !strings.Contains(body, `&lt;script&gt;alert(&#34;t&#34;)`) {
		t.Errorf("the thread's title is not escaped on the form")
	}
}

// TestConsoleWritesAsTheViewer (issue 12, item 5): every note the console
// writes as its viewer is recorded by the repository as the viewer's, read
// back from its receipts: the workspace definition, the session
// definition, the launch note, the launch note of a restart (the list of
// "Restart stopped sessions", then its Confirm) and the terminated note.
// A listen note is the agent login's (D7, D10), as `ocx listener add`
// writes it.
func TestConsoleWritesAsTheViewer(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := consoleNode(t)
	admin := n.viewer(n.srv.AdminLogin)
	if code, body := admin.press("hook", "hook/install", nil); code != 200 {
		t.Fatalf("hook install: %d\n%s", code, body)
	}
	admin.press("logins", "logins/add", url.Values{"login": {agent}})
	code, body := admin.press("workspaces/add", "workspaces/add", url.Values{"login": {agent}, "branch": {"trunk"}, "record": {""}})
	log, defHash, stopped := answerOf(body)
	if code != 200 || stopped != "" {
		t.Fatalf("workspace add: %d %q %q", code, log, stopped)
	}
	if s := n.senderOf(defHash); s != n.srv.AdminLogin {
		t.Fatalf("the workspace definition %s is recorded as sent by %q, not the viewer %q", defHash, s, n.srv.AdminLogin)
	}
	code, body = admin.press("workspace/"+agent+"/start", "workspace/"+agent+"/start", url.Values{"kind": {"mechanical"},
		"command": {echoScript}, "lifetime": {"stays"}, "hears": {person}})
	log, launch, stopped := answerOf(body)
	if code != 200 || stopped != "" {
		t.Fatalf("session start: %d %q %q", code, log, stopped)
	}
	if s := n.senderOf(launch); s != n.srv.AdminLogin {
		t.Fatalf("the launch note is recorded as sent by %q", s)
	}
	var sessionDef string
	for _, l := range log {
		if m := regexp.MustCompile(`posted the session definition as "[^"]+" at ([0-9a-f]{64})`).FindStringSubmatch(l); m != nil {
			sessionDef = m[1]
		}
	}
	if sessionDef == "" || n.senderOf(sessionDef) != n.srv.AdminLogin {
		t.Fatalf("the session definition (%q) is not recorded as the viewer's; log %q", sessionDef, log)
	}
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	// Its listeners: a ticket; the listen note is the agent's.
	id := n.result(person, "ticket", "--title", "a ticket", "--text", "for the session")
	code, body = admin.press("session/"+agent+"/listeners?kind=ticket", "session/"+agent+"/listeners/add", url.Values{"kind": {"ticket"}, "names": {id}})
	if log, _, stopped := answerOf(body); code != 200 || stopped != "" {
		t.Fatalf("listener add: %d %q %q", code, log, stopped)
	}
	if _, page := admin.get("session/" + agent + "/listeners"); !strings.Contains(page, id) {
		t.Fatalf("the listeners page does not show ticket %s", id)
	}
	if got := n.notesSentBy(agent)[messages.KindListen]; got != 1 {
		t.Fatalf("%d listen notes sent by %s, want 1", got, agent)
	}
	// Stop it: a stop line to the daemon, which started it (no note).
	code, body = admin.press("session/"+agent, "session/"+agent+"/stop", nil)
	log, _, stopped = answerOf(body)
	if code != 200 || stopped != "" {
		t.Fatalf("stop: %d %q %q", code, log, stopped)
	}
	n.waitFor("the session to end", func() bool { return len(n.status().Sessions) == 0 })
	n.waitFor("the session page to show its end", func() bool {
		_, page := admin.get("session/" + agent)
		return strings.Contains(page, `id="ocx-ended"`)
	})
	// Restart stopped sessions (D33): the first press lists the stopped
	// session and writes nothing; Confirm restarts exactly it, as the
	// viewer; a second press leaves it alone, saying it runs.
	before := n.notesSentBy(n.srv.AdminLogin)[messages.KindLaunch]
	code, body = admin.press("sessions", "sessions/restart", url.Values{"release": {"current"}})
	row := between(body, `<tr data-ocx-restart="`+key(agent)+`">`, `</tr>`)
	if code != 200 || !strings.Contains(row, "would restart") || !strings.Contains(row, "it ended") {
		t.Fatalf("restart stopped sessions, the list: %d\n%s", code, body)
	}
	if got := n.notesSentBy(n.srv.AdminLogin)[messages.KindLaunch]; got != before {
		t.Fatalf("the restart's list wrote %d launch notes", got-before)
	}
	picks := regexp.MustCompile(`name="pick" value="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(picks) != 1 || picks[0][1] != key(agent)+"@"+launch {
		t.Fatalf("the Confirm button carries %q, want %s@%s", picks, key(agent), launch)
	}
	code, body = admin.post("sessions/restart/confirm", admin.base+"ext/console/sessions/restart",
		url.Values{"token": {token(body)}, "release": {"current"}, "pick": {picks[0][1]}})
	log, _, stopped = answerOf(body)
	row = between(body, `<tr data-ocx-restart="`+key(agent)+`">`, `</tr>`)
	if code != 200 || stopped != "" || !strings.Contains(row, "restarted") {
		t.Fatalf("restart stopped sessions, confirmed: %d %q %q\n%s", code, log, stopped, row)
	}
	n.waitFor("the restarted session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening && st.Sessions[0].Launch != launch
	})
	if s := n.senderOf(n.status().Sessions[0].Launch); s != n.srv.AdminLogin {
		t.Fatalf("the restart's launch note is recorded as sent by %q", s)
	}
	_, body = admin.press("sessions", "sessions/restart", url.Values{"release": {"current"}})
	if row := between(body, `<tr data-ocx-restart="`+key(agent)+`">`, `</tr>`); !strings.Contains(row, "left alone") || !strings.Contains(row, "it runs") || strings.Contains(body, `id="ocx-restart-confirm"`) {
		t.Fatalf("a second press of restart: %s", row)
	}
	admin.press("session/"+agent, "session/"+agent+"/stop", nil)
	n.waitFor("the restarted session to end", func() bool { return len(n.status().Sessions) == 0 })

	// Terminate the workspace: the terminated note is the viewer's.
	code, body = admin.press("workspace/"+agent, "workspace/"+agent+"/terminate", url.Values{"confirm": {"yes"}, "reason": {"done with it"}})
	if log, _, stopped := answerOf(body); code != 200 || stopped != "" {
		t.Fatalf("terminate: %d %q %q", code, log, stopped)
	}
	sent := n.notesSentBy(n.srv.AdminLogin)
	if sent[messages.KindTerminated] != 1 || sent[messages.KindWorkspace] != 1 || sent[messages.KindSession] != 1 || sent[messages.KindLaunch] != 2 {
		t.Fatalf("the notes the viewer sent, by kind: %v", sent)
	}
}

// notesSentBy counts, by kind, the notes the repository received from
// login (its receipts).
func (n *testNode) notesSentBy(login string) map[messages.NoteKind]int {
	n.t.Helper()
	r := n.repo()
	defer r.Close()
	sent, err := r.SentBy(n.ctx, login, "")
	if err != nil {
		n.t.Fatal(err)
	}
	out := map[messages.NoteKind]int{}
	for _, s := range sent {
		if note, err := messages.ReadPost([]byte(s.Text)); err == nil && note != nil {
			out[note.NoteKind()]++
		}
	}
	return out
}

// TestConsoleReads (issue 12, item 3): the status JSON is the document
// `ocx status --json` prints, valid against its schema, served as JSON,
// with an ETag that answers 304 while nothing changed; a thread's status
// names the sessions and listeners bound to it; a page opened starts the
// daemon when none runs.
func TestConsoleReads(t *testing.T) {
	needs(t, "ocxd")
	n := consoleNode(t)
	if n.daemonPID() != 0 {
		t.Fatal("a daemon runs before any page was opened")
	}
	v := n.viewer(person)
	if code, _ := v.get("sessions"); code != 200 {
		t.Fatal(code)
	}
	n.waitFor("the page to have started the daemon", func() bool { return n.daemonPID() != 0 })
	resp, err := v.c.Get(v.base + "ext/console/state")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
		t.Fatalf("state: %d %q", resp.StatusCode, ct)
	}
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.Validate("state.schema.json", data); err != nil {
		t.Fatalf("the console's state is not valid: %v\n%s", err, data)
	}
	if cli := n.must("", "status", "--json").stdout; cli != string(data) {
		t.Fatalf("the console's state differs from ocx status --json:\n%s\n---\n%s", data, cli)
	}
	req, _ := http.NewRequest(http.MethodGet, v.base+"ext/console/state", nil)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	again, err := v.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified {
		t.Fatalf("state with its ETag: %d, want 304", again.StatusCode)
	}

	n.must("", "login", "add", agent)
	record := n.result(n.srv.AdminLogin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	n.result(n.srv.AdminLogin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	code, body := v.get("thread/" + record[:12])
	if code != 200 || !strings.Contains(body, `"thread": "`+record+`"`) || !strings.Contains(body, `"login": "`+agent+`"`) {
		t.Fatalf("the thread's status: %d\n%s", code, body)
	}
	if code, body := v.get("thread/zz"); code != 400 || !strings.Contains(body, "10 hex digits") {
		t.Fatalf("a bad thread name: %d %s", code, body)
	}
}

// TestConsoleGitFetch (seed 002, "serve a git fetch"): a real git clone
// of the repository's mirror through the console, read-only: a push is
// refused.
func TestConsoleGitFetch(t *testing.T) {
	needs(t, "ocxd")
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed (make deps installs it)")
	}
	n := consoleNode(t)
	mirror := filepath.Join(t.TempDir(), "mirror")
	if out, err := n.srv.Fossil("git", "export", mirror, "-R", n.srv.Repo); err != nil {
		t.Fatalf("fossil git export: %v\n%s", err, out)
	}
	dst := filepath.Join(t.TempDir(), "clone")
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "GIT_TERMINAL_PROMPT=0"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := git("clone", n.srv.URL+"ext/console/git", dst); err != nil {
		t.Fatalf("git clone through the console: %v\n%s", err, out)
	}
	if out, err := git("-C", dst, "log", "--oneline"); err != nil || !strings.Contains(out, "initial empty check-in") {
		t.Fatalf("the clone's history: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(dst, "x"), []byte("x"), 0o644)
	git("-C", dst, "add", "x")
	git("-C", dst, "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-m", "x")
	if out, err := git("-C", dst, "push", "origin", "HEAD"); err == nil {
		t.Fatalf("a push through the console succeeded:\n%s", out)
	}
	v := n.viewer("")
	if code, body := v.get("git/info/refs?service=git-receive-pack"); code != 403 || !strings.Contains(body, "fetches only") {
		t.Fatalf("receive-pack: %d %s", code, body)
	}
}

// TestGitFetchNeverInTheDaemon (issue 39 item 7, D81): with the release's
// ocx-console as the console's CGI and the daemon serving its pages, an
// anonymous GET of the git mirror's refs, whatever slashes its path
// holds, is served by ocx console, never rendered in the daemon (which
// would run git's CGI there); the fetch still works.
func TestGitFetchNeverInTheDaemon(t *testing.T) {
	needs(t, "ocxd", host.ConsoleProgram)
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed (make deps installs it)")
	}
	n := consoleNode(t)
	mirror := filepath.Join(t.TempDir(), "mirror")
	if out, err := n.srv.Fossil("git", "export", mirror, "-R", n.srv.Repo); err != nil {
		t.Fatalf("fossil git export: %v\n%s", err, out)
	}
	startDaemon(t, n, program("ocxd"))
	n.waitLogLine("the daemon to serve its socket", func(l logLine) bool { return l.Msg == "serving the daemon's socket" })
	anonymous := &http.Client{Timeout: time.Minute}
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := anonymous.Get(n.srv.URL + "ext/console/" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Ocx-Served-By"), string(b)
	}
	// A page is the daemon's (the test shows something only if so).
	if code, by, body := get("state"); code != 200 || by != "daemon" {
		t.Fatalf("the state page: %d, served by %q: %s", code, by, body)
	}
	for _, path := range []string{"git/info/refs", "/git/info/refs", "//git/info/refs"} {
		code, by, body := get(path + "?service=git-upload-pack")
		if by != "console" {
			t.Errorf("GET %s: served by %q (%d), want ocx console: the daemon runs no git\n%.300s", path, by, code, body)
		}
		if code != 200 || !strings.Contains(body, "service=git-upload-pack") {
			t.Errorf("GET %s: %d %.300s; want git's refs", path, code, body)
		}
	}
}

// TestConsoleTemplates: the forms' defaults come from wiki pages
// workspace/NAME and session/NAME, each holding one fenced JSON block; a
// template that does not decode is shown as an error on the form, and the
// node's default stays.
func TestConsoleTemplates(t *testing.T) {
	needs(t, "ocxd")
	n := consoleNode(t)
	page := func(name, text string) {
		f := filepath.Join(t.TempDir(), "page")
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := n.srv.Fossil("wiki", "create", name, f, "--mimetype", "text/x-markdown", "-R", n.srv.Repo); err != nil {
			t.Fatalf("fossil wiki create %s: %v\n%s", name, err, out)
		}
	}
	page("workspace/small", "A small sandbox.\n\n```json\n"+`{"network": false, "read_only": ["/usr", "/bin"], "read_write": [], "homes": [], "path": ["/usr/bin", "/bin"]}`+"\n```\n")
	page("workspace/broken", "```json\n"+`{"network": false, "memory_max": "4G"}`+"\n```\n")
	page("session/ci", "```json\n"+`{"ocx": "session", "kind": "mechanical", "command": ["/bin/sh", "-c", "make test"], "lifetime": "completes"}`+"\n```\n")
	admin := n.viewer(n.srv.AdminLogin)
	n.must("", "login", "add", agent)

	_, body := admin.get("workspaces/add")
	if !strings.Contains(body, `<option value="small">small</option>`) || !strings.Contains(body, `<option value="broken">broken</option>`) {
		t.Fatalf("the form offers no template:\n%s", between(body, "<h2>", "</form>"))
	}
	// Without a template the form proposes the node's default, which has
	// no network (D49).
	proposed := html.UnescapeString(between(body, `id="ocx-ws-sandbox" rows="14" cols="80">`, "</textarea>"))
	if sb, err := messages.DecodeSandbox([]byte(strings.ReplaceAll(proposed, "WORKSPACE", "/w"))); err != nil || sb.Network {
		t.Fatalf("the form's proposed sandbox: %+v %v\n%s", sb, err, proposed)
	}
	_, body = admin.get("workspaces/add?template=small")
	sandbox := html.UnescapeString(between(body, `id="ocx-ws-sandbox" rows="14" cols="80">`, "</textarea>"))
	sb, err := messages.DecodeSandbox([]byte(sandbox))
	if err != nil || sb.Network || len(sb.ReadOnly) != 2 {
		t.Fatalf("the small template's sandbox on the form: %+v %v\n%s", sb, err, sandbox)
	}
	_, body = admin.get("workspaces/add?template=broken")
	if msg := html.UnescapeString(between(body, `id="ocx-template-error">`, "</p>")); !strings.Contains(msg, "memory_max") || !strings.Contains(msg, "broken") {
		t.Fatalf("a template that does not decode: %q", msg)
	}
	if _, body = admin.get("workspaces/add?template=../x"); !strings.Contains(body, "a template&#39;s name is") {
		t.Fatalf("a bad template name is not refused on the form")
	}
	// A workspace made from the small template: the workspace's own
	// directory added read-write, the rest as the template says.
	code, body := admin.press("workspaces/add?template=small", "workspaces/add", url.Values{"login": {agent}, "branch": {"trunk"}, "record": {""}, "sandbox": {sandbox}})
	if log, _, stopped := answerOf(body); code != 200 || stopped != "" {
		t.Fatalf("workspace add from a template: %d %q %q", code, log, stopped)
	}
	defs := n.status().Workspaces
	if len(defs) != 1 {
		t.Fatalf("workspaces %+v", defs)
	}
	_, body = admin.get("workspace/" + agent)
	def := html.UnescapeString(between(body, `<pre id="ocx-ws-definition">`, "</pre>"))
	wd, err := messages.DecodeNoteAs[*messages.WorkspaceDefinition]([]byte(def))
	if err != nil || wd.Sandbox.Network || len(wd.Sandbox.ReadWrite) != 1 || wd.Sandbox.ReadWrite[0] != n.workspaceDir(agent) {
		t.Fatalf("the workspace's definition: %+v %v\n%s", wd, err, def)
	}
	_, body = admin.get("workspace/" + agent + "/start?template=ci")
	if !strings.Contains(body, ">make test</textarea>") || !strings.Contains(body, `value="completes" id="ocx-completes" checked`) {
		t.Fatalf("the ci template on the start form:\n%s", between(body, "<h2>", "</form>"))
	}
}

// TestConsoleTemplatesAreTheAdmins (issue 39 item 7, D81): a template is
// the version of its wiki page an admin or setup user sent last, in the
// server's order. alice, who may check in, pushes a version of the
// admin's template dated 2099 (naming the admin inside) and a page of her
// own: the admin's form still proposes the admin's sandbox, and offers
// no page of alice's.
func TestConsoleTemplatesAreTheAdmins(t *testing.T) {
	needs(t, "ocxd")
	n := consoleNode(t)
	admin := n.srv.AdminLogin
	f := filepath.Join(t.TempDir(), "page")
	if err := os.WriteFile(f, []byte("```json\n"+`{"network": false, "read_only": ["/usr", "/bin"], "read_write": [], "homes": [], "path": ["/usr/bin", "/bin"]}`+"\n```\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := n.srv.Fossil("wiki", "create", "workspace/small", f, "--mimetype", "text/x-markdown", "-R", n.srv.Repo); err != nil {
		t.Fatalf("fossil wiki create: %v\n%s", err, out)
	}
	r := n.repo()
	admins, err := r.WikiPage(n.ctx, "workspace/small")
	r.Close()
	if err != nil || admins.Sender != admin {
		t.Fatalf("the admin's template: %+v %v", admins, err)
	}
	evil := "```json\n" + `{"network": true, "read_only": ["/"], "read_write": ["/"], "homes": [], "path": ["/usr/bin", "/bin"]}` + "\n```\n"
	for _, d := range []fossilio.WikiDraft{
		{Date: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), User: admin, Name: "workspace/small", Prev: admins.Hash, Mimetype: "text/x-markdown", Text: evil},
		{Date: time.Now(), User: admin, Name: "workspace/alices", Mimetype: "text/x-markdown", Text: evil},
	} {
		data, err := d.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.pusher(person).Push(n.ctx, data); err != nil {
			t.Fatal(err)
		}
	}
	v := n.viewer(admin)
	_, body := v.get("workspaces/add")
	if strings.Contains(body, `<option value="alices">`) || !strings.Contains(body, `<option value="small">small</option>`) {
		t.Errorf("the form's templates: want small alone\n%s", between(body, "<h2>", "</form>"))
	}
	_, body = v.get("workspaces/add?template=small")
	sandbox := html.UnescapeString(between(body, `id="ocx-ws-sandbox" rows="14" cols="80">`, "</textarea>"))
	if sb, err := messages.DecodeSandbox([]byte(sandbox)); err != nil || sb.Network || len(sb.ReadOnly) != 2 || len(sb.ReadWrite) != 0 {
		t.Errorf("the small template on the admin's form: %+v %v, want the admin's\n%s", sb, err, sandbox)
	}
	_, body = v.get("workspaces/add?template=alices")
	if msg := html.UnescapeString(between(body, `id="ocx-template-error">`, "</p>")); !strings.Contains(msg, "admin or setup") {
		t.Errorf("alice's page as a template: %q, want refused saying no admin or setup user wrote it", msg)
	}
}

// The check-ins the console's release tests stamp their two builds with.
var (
	consoleCiA = strings.Repeat("1a", 20)
	consoleCiB = strings.Repeat("2b", 20)
)

// stampedPrograms builds ocx, ocxd and workspace from this tree into a new
// directory, stamped with checkin as `make build` stamps them, for `ocx
// release init --from` and `ocx release stage --from`.
func stampedPrograms(t testing.TB, checkin string) string {
	t.Helper()
	dir := t.TempDir()
	const v = "github.com/ocx-go/ocx/host/version"
	ldflags := "-X " + v + ".Version=v0.0.0-20260101000000-" + checkin[:12] + " -X " + v + ".Checkin=" + checkin
	for _, p := range []string{"ocx", "ocxd", "workspace"} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(dir, p), "github.com/ocx-go/ocx/cmd/"+p)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s stamped %s: %v\n%s", p, checkin, err, out)
		}
	}
	return dir
}

// releaseConsoleNode is a console node on a release root of its own: made
// by `ocx release init --from` a build stamped consoleCiA, with a build
// stamped consoleCiB staged by `ocx release stage --from`. The console
// itself runs from the root's current ocx.
func releaseConsoleNode(t testing.TB) (*testNode, string) {
	t.Helper()
	a, b := stampedPrograms(t, consoleCiA), stampedPrograms(t, consoleCiB)
	root := filepath.Join(t.TempDir(), "release")
	cmd := exec.Command(program("ocx"), "release", "init", root, "--from", a)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ocx release init: %v\n%s", err, out)
	}
	n := consoleNodeOn(t, root)
	n.must("", "release", "stage", "--from", b)
	return n, root
}

// releaseLinks reads current and previous of a release root.
func releaseLinks(t testing.TB, root string) (current, previous string) {
	t.Helper()
	current, _ = os.Readlink(filepath.Join(root, "current"))
	previous, _ = os.Readlink(filepath.Join(root, "previous"))
	return current, previous
}

// TestConsoleReleases (issue 13, item 4's console button): the Releases
// page shows current, previous and staged with their version lines, the
// daemon and its last re-exec, and the sessions on an older release with
// the way to restart them; a reader sees no button and a reader's POST,
// or one without the token, is refused and changes no link. Accept is two
// presses: the dry run lists the checks and the link changes and changes
// nothing, Confirm accepts the check-in it carries and the real daemon
// re-execs in place (same PID, the new release's ocxd); the answer shows
// the log and the re-exec. Roll back the same; a Confirm a list no longer
// matches is refused.
func TestConsoleReleases(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n, root := releaseConsoleNode(t)
	admin, alice := n.viewer(n.srv.AdminLogin), n.viewer(person)
	relA, relB := "releases/"+consoleCiA, "releases/"+consoleCiB

	code, body := admin.get("releases")
	if code != 200 {
		t.Fatalf("releases: %d\n%s", code, body)
	}
	pid := n.daemonPID()
	if pid == 0 || exeOf(pid) != filepath.Join(root, relA, "ocxd") {
		t.Fatalf("the page started no daemon on current (pid %d, %s)", pid, exeOf(pid))
	}
	// A session on the current release, flagged older once B is accepted.
	n.must("", "login", "add", agent)
	n.result(n.srv.AdminLogin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	n.result(n.srv.AdminLogin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})

	_, body = admin.get("releases")
	text := html.UnescapeString(body)
	for _, want := range []string{
		`<tr data-ocx-release="current"><th>current</th><td><code>` + consoleCiA + `</code></td><td><code>ocx version v0.0.0-20260101000000-` + consoleCiA[:12] + ` checkin ` + consoleCiA,
		`<tr data-ocx-release="staged" data-ocx-checkin="` + consoleCiB + `"><th>staged (next)</th><td><code>` + consoleCiB,
		`<tr data-ocx-release="previous"><th>previous</th><td colspan="3">none</td>`,
		"It runs, pid <b>" + strconv.Itoa(pid) + "</b>, release <code>" + consoleCiA + "</code>",
		"It has not re-exec'd.", `id="ocx-older-none"`, `name="checkin" value="` + consoleCiB + `"`,
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("the releases page lacks %q:\n%s", want, between(body, "<h2>", "</div>"))
		}
	}
	if strings.Contains(body, `id="ocx-rollback"`) {
		t.Fatal("a Roll back button shows with no previous release")
	}

	// A reader sees it all and no button; a reader's POST, and one without
	// the token, are refused and change nothing.
	if code, page := alice.get("releases"); code != 200 || strings.Contains(page, `method="POST"`) || !strings.Contains(page, consoleCiB) {
		t.Fatalf("the reader's releases page: %d, a button %v", code, strings.Contains(page, `method="POST"`))
	}
	ref := n.srv.URL + "ext/console/releases"
	_, page := admin.get("releases")
	for _, c := range []struct {
		name  string
		v     *viewer
		tok   string
		words string
	}{
		{"a reader with a token", alice, token(page), "token is not this viewer's"},
		{"the admin without the token", admin, "", "token is not this viewer's"},
	} {
		for _, action := range []string{"releases/accept", "releases/accept/confirm", "releases/rollback/confirm"} {
			code, body := c.v.post(action, ref, url.Values{"token": {c.tok}, "checkin": {consoleCiB}})
			if code != 403 || !strings.Contains(html.UnescapeString(body), c.words) {
				t.Errorf("%s, %s: %d, want 403 saying %q", c.name, action, code, c.words)
			}
		}
	}
	keyHex, _ := os.ReadFile(filepath.Join(n.agents, "console.key"))
	consoleKey, _ := hex.DecodeString(strings.TrimSpace(string(keyHex)))
	m := hmac.New(sha256.New, consoleKey)
	m.Write([]byte("ocx console token\x00" + alice.cookie()))
	if code, body := alice.post("releases/accept/confirm", ref, url.Values{"token": {hex.EncodeToString(m.Sum(nil))}, "checkin": {consoleCiB}}); code != 403 || !strings.Contains(body, "neither admin nor setup") {
		t.Errorf("a reader with her own token: %d", code)
	}
	if cur, prev := releaseLinks(t, root); cur != relA || prev != "" {
		t.Fatalf("a refused POST changed the links: current %s, previous %s", cur, prev)
	}

	// Accept: the dry run lists the checks and the links, changing none.
	code, body = admin.press("releases", "releases/accept", url.Values{"checkin": {consoleCiB}})
	log, _, stopped := answerOf(body)
	if code != 200 || stopped != "" || !strings.Contains(strings.Join(log, "\n"), "check version: ocxd version") ||
		!strings.Contains(strings.Join(log, "\n"), "check sandbox:") || !strings.Contains(strings.Join(log, "\n"), "would link "+filepath.Join(root, "current")+" -> "+relB) {
		t.Fatalf("accept's dry run: %d %q %q", code, log, stopped)
	}
	confirm := regexp.MustCompile(`action="[^"]*/releases/accept/confirm"`).MatchString(body)
	carried := regexp.MustCompile(`id="ocx-release-confirm">.*\n<input type="hidden" name="checkin" value="([0-9a-f]+)">`).FindStringSubmatch(body)
	if !confirm || carried == nil || carried[1] != consoleCiB {
		t.Fatalf("the dry run's Confirm carries %q:\n%s", carried, between(body, "<h2>", "</div>"))
	}
	if cur, prev := releaseLinks(t, root); cur != relA || prev != "" {
		t.Fatalf("the dry run changed the links: current %s, previous %s", cur, prev)
	}
	code, body = admin.post("releases/accept/confirm", n.srv.URL+"ext/console/releases/accept", url.Values{"token": {token(body)}, "checkin": {carried[1]}})
	log, result, stopped := answerOf(body)
	if code != 200 || stopped != "" || result != consoleCiB || !strings.Contains(strings.Join(log, "\n"), "the daemon (pid "+strconv.Itoa(pid)+") re-exec'd") {
		t.Fatalf("accept confirmed: %d %q %q %q", code, log, result, stopped)
	}
	if !strings.Contains(body, `id="ocx-reexec" data-ocx-reexec="ok"`) || !strings.Contains(between(body, `id="ocx-reexec"`, "</p>"), consoleCiB) {
		t.Fatalf("the answer does not show the re-exec:\n%s", between(body, "<h2>", "</div>"))
	}
	if cur, prev := releaseLinks(t, root); cur != relB || prev != relA {
		t.Fatalf("after accept: current %s, previous %s", cur, prev)
	}
	if n.daemonPID() != pid || exeOf(pid) != filepath.Join(root, relB, "ocxd") {
		t.Fatalf("after accept the daemon is pid %d running %s, want pid %d running B", n.daemonPID(), exeOf(pid), pid)
	}
	// ocx status shows the daemon in one line, and its JSON the same.
	if out := n.must("", "status").stdout; !regexp.MustCompile(`(?m)^daemon    daemon pid=` + strconv.Itoa(pid) + ` release=` + consoleCiB + ` reexec_at=\S+ reexec=ok reexec_release=` + consoleCiB + `$`).MatchString(out) {
		t.Fatalf("ocx status shows no daemon line:\n%s", out)
	}
	if d := n.status().Daemon; d == nil || d.PID != pid || d.Release != consoleCiB || d.Reexec == nil || !d.Reexec.OK {
		t.Fatalf("ocx status --json's daemon: %+v", d)
	}
	_, body = admin.get("releases")
	text = html.UnescapeString(body)
	for _, want := range []string{
		`<tr data-ocx-release="current"><th>current</th><td><code>` + consoleCiB,
		`<tr data-ocx-release="previous"><th>previous</th><td><code>` + consoleCiA,
		`id="ocx-rollback"`, `data-ocx-reexec="ok"`, "ok, it runs release <code>" + consoleCiB,
		`id="ocx-older-note"`, `<tr data-ocx-session="` + key(agent) + `">`, `/ext/console/sessions#ocx-restart" id="ocx-older-restart"`,
		"nothing is staged",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("after accept the releases page lacks %q:\n%s", want, between(body, "<h2>", "</div>"))
		}
	}

	// Roll back: the same two presses.
	code, body = admin.press("releases", "releases/rollback", nil)
	log, _, stopped = answerOf(body)
	carried = regexp.MustCompile(`id="ocx-release-confirm">.*\n<input type="hidden" name="checkin" value="([0-9a-f]+)">`).FindStringSubmatch(body)
	if code != 200 || stopped != "" || carried == nil || carried[1] != consoleCiA || !strings.Contains(strings.Join(log, "\n"), "would link") {
		t.Fatalf("rollback's dry run: %d %q %q, Confirm carries %q", code, log, stopped, carried)
	}
	if cur, _ := releaseLinks(t, root); cur != relB {
		t.Fatalf("rollback's dry run moved current to %s", cur)
	}
	tok := token(body)
	code, body = admin.post("releases/rollback/confirm", n.srv.URL+"ext/console/releases/rollback", url.Values{"token": {tok}, "checkin": {carried[1]}})
	log, result, stopped = answerOf(body)
	if code != 200 || stopped != "" || result != consoleCiA || !strings.Contains(body, `data-ocx-reexec="ok"`) {
		t.Fatalf("rollback confirmed: %d %q %q %q", code, log, result, stopped)
	}
	if cur, prev := releaseLinks(t, root); cur != relA || prev != relB {
		t.Fatalf("after rollback: current %s, previous %s", cur, prev)
	}
	if n.daemonPID() != pid || exeOf(pid) != filepath.Join(root, relA, "ocxd") {
		t.Fatalf("after rollback the daemon is pid %d running %s", n.daemonPID(), exeOf(pid))
	}
	// The same Confirm pressed again: previous is B now, not A: refused.
	code, body = admin.post("releases/rollback/confirm", n.srv.URL+"ext/console/releases/rollback", url.Values{"token": {tok}, "checkin": {consoleCiA}})
	if _, _, stopped = answerOf(body); code != 422 || !strings.Contains(stopped, "previous is "+consoleCiB+" now") {
		t.Fatalf("a stale rollback Confirm: %d %q", code, stopped)
	}
	if cur, prev := releaseLinks(t, root); cur != relA || prev != relB {
		t.Fatalf("a refused Confirm moved the links: current %s, previous %s", cur, prev)
	}
	if _, body = admin.get("releases"); !strings.Contains(body, `id="ocx-older-none"`) {
		t.Fatal("after rollback the session on current is still listed as older")
	}
}
