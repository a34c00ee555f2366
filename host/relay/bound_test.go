package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A connection past the bound of a Unix socket reads its refusal whole,
// even when it sent its request before the refusal was written: closing a
// Unix socket whose request is unread resets it, and the clients read
// ECONNRESET instead (1 in 100 under TestHostileLoad) until refused
// connections were drained before they closed.
func TestBoundedRefusalIsRead(t *testing.T) {
	const why = "at most 1 connection at once"
	sock := fullSocket(t, func(c net.Conn) { io.WriteString(c, why) })

	request := strings.Repeat("r", 16<<10)
	var wg sync.WaitGroup
	got := make([]string, 50)
	for i := range got {
		wg.Go(func() {
			c, err := net.Dial("unix", sock)
			if err != nil {
				got[i] = err.Error()
				return
			}
			defer c.Close()
			if _, err := io.WriteString(c, request); err != nil {
				got[i] = "write: " + err.Error()
				return
			}
			b, err := io.ReadAll(c)
			got[i] = string(b)
			if err != nil {
				got[i] += " (" + err.Error() + ")"
			}
		})
	}
	wg.Wait()
	for i, g := range got {
		if g != why {
			t.Errorf("connection %d past the bound read %q, want %q", i, g, why)
		}
	}
}

// An HTTP client past the bound gets the refusal as the answer to its
// request: written before the request came, Go's client drops it as an
// unsolicited answer ("readLoopPeekFailLocked", 21 of 100 requests under
// TestHostileLoad), so an HTTP refusal awaits the request's head.
func TestBoundedHTTPRefusalAnswersTheRequest(t *testing.T) {
	const why = "at most 1 connection at once"
	sock := fullSocket(t, func(c net.Conn) {
		AwaitRequest(c)
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(why), why)
	})

	var wg sync.WaitGroup
	got := make([]string, 50)
	for i := range got {
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", sock)
			}}}
			resp, err := c.Post("http://s/x", "application/json", strings.NewReader(`{"model": "m"}`))
			if err != nil {
				got[i] = err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got[i] = resp.Status + " " + string(b)
		})
	}
	wg.Wait()
	for i, g := range got {
		if g != "503 Service Unavailable "+why {
			t.Errorf("request %d past the bound: %q", i, g)
		}
	}
	// The answer waits for the request: nothing comes before it (which
	// the client above races to see, and a loaded machine loses).
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("past the bound, before its request, a client read %d bytes (%v), want nothing", n, err)
	}
	c.SetReadDeadline(time.Time{})
	io.WriteString(c, "POST /x HTTP/1.1\r\nHost: s\r\nContent-Length: 0\r\n\r\n")
	if b, _ := io.ReadAll(c); !strings.HasPrefix(string(b), "HTTP/1.1 503") {
		t.Errorf("past the bound, after its request, a client read %q", b)
	}
}

// fullSocket is a Unix socket bounded to one connection, which the test
// holds, so that every connection made to it is refused by refuse; its
// listener and the held connection are closed when the test ends.
func fullSocket(t *testing.T, refuse func(net.Conn)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	inner, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln := Bounded(inner, 1, refuse)
	accepted := make(chan net.Conn)
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	held, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	served := <-accepted
	t.Cleanup(func() {
		served.Close()
		held.Close()
		ln.Close()
		for range accepted {
		}
	})
	return sock
}
