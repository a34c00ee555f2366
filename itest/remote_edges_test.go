package itest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Nodes on other hosts at the edges (issue 38, item 1): the node's daemon
// killed alone, the server away as a run ends, a re-exec mid-run. Each
// run ends once, with its real exit, its kept logs written once and
// before its ended.

// runPosts is what the run's node wrote in its thread, in order: "started",
// "kept logs" (each with its text), "ended".
func runPosts(n *testNode, run string) (kinds []string, kept []string) {
	user := n.nodeUser()
	for _, p := range n.runThread(run) {
		if p.Sender != user {
			continue
		}
		switch m := p.Msg.(type) {
		case *runmsg.RunStarted:
			kinds = append(kinds, "started")
		case *runmsg.RunEnded:
			kinds = append(kinds, "ended")
		case nil:
			if strings.HasPrefix(p.Text, "The kept logs of run") {
				kinds = append(kinds, "kept logs")
				kept = append(kept, p.Text)
			}
		default:
			kinds = append(kinds, fmt.Sprintf("%T", m))
		}
	}
	return kinds, kept
}

// checkRunPosts fails the test unless the run's node wrote its started,
// one kept logs holding want, and its ended exited 0, in that order, each
// once.
func checkRunPosts(t *testing.T, n *testNode, run, want string) {
	t.Helper()
	kinds, kept := runPosts(n, run)
	if got := strings.Join(kinds, ", "); got != "started, kept logs, ended" {
		t.Errorf("run %s: its node wrote %q; want started, kept logs, ended, each once and in that order", run[:10], got)
	}
	if len(kept) == 1 && !strings.Contains(kept[0], want) {
		t.Errorf("run %s: its kept logs lack %q:\n%s", run[:10], want, kept[0])
	}
	if e := n.endedOf(run); e == nil || e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("run %s ended %+v, want exited 0", run[:10], e)
	}
}

