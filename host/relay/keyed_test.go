package relay

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// node is an HTTP server on a unix socket, as the node's side of a relay:
// it keeps the header of each request that reached it, and streams
// /stream event by event.
type node struct {
	sock string
	srv  *http.Server
	step chan struct{}

	mu   sync.Mutex
	seen []http.Header
}

func startNode(t testing.TB) *node {
	t.Helper()
	n := &node{sock: filepath.Join(t.TempDir(), "model.sock"), step: make(chan struct{})}
	ln, err := net.Listen("unix", n.sock)
	if err != nil {
		t.Fatal(err)
	}
	n.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.seen = append(n.seen, r.Header.Clone())
		n.mu.Unlock()
		if r.URL.Path == "/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			<-n.step
			fmt.Fprint(w, "data: two\n\n")
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	})}
	go n.srv.Serve(ln)
	t.Cleanup(func() { n.srv.Close() })
	return n
}

func (n *node) requests() []http.Header {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]http.Header(nil), n.seen...)
}

func listenKeyed(t testing.TB, sock string) (*Keyed, string) {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ListenKeyed(sock, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k, key
}

// TestKeyedRelayCarriesOnlyItsKey: a request holding the relay's key, in
// X-Api-Key (Claude Code) or as a bearer token (Codex), reaches the node's
// socket without it, whole or streamed, many at once; one without it, with
// another key, or with the key beside another credential is answered 401
// naming why, and nothing of it reaches the socket.
func TestKeyedRelayCarriesOnlyItsKey(t *testing.T) {
	n := startNode(t)
	k, key := listenKeyed(t, n.sock)
	if !strings.HasPrefix(k.Addr(), "127.0.0.1:") || len(key) != 2*keyLen {
		t.Fatalf("the relay listens on %s with a key of %d characters", k.Addr(), len(key))
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	do := func(path string, hdr map[string]string, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, k.URL()+path, strings.NewReader(body))
		for h, v := range hdr {
			req.Header.Set(h, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, hdr := range []map[string]string{
		{"X-Api-Key": key, "Cookie": "a=b"},
		{"Authorization": "Bearer " + key, "Proxy-Authorization": "Basic eDp5"},
	} {
		if code, body := do("/v1/messages", hdr, "hello"); code != 200 || body != "POST /v1/messages hello" {
			t.Fatalf("with its key (%v): %d %s", hdr, code, body)
		}
	}
	for _, h := range n.requests() {
		for _, c := range credentials {
			if h.Get(c) != "" {
				t.Errorf("the node's socket got %s: %q", c, h.Get(c))
			}
		}
	}
	reached := len(n.requests())
	for _, c := range []struct {
		hdr map[string]string
		why string
	}{
		{nil, "it carries no key"},
		{map[string]string{"X-Api-Key": "ocx-the-node-holds-the-key"}, "its key is not this turn's"},
		{map[string]string{"X-Api-Key": key[:len(key)-1]}, "its key is not this turn's"},
		{map[string]string{"Authorization": "Bearer " + key + "x"}, "its key is not this turn's"},
		{map[string]string{"Authorization": "Basic " + key}, "not a bearer token"},
		{map[string]string{"X-Api-Key": key, "Authorization": "Bearer another"}, "its key is not this turn's"},
	} {
		code, body := do("/v1/messages", c.hdr, `{"model": "m"}`)
		if code != http.StatusUnauthorized || !strings.Contains(body, c.why) || !strings.Contains(body, `"authentication_error"`) {
			t.Errorf("%v: %d %s; want 401 saying %q", c.hdr, code, body, c.why)
		}
	}
	if got := len(n.requests()); got != reached {
		t.Fatalf("%d refused requests reached the node's socket", got-reached)
	}

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, k.URL()+"/v1/responses", strings.NewReader(fmt.Sprint(i)))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("POST /v1/responses %d", i); string(b) != want {
				t.Errorf("got %q, want %q", b, want)
			}
		})
	}
	wg.Wait()

	req, _ := http.NewRequest(http.MethodGet, k.URL()+"/stream", nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: one\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(n.step) // the first event came before the second was written
	if rest, _ := io.ReadAll(br); string(rest) != "\ndata: two\n\n" {
		t.Fatalf("the rest of the stream %q", rest)
	}
}

// TestKeyedRelayRefusesAnotherUser: where a sandbox shares the host's
// network, its relay's port is open to every user of the host. curl run
// as nobody (uid 65534), without the key or with the placeholder the CLIs
// were given before (D48), is refused 401 and nothing reaches the node's
// socket.
func TestKeyedRelayRefusesAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a client as another user needs root")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is not on PATH")
	}
	n := startNode(t)
	k, _ := listenKeyed(t, n.sock)
	for _, hdr := range [][]string{nil, {"-H", "x-api-key: ocx-the-node-holds-the-key"}} {
		args := append([]string{"-s", "-w", "\n%{http_code}", "-X", "POST", "-d", `{"model": "m"}`}, hdr...)
		cmd := exec.Command(curl, append(args, k.URL()+"/v1/messages")...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curl as nobody: %v", err)
		}
		if !strings.HasSuffix(string(out), "\n401") || !strings.Contains(string(out), "refuses the request") {
			t.Errorf("curl as nobody (%q) got:\n%s", hdr, out)
		}
	}
	if got := n.requests(); len(got) != 0 {
		t.Fatalf("another user's requests reached the node's socket: %v", got)
	}
}

// TestKeyedRelayClosesWithRequestsUnderWay: Close ends a stream under way
// and returns once its handler has.
func TestKeyedRelayClosesWithRequestsUnderWay(t *testing.T) {
	n := startNode(t)
	k, key := listenKeyed(t, n.sock)
	req, _ := http.NewRequest(http.MethodGet, k.URL()+"/stream", nil)
	req.Header.Set("X-Api-Key", key)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); line != "data: one\n" {
		t.Fatalf("first event %q", line)
	}
	k.Close()
	close(n.step)
}

// BenchmarkRelay is what a request costs through the bare relay (D48) and
// through the keyed one (D79): the difference is what the key's check and
// carrying HTTP rather than bytes add to each of a turn's requests.
func BenchmarkRelay(b *testing.B) {
	body := strings.Repeat("x", 64<<10) // a claude request is about 77 KB
	for _, keyed := range []bool{false, true} {
		name := "bare"
		if keyed {
			name = "keyed"
		}
		b.Run(name, func(b *testing.B) {
			n := startNode(b)
			close(n.step)
			url, key := "", ""
			if keyed {
				var k *Keyed
				k, key = listenKeyed(b, n.sock)
				url = k.URL()
			} else {
				r, err := Listen(0, n.sock, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { r.Close() })
				url = r.URL()
			}
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(body))
				req.Header.Set("X-Api-Key", key)
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
