package mcp

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// A line that does not end within lineWait of its first byte ends the
// connection, said so on it.
func TestLineWait(t *testing.T) {
	defer func(w time.Duration) { lineWait = w }(lineWait)
	lineWait = 50 * time.Millisecond
	server, client := net.Pipe()
	defer client.Close()
	r := newLineReader(server, nil)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	client.Write([]byte(`{"jsonrpc":`))
	line, err := bufio.NewReader(client).ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":null`) || !strings.Contains(line, "did not end within 50ms") {
		t.Fatalf("%q %v", line, err)
	}
	if err := <-done; err == nil {
		t.Fatal("the read went on")
	}
}
