package syncfwd

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The forwarder serves HTTP in goroutines; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seen is what the stand-in server received.
type seen struct {
	method, uri, host string
	header            http.Header
	body              []byte
}

// standIn is a server that records each request and answers with reply.
type standIn struct {
	mu    sync.Mutex
	got   []seen
	reply func(w http.ResponseWriter)
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.got = append(s.got, seen{r.Method, r.RequestURI, r.Host, r.Header.Clone(), body})
	reply := s.reply
	s.mu.Unlock()
	if reply != nil {
		reply(w)
		return
	}
	w.Header().Set("Content-Type", "application/x-fossil-uncompressed")
	w.Write([]byte("# reply to " + string(body)))
}

func (s *standIn) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.got...)
}

// forwarding starts a stand-in server, and the forwarder to its path
// /demo served on a unix socket; it returns both and the socket's path.
func forwarding(t *testing.T) (*standIn, *Forwarder, string) {
	t.Helper()
	up := &standIn{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	f, err := New(srv.URL+"/demo", "agent", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sock := shortSocket(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, f, nil, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return up, f, sock
}

// shortSocket is a socket path short enough for sun_path.
func shortSocket(t *testing.T) string {
	t.Helper()
	return t.TempDir() + "/s.sock"
}

// raw sends one request as written, on a connection of its own, and
// returns the status and the body.
func raw(t *testing.T, sock, req string) (int, string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the reply to %q: %v", strings.SplitN(req, "\r\n", 2)[0], err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post is a sync request in the form given: its first line's target, its
// content type, its body, and any more header lines.
func post(target, ctype, body string, more ...string) string {
	h := ""
	for _, m := range more {
		h += m + "\r\n"
	}
	return fmt.Sprintf("POST %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n%s", target, ctype, len(body), h, body)
}

// card is a payload opening with the login card of login.
func card(login, rest string) string {
	return "login " + login + " " + strings.Repeat("a", 40) + " " + strings.Repeat("b", 40) + "\n" + rest
}

// compressed is a payload as application/x-fossil carries it: its
// length in four bytes, then a zlib stream.
func compressed(payload string) string {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, uint32(len(payload)))
	z := zlib.NewWriter(&b)
	io.WriteString(z, payload)
	z.Close()
	return b.String()
}

// TestForwardsOnlyToItsOneServer: a sync request in origin form (as
// fossilio's client sends it over the socket) and in proxy form naming the
// server (as `fossil pull --proxy` sends it, a user name in the URL) reach
// the server at its path, with its host, the same body, and none of the
// headers the sandbox added but its content type and user agent; a
// request naming another host, port, scheme or path, and one of another
// method or content type, is refused naming the one server, and reaches
// nothing.
func TestForwardsOnlyToItsOneServer(t *testing.T) {
	up, f, sock := forwarding(t)
	target, _ := url.Parse(f.Target())
	hostport := target.Host

	pull := card("agent", "pull card\n")
	code, body := raw(t, sock, post("/demo", "application/x-fossil-uncompressed", pull,
		"Cookie: fossil-123=node-user-cookie", "Authorization: Basic bm9kZTpwdw==", "X-Forwarded-For: 10.0.0.1", "User-Agent: Fossil/2.21"))
	if code != http.StatusOK || body != "# reply to "+pull {
		t.Fatalf("origin form: %d %q", code, body)
	}
	// Compressed, the card found in the stream, the body forwarded whole.
	push := compressed(card("agent", strings.Repeat("push card\n", 2000)))
	code, body = raw(t, sock, post("http://agent@"+hostport+"/demo", "application/x-fossil", push))
	if code != http.StatusOK || body != "# reply to "+push {
		t.Fatalf("proxy form: %d %.80q", code, body)
	}
	got := up.requests()
	if len(got) != 2 {
		t.Fatalf("the server got %d requests, want 2", len(got))
	}
	for i, g := range got {
		if g.method != http.MethodPost || g.uri != "/demo" || g.host != hostport {
			t.Errorf("request %d reached the server as %s %s (Host %s)", i, g.method, g.uri, g.host)
		}
		for name := range g.header {
			switch name {
			case "Content-Type", "User-Agent", "Content-Length", "Accept-Encoding", "Connection": // the last two Go's transport's own
			default:
				t.Errorf("request %d carried %s: %q; the forwarder adds nothing and keeps only the content type and user agent", i, name, g.header.Get(name))
			}
		}
	}
	if string(got[0].body) != pull || got[0].header.Get("User-Agent") != "Fossil/2.21" {
		t.Errorf("the first request's body %q, user agent %q", got[0].body, got[0].header.Get("User-Agent"))
	}

	host, port, _ := net.SplitHostPort(hostport)
	refused := []struct {
		req  string
		code int
	}{
		{post("http://"+host+":1/demo", "application/x-fossil", "x"), http.StatusForbidden},
		{post("http://example.org:"+port+"/demo", "application/x-fossil", "x"), http.StatusForbidden},
		{post("https://"+hostport+"/demo", "application/x-fossil", "x"), http.StatusForbidden},
		{post("http://"+hostport+"/other", "application/x-fossil", "x"), http.StatusForbidden},
		{post("/other", "application/x-fossil", "x"), http.StatusForbidden},
		{post("/demo/../other", "application/x-fossil", "x"), http.StatusForbidden},
		{post("/demo?name=x", "application/x-fossil", "x"), http.StatusForbidden},
		{post("/demo", "application/json", "{}"), http.StatusUnsupportedMediaType},
		{post("/demo", "", ""), http.StatusUnsupportedMediaType},
		{"GET /demo HTTP/1.0\r\nHost: x\r\n\r\n", http.StatusMethodNotAllowed},
		{"CONNECT " + hostport + " HTTP/1.1\r\nHost: " + hostport + "\r\n\r\n", http.StatusMethodNotAllowed},
		{"POST /demo HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-fossil\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", http.StatusLengthRequired},
	}
	for _, r := range refused {
		first := strings.SplitN(r.req, "\r\n", 2)[0]
		code, body := raw(t, sock, r.req)
		if code != r.code || !strings.Contains(body, f.Target()) && r.code != http.StatusLengthRequired {
			t.Errorf("%s: %d %q, want %d naming %s", first, code, body, r.code, f.Target())
		}
	}
	if n := len(up.requests()); n != 2 {
		t.Errorf("a refused request reached the server: it got %d requests, want 2", n)
	}
}

// TestOnlyTheWorkspacesOwnLogin (D81): a request whose payload does not
// open with a login card as the workspace's own login is refused, naming
// what the socket forwards, and reaches nothing: no card but others, a
// login as another user (compressed or not), a card cut short, a first
// line longer than the bound, a payload that is not the zlib stream its
// type says.
func TestOnlyTheWorkspacesOwnLogin(t *testing.T) {
	up, _, sock := forwarding(t)
	for _, c := range []struct {
		name, ctype, body, says string
	}{
		{"no login card", "application/x-fossil-uncompressed", "pull 0 1\nigot abc\n", `first card is "pull"`},
		{"an empty payload", "application/x-fossil-uncompressed", "", "does not end"},
		{"a comment first", "application/x-fossil-debug", "# hi\n" + card("agent", ""), `first card is "#"`},
		{"another login", "application/x-fossil-uncompressed", card("admin", "pull 0 1\n"), `logs in as "admin"`},
		{"another login, compressed", "application/x-fossil", compressed(card("setup", "push 0 1\n")), `logs in as "setup"`},
		{"nobody", "application/x-fossil", compressed(card("nobody", "")), `logs in as "nobody"`},
		{"a card cut short", "application/x-fossil-uncompressed", "login agent\n", "has 2 fields"},
		{"a first line past the bound", "application/x-fossil-uncompressed", "login agent " + strings.Repeat("a", maxFirstCard) + "\n", "does not end"},
		{"not zlib", "application/x-fossil", "\x00\x00\x00\x05login", "not compressed"},
	} {
		code, body := raw(t, sock, post("/demo", c.ctype, c.body))
		if code != http.StatusForbidden || !strings.Contains(body, c.says) || !strings.Contains(body, "sync requests of agent") {
			t.Errorf("%s: %d %q; want 403 saying %q and what the socket forwards", c.name, code, body, c.says)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the server got %d requests; a refused one reaches nothing", n)
	}
}

// FuzzFirstCard: any body, of any sync type, reads without a panic; the
// bytes read are the body's first, and at most the bound read for it.
func FuzzFirstCard(f *testing.F) {
	f.Add("application/x-fossil", []byte(compressed(card("agent", "push 0 1\n"))))
	f.Add("application/x-fossil-uncompressed", []byte(card("agent", "")))
	f.Add("application/x-fossil", []byte("\x00\x00\x00\x05x"))
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		_, read, _ := firstCard(ct, bytes.NewReader(body))
		if !bytes.HasPrefix(body, read) || len(read) > maxCardInput {
			t.Fatalf("read %d bytes, not the body's first (of %d) within the bound", len(read), len(body))
		}
	})
}

// TestBodiesBounded: a request longer than the bound is refused before
// anything reaches the server; a reply longer than it is refused when it
// says its length, and cut, its connection ended, when it does not.
func TestBodiesBounded(t *testing.T) {
	up, f, sock := forwarding(t)
	f.maxBody = 1000
	big := strings.Repeat("x", 1001)
	if code, body := raw(t, sock, post("/demo", "application/x-fossil", big)); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "at most 1000") {
		t.Errorf("a request of 1001 bytes: %d %q", code, body)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the server got %d requests from a refused one", n)
	}
	reply := func(n int, length bool) {
		up.mu.Lock()
		defer up.mu.Unlock()
		up.reply = func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-fossil")
			if length {
				w.Header().Set("Content-Length", fmt.Sprint(n))
				w.Write(bytes.Repeat([]byte("r"), n))
				return
			}
			for left := n; left > 0; left -= 300 { // streamed: no length said
				w.Write(bytes.Repeat([]byte("r"), min(left, 300)))
				w.(http.Flusher).Flush()
			}
		}
	}
	reply(10, true)
	exact := card("agent", "")
	exact += strings.Repeat("x", 1000-len(exact))
	if code, _ := raw(t, sock, post("/demo", "application/x-fossil-uncompressed", exact)); code != http.StatusOK {
		t.Errorf("a request of exactly the bound: %d", code)
	}
	for _, c := range []struct {
		n      int
		length bool
		code   int
	}{{1000, true, http.StatusOK}, {1001, true, http.StatusBadGateway}, {1000, false, http.StatusOK}, {2800, false, http.StatusBadGateway}} {
		reply(c.n, c.length)
		code, body := raw(t, sock, post("/demo", "application/x-fossil", compressed(card("agent", "x\n"))))
		if code != c.code || code == http.StatusOK && len(body) != c.n || code != http.StatusOK && !strings.Contains(body, "1000") {
			t.Errorf("a reply of %d bytes (length said: %v): %d, %d bytes %.80q; want %d", c.n, c.length, code, len(body), body, c.code)
		}
	}
}

