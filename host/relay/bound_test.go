package relay

import (
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A connection past the bound of a Unix socket reads its refusal whole,
// even when it sent its request before the refusal was written: closing a
// Unix socket whose request is unread resets it, and the clients read
// ECONNRESET instead (1 in 100 under TestHostileLoad) until refused
// connections were drained before they closed.
func TestBoundedRefusalIsRead(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	inner, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	const why = "at most 1 connection at once"
	ln := Bounded(inner, 1, func(c net.Conn) { io.WriteString(c, why) })
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
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
	served.Close()
	held.Close()
	ln.Close()
	for range accepted {
	}
}
