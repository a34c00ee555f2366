package fossilio_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
)

// TestPushWithLoginCookie (D30): a push that carries a login cookie from
// Fossil's own login page, and no login card, is stored as sent by the
// cookie's user: the repository's receipt names alice even when the
// artifact's U card names the admin. A cookie of another login than the
// client's, a malformed one, and one the server does not know are refused,
// and nothing is stored.
func TestPushWithLoginCookie(t *testing.T) {
	n := newNode(t)
	cookie, err := n.srv.LoginCookie("alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if login, err := fossilio.CookieLogin(cookie); err != nil || login != "alice" {
		t.Fatalf("CookieLogin(%q) = %q %v", cookie, login, err)
	}
	post := func(user, text string) []byte {
		d, err := fossilio.PostDraft{Date: time.Now().UTC(), User: user, Title: "by cookie", Text: text}.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	c := &fossilio.Client{URL: n.srv.URL, Login: "alice", Cookie: cookie, ProjectCode: n.srv.ProjectCode}
	h, err := c.Push(n.ctx, post(n.srv.AdminLogin, "the U card names the admin"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := n.repo.Info(n.ctx, h)
	if err != nil || info.Sender != "alice" {
		t.Fatalf("the receipt of %s names %q (%v), want alice, the cookie's user", h, info.Sender, err)
	}

	for _, bad := range []struct {
		name   string
		client *fossilio.Client
		words  string
	}{
		{"another login's cookie", &fossilio.Client{URL: n.srv.URL, Login: "bob", Cookie: cookie, ProjectCode: n.srv.ProjectCode}, `the cookie is "alice"'s`},
		{"both", &fossilio.Client{URL: n.srv.URL, Login: "alice", Password: "alice-pw", Cookie: cookie, ProjectCode: n.srv.ProjectCode}, "both a password and a cookie"},
		{"malformed", &fossilio.Client{URL: n.srv.URL, Login: "alice", Cookie: "session=abc", ProjectCode: n.srv.ProjectCode}, "not a Fossil login cookie"},
		{"header injection", &fossilio.Client{URL: n.srv.URL, Login: "alice", Cookie: cookie + "\r\nX: y", ProjectCode: n.srv.ProjectCode}, "not a Fossil login cookie"},
	} {
		_, err := bad.client.Push(n.ctx, post("alice", bad.name))
		if !errors.Is(err, fossilio.ErrBadInput) || !strings.Contains(err.Error(), bad.words) {
			t.Errorf("%s: %v, want ErrBadInput saying %q", bad.name, err, bad.words)
		}
	}
	// A cookie of the right shape the server never issued is a refusal of
	// the server's: the push is not authorized, and nothing is stored.
	name, _, _ := strings.Cut(cookie, "=")
	forged := name + "=" + strings.Repeat("AB", 25) + "%2F" + n.srv.ProjectCode[:16] + "%2Falice"
	d := post("alice", "forged")
	_, err = (&fossilio.Client{URL: n.srv.URL, Login: "alice", Cookie: forged, ProjectCode: n.srv.ProjectCode}).Push(n.ctx, d)
	var refused *fossilio.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("a forged cookie: %v, want the server's refusal", err)
	}
	if _, err := n.repo.Info(n.ctx, fossilio.HashOf(d)); err == nil {
		t.Fatalf("the forged cookie's post was stored")
	}
}