// sayRun is a run for node, as user, that sleeps secs then prints word.
func sayRun(node, user string, secs int, word string) string {
	return block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Sleep, then say a word.",
"process": {"user": %q, "command": ["sh", "-c", "sleep %d; echo %s"], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`, node, user, secs, word))
}

// TestRemoteDaemonKilledAlone: the daemon of a node on another host is
// killed outright (kill -9, it alone: the runs' holders live on) while
// two of its runs run. One run ends while no daemon runs, the other runs
// on past the restart. The daemon started again finds both once its
// clone is fresh: each ends as its command did, exited 0, its kept logs
// written once before its ended, nothing found lost. Before, the restart
// found nothing (its clone was not fresh at the start), and the runs
// stayed started with no ended, ever. A plain TERM at the end logs no
// run's actor as stopped unexpectedly.
func TestRemoteDaemonKilledAlone(t *testing.T) {
	needs(t, "ocxd")
	a := serverNode(t)
	startDaemon(t, a, program("ocxd"))
	b := newRemoteNode(t, a, "lab-2", remoteOpts{host: true, every: "1s", poke: "on"})
	d := startDaemon(t, b, program("ocxd"))
	admin := a.srv.AdminLogin
	short := a.result(admin, "thread", "--title", "short", "--text", sayRun("lab-2", "builder", 1, "short-done"))
	long := a.result(admin, "thread", "--title", "long", "--text", sayRun("lab-2", "runner", 8, "long-done"))
	shortHolder := b.heldRun(short)
	longHolder := b.heldRun(long)
	d.kill9()
	// The short run's holder ends while no daemon runs; the long one's
	// still runs when the daemon starts again.
	b.waitFor("the short run's holder to end with no daemon", func() bool { return !procAlive(shortHolder) })
	if !procAlive(longHolder) {
		t.Fatal("the long run's holder ended before the restart; the test shows nothing of a holder taken back alive")
	}
	if e := b.endedOf(short); e != nil {
		t.Fatalf("the short run ended %+v while no daemon ran", e)
	}
	// The restore is handed to the node a second after the holders are
	// adopted (the daemon's test delay): the short run's holder, found
	// ended, must not send its exit before the node has its run's state.
	d = startDaemonEnv(t, b, program("ocxd"), []string{envReexecDelay + "=1s@runs-found"})
	b.waitFor("both runs ended", func() bool { return b.endedOf(short) != nil && b.endedOf(long) != nil })
	checkRunPosts(t, b, short, "short-done")
	checkRunPosts(t, b, long, "long-done")
	for _, run := range []string{short, long} {
		b.waitFor("the run out of the node's care", func() bool { _, held := b.runCare(run); return !held })
	}
	// The check, asked by hand, finds nothing more to say.
	if out, err := b.command(nil, program("ocx"), "run", "check", "--agents", b.agents).CombinedOutput(); err != nil {
		t.Errorf("ocx run check: %v: %s", err, out)
	}
	for _, run := range []string{short, long} {
		if x := answersOfRun(t, a, run); x.started != 1 || x.ended != 1 {
			t.Errorf("run %s: %d started, %d ended; want one each", run[:10], x.started, x.ended)
		}
	}
	d.stop()
	if log := b.daemonLog(); strings.Contains(log, "stopped unexpectedly") {
		t.Errorf("a plain TERM logged an actor as stopped unexpectedly:\n%s", log)
	}
}

// TestRemoteKeptLogsWaitForTheServer: the server is down as a run of a
// node on another host ends. The node tries its kept logs again, and
// writes no ended before them, for as long as the server is away; when
// it is back the thread holds started, the kept logs (the run's output)
// and ended, each once and in that order. Before, the kept logs were
// given up at the first failure and the output never reached the record.
func TestRemoteKeptLogsWaitForTheServer(t *testing.T) {
	needs(t, "ocxd")
	a := serverNode(t)
	startDaemon(t, a, program("ocxd"))
	b := newRemoteNode(t, a, "lab-2", remoteOpts{host: true, every: "1s", poke: "on"})
	startDaemon(t, b, program("ocxd"), "--retry-after", "200ms")
	admin := a.srv.AdminLogin
	run := a.result(admin, "thread", "--title", "ends while the server is away", "--text", sayRun("lab-2", "builder", 2, "the-output"))
	holder := b.heldRun(run)
	a.srv.Down()
	b.waitFor("the run's holder to end", func() bool { return !procAlive(holder) })
	// Past the attempts that end the tries of a write the server refuses.
	b.waitFor("eight failed tries of the kept logs", func() bool {
		tries := 0
		for _, l := range b.logLines() {
			if l.Msg == "kept logs not written; trying again" {
				tries++
			}
			if l.Msg == "ended not written; trying again" {
				t.Fatalf("ended was tried before the kept logs were written")
			}
		}
		return tries >= 8
	})
	a.srv.Up()
	a.waitFor("the run ended", func() bool { return b.endedOf(run) != nil })
	checkRunPosts(t, b, run, "the-output")
	if strings.Contains(b.daemonLog(), "given up") {
		t.Errorf("the node gave a write up while the server was away:\n%s", b.daemonLog())
	}
}

// TestRemoteDaemonReexecMidRun: the daemon of a node on another host
// re-execs while its run runs; the new image takes the run back once its
// clone is fresh, and the run ends once, exited 0, its kept logs before
// its ended.
func TestRemoteDaemonReexecMidRun(t *testing.T) {
	needs(t, "ocxd")
	a := serverNode(t)
	startDaemon(t, a, program("ocxd"))
	b := newRemoteNode(t, a, "lab-2", remoteOpts{host: true, every: "1s", poke: "on"})
	d := startDaemon(t, b, program("ocxd"))
	admin := a.srv.AdminLogin
	run := a.result(admin, "thread", "--title", "across a re-exec", "--text", sayRun("lab-2", "builder", 4, "after-reexec"))
	holder := b.heldRun(run)
	at := len(b.logLines())
	if err := syscall.Kill(d.pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	b.waitLogLine("the new image running", func(l logLine) bool { return l.Msg == "re-exec: running the new image" })
	if !procAlive(holder) {
		t.Fatal("the run's holder ended before the re-exec was done; the test shows nothing")
	}
	a.waitFor("the run ended", func() bool { return b.endedOf(run) != nil })
	checkRunPosts(t, b, run, "after-reexec")
	if d.pid() != b.daemonPID() {
		t.Errorf("the daemon's PID changed across the re-exec: %d, now %d", d.pid(), b.daemonPID())
	}
	found := false
	for _, l := range b.logLines()[at:] {
		found = found || l.Msg == "the runs in care of a project are found on its fresh clone"
	}
	if !found {
		t.Errorf("the new image did not say it found the run in care on its fresh clone:\n%s", b.daemonLog())
	}
}

// pokeTarget counts the pokes a fake remote node's address takes.
type pokeTarget struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   int
}

func newPokeTarget(t *testing.T) *pokeTarget {
	p := &pokeTarget{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			p.mu.Lock()
			p.n++
			p.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pokeTarget) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// TestNodeAddTakesEffectAtOnce: `ocx node add USER --poke URL` and `ocx
// node remove USER`, run while the server's daemon runs, take effect at
// once: the next post pokes a node just added, and pokes a node just
// removed no more; each command says it had the daemon read node.json
// again, and the daemon keeps its PID. A node.json edited by hand is read
// again at the next ask. Before, the daemon's hook kept the node.json it
// read at its start until it was restarted, and no command said so.
func TestNodeAddTakesEffectAtOnce(t *testing.T) {
	needs(t, "ocxd")
	a := serverNode(t)
	d := startDaemon(t, a, program("ocxd"))
	admin := a.srv.AdminLogin
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("node-pw-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p2, p3 := newPokeTarget(t), newPokeTarget(t)
	r := a.must("", "node", "add", "lab-2", "--password-file", pw, "--poke", p2.srv.URL+"/")
	if !strings.Contains(r.stdout+r.stderr, fmt.Sprintf("handed `reexec` to the daemon (pid %d)", d.pid())) {
		t.Errorf("node add does not say it had the daemon read node.json again:\n%s%s", r.stdout, r.stderr)
	}
	a.result(admin, "thread", "--title", "one", "--text", "a post after lab-2 was added")
	a.waitFor("lab-2 poked", func() bool { return p2.count() > 0 })
	// Without --poke: listed, poked never; the daemon reads it all the same.
	a.must("", "node", "add", "lab-4", "--password-file", pw)
	a.must("", "node", "add", "lab-3", "--password-file", pw, "--poke", p3.srv.URL+"/")
	a.must("", "node", "remove", "lab-2")
	before := p2.count()
	for i := range 2 {
		n := p3.count()
		a.result(admin, "thread", "--title", fmt.Sprintf("after remove %d", i), "--text", "a post after lab-2 was removed")
		a.waitFor("lab-3 poked", func() bool { return p3.count() > n })
	}
	if p2.count() != before {
		t.Errorf("lab-2 was poked %d times after `node remove`", p2.count()-before)
	}
	if pid := a.daemonPID(); pid != d.pid() {
		t.Errorf("the daemon's PID changed: %d, now %d; a re-exec keeps it", d.pid(), pid)
	}
	// node.json edited by hand: the next ask is refused (its caller does
	// the work with the file as it is) and the daemon reads it again.
	b, err := os.ReadFile(filepath.Join(a.agents, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	at := len(a.logLines())
	edited := strings.Replace(string(b), p3.srv.URL+"/", p2.srv.URL+"/", 1)
	if edited == string(b) {
		t.Fatalf("node.json does not name lab-3's poke URL:\n%s", b)
	}
	if err := os.WriteFile(filepath.Join(a.agents, "node.json"), []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	n := p2.count()
	post := a.result(admin, "thread", "--title", "after the edit", "--text", "a post after node.json was edited")
	a.waitFor("lab-3's address, now lab-2's target, poked", func() bool { return p2.count() > n })
	// The daemon comes to run with node.json as edited: its own re-exec,
	// after it saw the change; or a re-exec of node add or remove still
	// under way when the file was written, whose new image read the edit
	// at its start: then no ask is refused, and the post's hook is the
	// daemon's, its line read from the socket (an ask is taken only while
	// the daemon's node.json is the file's).
	a.waitFor("the daemon to read node.json again", func() bool {
		lines := a.logLines()
		saw := logIndex(lines, at, func(l logLine) bool { return strings.HasPrefix(l.Msg, "node.json changed since the daemon read it") })
		if saw >= 0 {
			return logIndex(lines, saw, func(l logLine) bool { return l.Msg == "re-exec: running the new image" }) >= 0
		}
		return logIndex(lines, at, func(l logLine) bool {
			return l.Msg == "read" && l.From == "socket" && strings.Contains(l.Line, post)
		}) >= 0
	})
}

// TestRemoteNodeNeedsHTTPS (issue 39 item 6, D81): a node on another host
// trusts its channel to the server, so `ocx init --other-host` refuses a
// server URL in clear http off loopback, and `ocx node add --poke`
// refuses such a poke URL, each naming the URL and https, writing
// nothing; `--poke-listen` without the poke's secret is refused naming
// --poke-secret-file.
func TestRemoteNodeNeedsHTTPS(t *testing.T) {
	a := serverNode(t)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("lab-h-pw-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(a.agents, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	const clear = "http://10.9.8.7:8091/"
	if r := a.ocx("", "node", "add", "lab-h", "--password-file", pw, "--poke", clear); r.code == 0 || !strings.Contains(r.stdout+r.stderr, clear) || !strings.Contains(r.stdout+r.stderr, "https") {
		t.Errorf("node add with a poke URL in clear: %s; want refused naming it and https", r)
	}
	if after, _ := os.ReadFile(filepath.Join(a.agents, "node.json")); string(after) != string(before) {
		t.Errorf("a refused node add changed node.json:\n%s", after)
	}
	// A poke on loopback: node add makes its secret, keeps it in node.json
	// alone (never shown), and keeps it when the node is added again.
	secretOf := func() string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(a.agents, "node.json"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := messages.DecodeNodeConfig(data)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := c.Projects["demo"].RemoteNode("lab-g")
		return r.PokeSecret
	}
	first := ""
	for i := range 2 {
		r := a.must("", "node", "add", "lab-g", "--password-file", pw, "--poke", "http://127.0.0.1:18298/")
		made := secretOf()
		if len(made) != 64 || strings.Contains(r.stdout+r.stderr, made) {
			t.Errorf("node add %d: the poke's secret %q: 64 hex digits in node.json, shown nowhere\n%s", i, made, r.stdout)
		}
		if dry := a.must("", "node", "add", "lab-g", "--password-file", pw, "--poke", "http://127.0.0.1:18298/", "--dry-run"); strings.Contains(dry.stdout, made) {
			t.Errorf("node add --dry-run shows the poke's secret:\n%s", dry.stdout)
		}
		if i == 1 && made != first {
			t.Errorf("node add again made another secret: %q, was %q", made, first)
		}
		first = made
	}
	agents := filepath.Join(t.TempDir(), "agents")
	clone := filepath.Join(t.TempDir(), "demo.fossil")
	b := &testNode{t: t, ctx: a.ctx, srv: a.srv, agents: agents, pw: a.pw}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(pokeSecret("lab-h")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		says []string
	}{
		{"a server in clear", []string{"--project", "demo=" + clone + ",http://10.9.8.7:8080/"}, []string{"http://10.9.8.7:8080/", "https"}},
		{"pokes without a secret", []string{"--project", "demo=" + clone + "," + a.srv.URL, "--poke-listen", "127.0.0.1:18299"}, []string{"--poke-secret-file"}},
		{"a secret without pokes", []string{"--project", "demo=" + clone + "," + a.srv.URL, "--poke-secret-file", secret}, []string{"--poke-listen"}},
	} {
		r := b.ocx("", append([]string{"init", "--other-host", "--node-user", "lab-h", "--password-file", pw, "--release", relRoot}, c.args...)...)
		for _, s := range c.says {
			if r.code == 0 || !strings.Contains(r.stdout+r.stderr, s) {
				t.Errorf("%s: %s; want refused saying %q", c.name, r, s)
			}
		}
		for _, p := range []string{clone, filepath.Join(agents, "node.json")} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s: %s is written", c.name, p)
			}
		}
	}
}

// TestPokesCarryTheSecret (issue 39 item 6, D81): a node on another host
// pulls when the server's hook pokes it, each poke carrying the secret
// both node.json files hold; a poke without it, or with another, is
// refused 401 and makes it pull nothing; valid pokes sent back to back
// for three seconds make it pull at most once a second, not back to back.
// What the node pulls is counted on the server: each pull asks its
// receipt page once, a page the server's daemon renders and logs.
func TestPokesCarryTheSecret(t *testing.T) {
	needs(t, "ocxd", host.ConsoleProgram)
	a := serverNode(t)
	startDaemon(t, a, program("ocxd"), "--log-level", "debug")
	b := newRemoteNode(t, a, "lab-p", remoteOpts{host: true, every: "1h", poke: "on"})
	startDaemon(t, b, program("ocxd"), "--log-level", "debug")
	b.waitLogLine("the first pull", func(l logLine) bool {
		return strings.HasPrefix(l.Msg, "the clone of a project served from another host is fresh")
	})
	b.waitLogLine("the pokes taken", func(l logLine) bool { return l.Msg == "taking pokes" })
	pages := func(from int) int {
		n := 0
		for _, l := range a.logLines()[from:] {
			if l.Msg == "ocxd.sock: a console page served" {
				n++
			}
		}
		return n
	}

	// pulls says what pulls the node began from its log's line from on.
	pulls := func(from int) []string {
		var why []string
		for _, l := range b.logLines()[from:] {
			if l.Msg == "pull" {
				why = append(why, l.Why)
			}
		}
		return why
	}

	// The server's hook pokes, with the secret: the post is pulled at once
	// (the node's timer is an hour). The pull asks its receipt page after
	// the post is in the clone, and logs "pulled" once it is answered: the
	// refused pokes below begin after that, so that page is not counted.
	from := len(b.logLines())
	post := a.result(a.srv.AdminLogin, "thread", "--title", "poked", "--text", "pull me")
	b.waitFor("the post's pull vouched for", func() bool {
		return logIndex(b.logLines(), from, func(l logLine) bool { return l.Msg == "pulled" && l.Vouched > 0 }) >= 0
	})
	clone := filepath.Join(filepath.Dir(b.agents), "clone", "demo.fossil")
	a.waitFor("the post in the poked node's clone", func() bool {
		r, err := fossilio.OpenNode(clone, nil)
		if err != nil {
			return false
		}
		defer r.Close()
		info, err := r.Info(a.ctx, post)
		return err == nil && info.Sender == a.srv.AdminLogin
	})

	poke := func(auth string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, b.pokeURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	mark, markB := len(a.logLines()), len(b.logLines())
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		for _, auth := range []string{"", "Bearer " + strings.Repeat("0", 40)} {
			if code := poke(auth); code != http.StatusUnauthorized {
				t.Fatalf("a poke with Authorization %q: %d, want 401", auth, code)
			}
		}
	}
	if n := pages(mark); n != 0 {
		t.Errorf("refused pokes made the node pull: the server rendered %d receipt pages; the node began pulls for %q", n, pulls(markB))
	}

	mark = len(a.logLines())
	t0 := time.Now()
	for time.Since(t0) < 3*time.Second {
		if code := poke("Bearer " + pokeSecret("lab-p")); code != http.StatusNoContent {
			t.Fatalf("a poke with the secret: %d, want 204", code)
		}
	}
	n, most := pages(mark), 2+int(time.Since(t0)/time.Second)
	t.Logf("valid pokes for %s: %d pulls", time.Since(t0).Round(time.Millisecond), n)
	if n > most || n == 0 {
		t.Errorf("valid pokes for %s made the node pull %d times; want 1 to %d (at most one a second)", time.Since(t0).Round(time.Millisecond), n, most)
	}
	http.DefaultClient.CloseIdleConnections()
}

// tlsFront serves target over https on 127.0.0.1, as an operator's TLS
// front would, with a certificate of a CA of the test's own, whose PEM
// file it returns with the front's URL.
func tlsFront(t *testing.T, target string) (string, string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, leafKey := key(), key()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ocx test CA"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		// fossil checks an IP literal as a DNS name (X509_VERIFY_PARAM_set1_host), Go as an IP.
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost", "127.0.0.1"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(u))
	front.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}}
	front.StartTLS()
	t.Cleanup(front.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return front.URL + "/", caFile
}

// TestRemoteNodeOverHTTPS (D81): a node on another host made with the
// server's https URL (a TLS front, its certificate of a CA the node
// trusts) clones, pulls, has the server vouch and writes over it: seed
// 004's echo for it is answered, started, kept logs and ended by its node
// user.
func TestRemoteNodeOverHTTPS(t *testing.T) {
	needs(t, "ocxd")
	a := serverNode(t)
	startDaemon(t, a, program("ocxd"))
	front, ca := tlsFront(t, a.srv.URL)
	b := newRemoteNode(t, a, "lab-s", remoteOpts{every: "500ms", url: front, ca: ca})
	startDaemonEnv(t, b, program("ocxd"), []string{"SSL_CERT_FILE=" + ca})
	run := a.result(a.srv.AdminLogin, "thread", "--title", "over https", "--text", echoRun("lab-s", "builder", "secure"))
	a.waitFor("the run's ended", func() bool { return b.endedOf(run) != nil })
	if e := b.endedOf(run); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("the run over https ended %+v, want exited 0", e)
	}
	if by := threadBy(a, run); by["lab-s"] != 3 {
		t.Errorf("the run's thread by sender %v: want lab-s's started, kept logs and ended", by)
	}
}