// TestServeRefusesAConnectionAcceptRefuses: accept decides before any
// request is read (the node's own uid, unixhost.SameUser).
func TestServeRefusesAConnectionAcceptRefuses(t *testing.T) {
	up := &standIn{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	f, err := New(srv.URL, "agent", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sock := shortSocket(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, f, func(net.Conn) error { return errors.New("another uid") }, nil)
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, post("/", "application/x-fossil", "x"))
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		t.Errorf("a refused connection got a reply")
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("the server got %d requests over a refused connection", n)
	}
}

// TestServeBoundsConnections (D80): at most MaxConns connections are
// served at once; one past them is answered 503 naming the bound, and
// once one closes another is served.
func TestServeBoundsConnections(t *testing.T) {
	up := &standIn{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	f, err := New(srv.URL, "agent", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sock := shortSocket(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, f, nil, nil) }()
	ask := func() (int, string, net.Conn) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /nothing HTTP/1.1\r\nHost: s\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), c
	}
	var open []net.Conn
	for i := range maxConns {
		code, body, c := ask()
		open = append(open, c)
		if code == http.StatusServiceUnavailable {
			t.Fatalf("connection %d refused: %s", i, body)
		}
	}
	code, body, c := ask()
	c.Close()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, fmt.Sprintf("at most %d connections", maxConns)) {
		t.Errorf("one past the bound: %d %s", code, body)
	}
	open[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The place frees once the server has seen the close.
		code, _, c := ask()
		c.Close()
		if code != http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection served after one closed")
		}
	}
	for _, c := range open[1:] {
		c.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// TestNewRefusesABadTarget: the one URL is the project's, without
// credentials, query or fragment.
func TestNewRefusesABadTarget(t *testing.T) {
	for _, u := range []string{"", "ftp://h/", "http:///x", "http://u:p@h/", "http://h/?q=1", "http://h/#f"} {
		if _, err := New(u, "agent", nil, nil); err == nil {
			t.Errorf("New(%q) took it", u)
		}
	}
	f, err := New("http://127.0.0.1:8080", "agent", nil, nil)
	if err != nil || f.Target() != "http://127.0.0.1:8080/" {
		t.Errorf("New without a path: %v, target %q", err, f.Target())
	}
	for _, login := range []string{"", "a b", "a\\sb"} {
		if _, err := New("http://127.0.0.1:8080", login, nil, nil); err == nil {
			t.Errorf("New for login %q took it", login)
		}
	}
}
