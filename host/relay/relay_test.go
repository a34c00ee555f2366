package relay

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A unix socket serving HTTP, reached through the relay by an HTTP
// client that knows only TCP: requests and replies carried whole, a
// stream carried as it comes, many connections at once.
func TestRelayCarriesHTTPAndStreams(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "model.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	step := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			<-step // the client has the first event before the second is written
			fmt.Fprint(w, "data: two\n\n")
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	})}
	go srv.Serve(ln)
	defer srv.Close()

	r, err := Listen(0, sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !strings.HasPrefix(r.Addr(), "127.0.0.1:") {
		t.Fatalf("the relay listens on %s", r.Addr())
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Post(r.URL()+"/v1/messages", "text/plain", strings.NewReader(fmt.Sprint(i)))
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("POST /v1/messages %d", i); string(b) != want {
				t.Errorf("got %q, want %q", b, want)
			}
		}()
	}
	wg.Wait()
	resp, err := c.Get(r.URL() + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: one\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(step)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: two\n\n" {
		t.Fatalf("the rest of the stream %q", rest)
	}
}

// A socket nobody serves: the connection is closed, not held.
func TestRelayWithoutASocket(t *testing.T) {
	r, err := Listen(0, filepath.Join(t.TempDir(), "none.sock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = http.Get(r.URL() + "/")
	if err == nil {
		t.Fatal("a request through a relay to no socket was answered")
	}
}
