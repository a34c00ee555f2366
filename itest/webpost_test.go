package itest

import (
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
)

// webPerson is a person logged in on Fossil's web pages, posting through
// the forum's own form as a browser would (its Referer, the login cookie),
// and not following the redirect a form answers with.
type webPerson struct {
	t    testing.TB
	base string
	c    *http.Client
}

func (n *testNode) webLogin(login string) *webPerson {
	n.t.Helper()
	jar, _ := cookiejar.New(nil)
	p := &webPerson{t: n.t, base: n.srv.URL, c: &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	form(n.t, p.c, p.base+"login", p.base+"login", url.Values{"u": {login}, "p": {n.pw[login]}, "in": {"Login"}})
	return p
}

// reply posts a reply to a thread's root through /forume2. Fossil refuses
// a post at once with "database is locked" when another writer committed
// while its request read (in WAL mode SQLite then calls no busy handler):
// the person submits again, as from a browser; reply says how often.
func (p *webPerson) reply(root, text string) (refused int) {
	p.t.Helper()
	for {
		err := postForm(p.c, p.base+"forume2", p.base+"forumedit", url.Values{"fpid": {root}, "reply": {"1"},
			"mimetype": {"text/x-markdown"}, "content": {text}, "submit": {"Submit"}})
		if err == nil {
			return refused
		}
		if !strings.Contains(err.Error(), "database is locked") || refused == 20 {
			p.t.Fatal(err)
		}
		refused++
		time.Sleep(10 * time.Millisecond)
	}
}

// sentBy finds, in a thread, the post sender wrote whose text holds text.
func sentBy(tb testing.TB, r *fossilio.Repo, root, sender, text string) string {
	posts, err := r.Thread(tb.Context(), root)
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range posts {
		if p.Sender == sender && strings.Contains(p.Text, text) {
			return p.Hash
		}
	}
	return ""
}

// replyTo is the agent's reply to a post in a thread, "" while there is none.
func replyTo(tb testing.TB, r *fossilio.Repo, root, to string) string {
	posts, err := r.Thread(tb.Context(), root)
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range posts {
		if p.InReplyTo == to && p.Sender == agent {
			return p.Hash
		}
	}
	return ""
}

// startListening provisions the agent's workspace and starts a session that
// hears the person on its record, with the stand-in runner answering at
// once; it returns the record (a thread's root).
func (n *testNode) startListening() string {
	n.t.Helper()
	n.must("", "login", "add", agent)
	record := n.result(n.srv.AdminLogin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	n.result(n.srv.AdminLogin, "session", "start", key(agent), "--hears", person, "--kind", "llm", "--runner", "native", "--model", "stand-in", "--lifetime", "stays")
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	return record
}

// TestWebPostWakesTheNode: a person replies through Fossil's web form in a
// thread a session listens to. The form answers with a redirect, so Fossil
// never starts its backoffice for it (fossil-2.21.md 4.5; here the server's
// backoffice is off altogether, and no poller runs), and the daemon looks
// at its repositories only every 10 minutes: the repository's write wakes
// the watch, which runs the hook, and the session answers. Before D29 the
// daemon only looked, and the post waited for the next look (here 10 min):
// the wait for the reply failed after 60 s.
func TestWebPostWakesTheNode(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	if out, err := n.srv.Fossil("settings", "backoffice-disable", "1", "-R", n.srv.Repo); err != nil {
		t.Fatalf("fossil settings backoffice-disable 1: %v\n%s", err, out)
	}
	startDaemon(t, n, program("ocxd"), "--hook-watch", "10m")
	record := n.startListening()
	web := n.webLogin(person)
	r := n.repo()
	defer r.Close()

	start := time.Now()
	web.reply(record, "hello from the web form")
	var post, reply string
	n.waitFor("the session's reply to the web post", func() bool {
		if post == "" {
			post = sentBy(t, r, record, person, "hello from the web form")
		}
		if post != "" {
			reply = replyTo(t, r, record, post)
		}
		return reply != ""
	})
	took := time.Since(start)
	lines := n.logLines()
	run := logIndex(lines, 0, func(l logLine) bool {
		return l.Msg == "the wake hook left receipts unhandled; running it" && l.Woken == "write"
	})
	if run < 0 {
		t.Errorf("the daemon did not say a write woke it to run the hook:\n%s", n.daemonLog())
	}
	// OCX's own hook is the daemon's own work: no /bin/sh, no ocx-hook
	// asking the daemon back.
	if !strings.Contains(n.daemonLog(), `"woken":"write","command":`) || !strings.Contains(n.daemonLog(), `"in_daemon":true`) {
		t.Errorf("the daemon ran its own hook's command rather than doing its work:\n%s", n.daemonLog())
	}
	if logIndex(lines, run, func(l logLine) bool { return l.Msg == "read" && strings.HasSuffix(l.Line, " "+post) }) < 0 {
		t.Errorf("the daemon did not read the web post from the hook it ran:\n%s", n.daemonLog())
	}
	hook, _ := os.ReadFile(filepath.Join(n.agents, "hook.log"))
	if !strings.Contains(string(hook), "msg=woke post="+post) {
		t.Errorf("the hook did not wake the session for %s:\n%s", post, hook)
	}
	t.Logf("web post %s answered by %s in %s", post[:10], reply[:10], took)
	n.must("", "session", "stop", key(agent))
	n.waitFor("the session to end", func() bool { return len(n.status().Sessions) == 0 })
}

// BenchmarkWebPost measures a person's post to the session's reply on the
// node's record, through Fossil's web form (nothing but the daemon's watch
// runs the hook for it: the form answers with a redirect, and no poller
// runs) and through `ocx post` (which runs `fossil backoffice --nolease`
// after its write, D11), in turns, on one node with one session. ns/op is
// one of each; web-ns/op and post-ns/op each path's mean, p50 its median;
// wake-ns the time from the post's start to the hook's waking the session;
// web/post the ratio of the means. watch-runs/op counts the hook runs the
// daemon started (the agent's replies, pushed from its sandbox, need one
// too when Fossil's lease holds its backoffice back), post-watch-runs those
// for an ocx post's receipt (its own backoffice runs the hook: one too
// many), web-refused the web posts Fossil refused (database is locked) and
// the person sent again.
func BenchmarkWebPost(b *testing.B) {
	needs(b, "ocxd", "workspace")
	n := newNode(b)
	startDaemon(b, n, program("ocxd")) // the defaults: events, and a look every 2 s
	record := n.startListening()
	web := n.webLogin(person)
	r := n.repo()
	defer r.Close()
	wait := func(what, to string, start time.Time) time.Duration {
		deadline := start.Add(60 * time.Second)
		for replyTo(b, r, record, to) == "" {
			if time.Now().After(deadline) {
				hook, _ := os.ReadFile(filepath.Join(n.agents, "hook.log"))
				sess, _ := os.ReadFile(filepath.Join(n.workspaceDir(agent), "session", "log"))
				rcv, _ := n.srv.Fossil("sql", "-R", n.srv.Repo, "SELECT rcvid, uid, nonce IS NULL, ipaddr, datetime(mtime) FROM rcvfrom ORDER BY rcvid DESC LIMIT 8")
				blobs, _ := n.srv.Fossil("sql", "-R", n.srv.Repo, "SELECT rid, rcvid, size, uuid FROM blob ORDER BY rid DESC LIMIT 10")
				b.Fatalf("no reply to %s (%s) in 60 s\nocxd.log:\n%s\nhook.log:\n%s\nsession log:\n%s\nreceipts:\n%s\nblobs:\n%s", to, what,
					lastLines([]byte(n.daemonLog()), 30), lastLines(hook, 12), lastLines(sess, 6), rcv, blobs)
			}
			time.Sleep(time.Millisecond)
		}
		return time.Since(start)
	}
	var webTook, postTook, webWake, postWake []time.Duration
	refused := 0
	posted := map[int64]bool{} // the receipts of the ocx posts
	woke := func(post string, start time.Time) time.Duration {
		log, _ := os.ReadFile(filepath.Join(n.agents, "hook.log"))
		for _, line := range strings.Split(string(log), "\n") {
			if !strings.Contains(line, "msg=woke post="+post) {
				continue
			}
			ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				return at.Sub(start)
			}
		}
		return 0
	}
	runs := strings.Count(n.daemonLog(), "receipts unhandled; running it")
	b.ResetTimer()
	for i := range b.N {
		text := fmt.Sprintf("web ping %d.", i)
		start := time.Now()
		refused += web.reply(record, text)
		var post string
		for post == "" {
			if post = sentBy(b, r, record, person, text); post == "" {
				if time.Since(start) > 60*time.Second {
					b.Fatalf("the web post %q is not on the record after 60 s", text)
				}
				time.Sleep(time.Millisecond)
			}
		}
		webTook = append(webTook, wait("web", post, start))
		webWake = append(webWake, woke(post, start))

		start = time.Now()
		post = n.result(person, "post", "--to", record, "--text", fmt.Sprintf("ocx ping %d.", i))
		postTook = append(postTook, wait("ocx post", post, start))
		postWake = append(postWake, woke(post, start))
		info, err := r.Info(n.ctx, post)
		if err != nil {
			b.Fatal(err)
		}
		posted[info.Rcvid] = true
	}
	b.StopTimer()
	// A run the daemon started for an `ocx post` is one too many: the
	// tool's backoffice runs the hook for it.
	doubles := 0
	for _, l := range n.logLines() {
		if l.Msg == "the wake hook left receipts unhandled; running it" && posted[l.Newest] && l.Mark == l.Newest-1 {
			doubles++
		}
	}
	mean := func(d []time.Duration) float64 {
		var s time.Duration
		for _, x := range d {
			s += x
		}
		return float64(s.Nanoseconds()) / float64(len(d))
	}
	p50 := func(d []time.Duration) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds())
	}
	b.ReportMetric(mean(webTook), "web-ns/op")
	b.ReportMetric(mean(postTook), "post-ns/op")
	b.ReportMetric(mean(webTook)/mean(postTook), "web/post")
	b.ReportMetric(p50(webTook), "web-p50-ns")
	b.ReportMetric(p50(postTook), "post-p50-ns")
	b.ReportMetric(p50(webWake), "web-wake-p50-ns")
	b.ReportMetric(p50(postWake), "post-wake-p50-ns")
	b.ReportMetric(float64(strings.Count(n.daemonLog(), "receipts unhandled; running it")-runs)/float64(b.N), "watch-runs/op")
	b.ReportMetric(float64(refused), "web-refused")
	b.ReportMetric(float64(doubles), "post-watch-runs")
	n.must("", "session", "stop", key(agent))
	n.waitFor("the session to end", func() bool { return len(n.status().Sessions) == 0 })
}
