package fossilio_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
)

// TestUnreachable: a write that found no server, or a server that failed
// (5xx), is the server's absence, to be waited out; one the server refused
// is not (D72).
func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/"
	ln.Close()
	c := &fossilio.Client{URL: closed, Login: "alice", Password: "pw", ProjectCode: "0123456789abcdef0123456789abcdef01234567"}
	_, err = c.NewThread(context.Background(), "t", "x")
	if err == nil || !fossilio.Unreachable(err) {
		t.Errorf("a push to a closed port: %v, unreachable %v; want true", err, fossilio.Unreachable(err))
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusBadGateway)
	}))
	defer down.Close()
	c.URL = down.URL + "/"
	_, err = c.NewThread(context.Background(), "t", "x")
	if err == nil || !fossilio.Unreachable(err) {
		t.Errorf("a push answered 502: %v, unreachable %v; want true", err, fossilio.Unreachable(err))
	}
	refused := &fossilio.RefusedError{Op: "push", URL: closed, Login: "alice", Reason: "login failed"}
	if fossilio.Unreachable(fmt.Errorf("write: %w", refused)) || fossilio.Unreachable(nil) || fossilio.Unreachable(errors.New("bad artifact")) {
		t.Error("a refusal, no error or an artifact's fault taken for the server's absence")
	}
}
