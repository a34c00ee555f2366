package remote

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// counted counts the pokes let through.
type counted struct{ n atomic.Int64 }

func (c *counted) Poked() { c.n.Add(1) }

// TestPokesTakeOnlyTheSecret (D81): a poke without the secret node.json
// holds, or with another, is refused 401 and tells the puller nothing;
// another method is refused 405; Poke, carrying the secret, is answered
// 204 and tells it once; a listener with no secret is not made.
func TestPokesTakeOnlyTheSecret(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	log := slog.New(slog.DiscardHandler)
	if _, err := ListenPokes("127.0.0.1:0", "", &counted{}, log); err == nil || !strings.Contains(err.Error(), "pull.secret") {
		t.Errorf("a listener without a secret: %v, want refused naming pull.secret", err)
	}
	taker := &counted{}
	k, err := ListenPokes("127.0.0.1:0", secret, taker, log)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	url := "http://" + k.Addr() + "/"
	for _, c := range []struct {
		name, method, auth string
		code               int
	}{
		{"no secret", http.MethodPost, "", http.StatusUnauthorized},
		{"another secret", http.MethodPost, "Bearer " + strings.Repeat("f", 32), http.StatusUnauthorized},
		{"the secret, not as a bearer", http.MethodPost, secret, http.StatusUnauthorized},
		{"the secret and more", http.MethodPost, "Bearer " + secret + "0", http.StatusUnauthorized},
		{"a GET", http.MethodGet, "Bearer " + secret, http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequest(c.method, url, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, body, c.code)
		}
		if c.code == http.StatusUnauthorized && !strings.Contains(string(body), "secret") {
			t.Errorf("%s: %q does not say a poke carries the secret", c.name, body)
		}
	}
	if n := taker.n.Load(); n != 0 {
		t.Fatalf("refused pokes told the puller %d times", n)
	}
	if err := poke(context.Background(), Target{URL: url, Secret: secret}); err != nil {
		t.Fatalf("a poke with the secret: %v", err)
	}
	if n := taker.n.Load(); n != 1 {
		t.Errorf("a poke with the secret told the puller %d times, want 1", n)
	}
	if err := poke(context.Background(), Target{URL: url, Secret: strings.Repeat("0", 32)}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a poke with another secret: %v, want an error naming 401", err)
	}
	http.DefaultClient.CloseIdleConnections()
}
