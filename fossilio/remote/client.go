package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/messages/wire"
)

// Client asks the server's node for receipts, logged in to the server as
// the node user by Fossil's own login page, as a person logs in: the
// receipt page answers a node user that the server's node.json lists, and
// Fossil tells the page who is logged in (D72). The login cookie is kept
// for the client's life and made again when the server no longer takes it.
type Client struct {
	// URL is the project's server URL (node.json's url).
	URL string
	// Login is the node user (or, asking of itself, any login);
	// Password gives its password, read when a login is needed. Cookie,
	// when set, is Login's login cookie (NAME=VALUE), used in its place.
	Login    string
	Password func() (string, error)
	Cookie   string
	// HTTP is the HTTP client; nil: one with defaultTimeout.
	HTTP *http.Client

	mu     sync.Mutex
	cookie string
}

// defaultTimeout bounds one request to the server.
const defaultTimeout = 30 * time.Second

// chunk is how many hashes one request names.
const chunk = 500

// ErrRefused: the server answered, and refused (a wrong password, a node
// user its node.json does not list): asking again will not help until
// someone changes the server or the node.
var ErrRefused = errors.New("the server refused")

var defaultHTTP = &http.Client{Timeout: defaultTimeout,
	// The login answers with a redirect that carries the cookie.
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

// Receipts asks the server what it holds of each hash (any number, asked
// a chunk at a time), the users they name and the viewer. The answer has
// one receipt for each hash, in order: anything else is refused, never
// guessed from.
func (c *Client) Receipts(ctx context.Context, hashes []string) (*wire.Receipts, error) {
	out := &wire.Receipts{Ocx: wire.ReceiptsKind, Receipts: []wire.ReceiptAnswer{}, Users: []wire.ServerUser{}}
	named := map[string]bool{}
	for first := true; first || len(hashes) > 0; first = false {
		part := hashes[:min(chunk, len(hashes))]
		hashes = hashes[len(part):]
		a, err := c.receipts(ctx, part)
		if err != nil {
			return nil, err
		}
		if len(a.Receipts) != len(part) {
			return nil, fmt.Errorf("ask %s for receipts: it answered %d receipts for %d hashes", c.URL, len(a.Receipts), len(part))
		}
		out.Receipts = append(out.Receipts, a.Receipts...)
		for _, u := range a.Users {
			if !named[u.Login] {
				named[u.Login] = true
				out.Users = append(out.Users, u)
			}
		}
		out.Project, out.Viewer = a.Project, a.Viewer
	}
	return out, nil
}

// Viewer asks the server what it holds of the client's own login: its
// capabilities there and whether it holds admin or setup (D81). The
// receipt page answers any login that asks of itself alone.
func (c *Client) Viewer(ctx context.Context) (wire.ReceiptViewer, error) {
	a, err := c.Receipts(ctx, nil)
	if err != nil {
		return wire.ReceiptViewer{}, err
	}
	if a.Viewer.Login != c.Login {
		return wire.ReceiptViewer{}, fmt.Errorf("ask %s of %q: the server answered of %q", c.URL, c.Login, a.Viewer.Login)
	}
	return a.Viewer, nil
}

// getMost is how many hashes a GET names: Fossil reads a request line of
// up to 2,000 bytes, and each hash is 65 with its slash.
const getMost = 24

// receipts asks for one chunk, logging in first when it has no cookie,
// and again once when the server no longer takes the one it has. A few
// hashes are asked by GET, which the server's daemon answers (D71); more,
// by a POST, which a console process of its own answers.
func (c *Client) receipts(ctx context.Context, hashes []string) (*wire.Receipts, error) {
	u, err := url.JoinPath(c.URL, "ext/console/receipt")
	if err != nil {
		return nil, fmt.Errorf("the server URL %q: %w", c.URL, err)
	}
	where := "ask " + u + " for receipts"
	method, target, body := http.MethodPost, u, strings.Join(hashes, "\n")+"\n"
	if len(hashes) <= getMost {
		method, target, body = http.MethodGet, strings.Join(append([]string{u}, hashes...), "/"), ""
	}
	for try := 0; ; try++ {
		cookie, err := c.loggedIn(ctx, try > 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		req, err := http.NewRequestWithContext(ctx, method, target, strings.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "text/plain")
		}
		req.Header.Set("Cookie", cookie)
		resp, err := c.http().Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, wire.MaxReceiptsLen+1))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: read the answer: %w", where, err)
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			a, err := wire.DecodeReceipts(body)
			if err != nil {
				return nil, fmt.Errorf("%s: the answer does not read: %w", where, err)
			}
			return a, nil
		case resp.StatusCode == http.StatusForbidden && try == 0 && bytes.Contains(body, []byte("not logged in")):
			continue // the cookie expired: log in again, once
		case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusNotFound:
			return nil, fmt.Errorf("%s: %w: HTTP %s: %s", where, ErrRefused, resp.Status, snippet(body))
		default:
			return nil, fmt.Errorf("%s: HTTP %s: %s", where, resp.Status, snippet(body))
		}
	}
}

// loggedIn is the login cookie, made by logging in when there is none or
// again is set.
func (c *Client) loggedIn(ctx context.Context, again bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cookie != "" && !again {
		return c.cookie, nil
	}
	if c.Cookie != "" {
		if again {
			return "", fmt.Errorf("%w: the server no longer takes %s's login cookie", ErrRefused, c.Login)
		}
		c.cookie = c.Cookie
		return c.cookie, nil
	}
	c.cookie = ""
	if c.Password == nil {
		return "", fmt.Errorf("log in to %s as %s: no password", c.URL, c.Login)
	}
	pw, err := c.Password()
	if err != nil {
		return "", fmt.Errorf("the node user's password: %w", err)
	}
	u, err := url.JoinPath(c.URL, "login")
	if err != nil {
		return "", err
	}
	form := url.Values{"u": {c.Login}, "p": {pw}, "remember": {"1"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.http().Do(req)
	if err != nil {
		return "", fmt.Errorf("log in to %s as %s: %w", c.URL, c.Login, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if strings.HasPrefix(ck.Name, "fossil-") && ck.Value != "" {
			c.cookie = ck.Name + "=" + ck.Value
			return c.cookie, nil
		}
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return "", fmt.Errorf("log in to %s as %s: %w: a wrong password for the node user", c.URL, c.Login, ErrRefused)
	}
	return "", fmt.Errorf("log in to %s as %s: HTTP %s and no login cookie", c.URL, c.Login, resp.Status)
}

// snippet is the start of a body, for an error.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// CheckLogin logs in to the server afresh: an error says the server
// refused the login and its password, or could not be asked.
func (c *Client) CheckLogin(ctx context.Context) error {
	_, err := c.loggedIn(ctx, true)
	return err
}
