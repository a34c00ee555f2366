package fossilio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrPhantom: the server stored the artifact but lacks one it names (it
// answered with gimme cards). Until that one arrives, the server embargoes
// its after-receive hooks (docs/fossil.md).
var ErrPhantom = errors.New("fossilio: the server lacks an artifact the pushed one names")

// DefaultHTTPTimeout bounds one sync request.
const DefaultHTTPTimeout = time.Minute

// Client writes artifacts to a Fossil server as one user, over Fossil's sync
// protocol: one HTTP request per artifact, with a login card, so that the
// server records that user as the sender (its receipt).
type Client struct {
	// URL is the server's URL, without credentials (http://127.0.0.1:8080/).
	URL string
	// Login and Password authenticate the write. Password is the cleartext
	// password or the 40-hex shared secret (Fossil's client takes exactly 40
	// hex digits as the secret).
	Login, Password string
	// Cookie, in place of Password, is a Fossil login cookie of Login's
	// (NAME=VALUE, as a browser sends it): the request carries it and no
	// login card, and the server authenticates the write by it as it does
	// a web page's (D30). The console writes as its viewer this way.
	Cookie string
	// ProjectCode is the repository's project code (Repo.ProjectCode).
	ProjectCode string
	// Backoffice, when not nil, runs after each successful push. On the
	// node, set it to run `fossil backoffice --nolease REPO` (Admin.Backoffice)
	// so the hook sees the write at once: the server's own backoffice holds a
	// 60 s lease, and a second push within a minute would wait for it.
	Backoffice func(context.Context) error
	// Now is the clock for D cards; default time.Now.
	Now func() time.Time
	// HTTP is the HTTP client; default one with DefaultHTTPTimeout that keeps
	// no idle connection, so nothing lingers after a write.
	HTTP *http.Client
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

var defaultHTTP = &http.Client{
	Timeout:   DefaultHTTPTimeout,
	Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
}

// sharedSecret is what the server keeps as user.pw: SHA1 of
// "PROJECTCODE/LOGIN/PASSWORD" (src/sha1.c sha1_shared_secret).
func sharedSecret(projectCode, login, password string) string {
	if len(password) == sha1Len && isLowerHex(password) {
		return password
	}
	return sha1Hex(projectCode + "/" + login + "/" + password)
}

// SharedSecret returns the 40-hex shared secret for a login's password,
// which a client may use instead of the cleartext password.
func SharedSecret(projectCode, login, password string) string {
	return sharedSecret(projectCode, login, password)
}

// Push sends one complete artifact and returns its hash. It checks the
// artifact parses first, since a server stores a malformed one silently. A
// refusal (wrong password, no capability i, wrong project) is a
// *RefusedError carrying the server's reason.
func (c *Client) Push(ctx context.Context, artifact []byte) (string, error) {
	hashes, err := c.PushAll(ctx, artifact)
	if len(hashes) == 1 {
		return hashes[0], err
	}
	return "", err
}

// PushAll sends several complete artifacts in one sync request and returns
// their hashes, in order. Each is checked first; if one does not parse,
// nothing is sent.
func (c *Client) PushAll(ctx context.Context, artifacts ...[]byte) ([]string, error) {
	for i, a := range artifacts {
		if _, err := Parse(a); err != nil {
			return nil, fmt.Errorf("push artifact %d: %w", i, err)
		}
	}
	return c.push(ctx, artifacts...)
}

// PushRaw sends artifacts as they are, named by their SHA3-256: a
// check-in's files, which are content and no manifest, with the manifest
// after them. A caller copying from a clone checks each name first.
func (c *Client) PushRaw(ctx context.Context, artifacts ...[]byte) ([]string, error) {
	return c.push(ctx, artifacts...)
}

func (c *Client) push(ctx context.Context, artifacts ...[]byte) ([]string, error) {
	u, err := c.serverURL()
	if err != nil {
		return nil, err
	}
	if err := c.checkCredentials("push to " + u); err != nil {
		return nil, err
	}
	if !IsHash(strings.ToLower(c.ProjectCode)) {
		return nil, fmt.Errorf("push to %s: %w: project code %q is not a hash", u, ErrBadInput, c.ProjectCode)
	}
	if len(artifacts) == 0 {
		return nil, fmt.Errorf("push to %s: %w: nothing to push", u, ErrBadInput)
	}
	var payload bytes.Buffer
	payload.WriteString("push " + strings.Repeat("0", sha1Len) + " " + c.ProjectCode + "\n")
	hashes := make([]string, len(artifacts))
	for i, a := range artifacts {
		hashes[i] = HashOf(a)
		payload.WriteString("file " + hashes[i] + " " + strconv.Itoa(len(a)) + "\n")
		payload.Write(a)
	}
	reply, err := c.exchange(ctx, "push", u, c.signed(payload.String()))
	if err != nil {
		return nil, err
	}
	if err := c.checkReply(u, reply, artifacts); err != nil {
		return hashes, err
	}
	if c.Backoffice != nil {
		if err := c.Backoffice(ctx); err != nil {
			return hashes, fmt.Errorf("push to %s: stored, but the backoffice failed: %w", u, err)
		}
	}
	return hashes, nil
}

// checkCredentials refuses a client that cannot authenticate: a login
// that is not one, neither a password nor a cookie, or a cookie that is
// another login's (the write would be recorded as the cookie's user).
func (c *Client) checkCredentials(where string) error {
	if err := checkLogin(c.Login); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	switch {
	case c.Cookie != "" && c.Password != "":
		return fmt.Errorf("%s as %q: %w: both a password and a cookie", where, c.Login, ErrBadInput)
	case c.Cookie != "":
		login, err := CookieLogin(c.Cookie)
		if err != nil {
			return fmt.Errorf("%s as %q: %w", where, c.Login, err)
		}
		if login != c.Login {
			return fmt.Errorf("%s as %q: %w: the cookie is %q's", where, c.Login, ErrBadInput, login)
		}
	case c.Password == "":
		return fmt.Errorf("%s as %q: %w: no password", where, c.Login, ErrBadInput)
	}
	return nil
}

// signed is a sync message: the payload after a login card whose nonce is
// the hash of the payload, so the signature covers the whole message; with
// a cookie, the payload alone (the cookie rides in the request's header).
func (c *Client) signed(payload string) []byte {
	if c.Cookie != "" {
		return []byte(payload)
	}
	nonce := sha1Hex(payload)
	sig := sha1Hex(nonce + sharedSecret(c.ProjectCode, c.Login, c.Password))
	return []byte("login " + Fossilize(c.Login) + " " + nonce + " " + sig + "\n" + payload)
}

// CookieLogin is the login a Fossil login cookie (NAME=VALUE) names: its
// value is HASH/PROJECT/LOGIN, URL-encoded as Fossil sets it
// (src/login.c login_check_credentials).
func CookieLogin(cookie string) (string, error) {
	name, value, ok := strings.Cut(cookie, "=")
	if !ok || !strings.HasPrefix(name, "fossil-") || strings.ContainsAny(cookie, "\r\n;") {
		return "", fmt.Errorf("%w: %q is not a Fossil login cookie (fossil-CODE=VALUE)", ErrBadInput, shortCookie(cookie))
	}
	v, err := url.PathUnescape(value)
	if err != nil {
		return "", fmt.Errorf("%w: the login cookie's value does not decode: %v", ErrBadInput, err)
	}
	parts := strings.Split(v, "/")
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return "", fmt.Errorf("%w: the login cookie's value is not HASH/PROJECT/LOGIN", ErrBadInput)
	}
	if err := checkLogin(parts[2]); err != nil {
		return "", fmt.Errorf("the login cookie's login: %w", err)
	}
	return parts[2], nil
}

// shortCookie shows where a malformed cookie goes wrong without its secret.
func shortCookie(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// one returns the single hash of a one-artifact push.
func one(hashes []string, err error) (string, error) {
	if len(hashes) == 1 {
		return hashes[0], err
	}
	return "", err
}

func (c *Client) serverURL() (string, error) {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: server URL %q is not an http(s) URL", ErrBadInput, c.URL)
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: server URL holds credentials; give them in Client.Login and Password", ErrBadInput)
	}
	return u.String(), nil
}

// exchange posts one sync message for op ("push", "fetch") and returns the
// reply. It sends it uncompressed (application/x-fossil-uncompressed, which
// Fossil's server accepts and answers in kind): an artifact is small, and
// compressing costs both sides more than it saves on the wire.
func (c *Client) exchange(ctx context.Context, op, u string, msg []byte) (string, error) {
	where := op + " to " + u
	if op != "push" {
		where = op + " from " + u
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(msg))
	if err != nil {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	req.Header.Set("Content-Type", syncContentType)
	if c.Cookie != "" {
		req.Header.Set("Cookie", c.Cookie)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", fmt.Errorf("%s: read reply: %w", where, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", &RefusedError{Op: op, URL: u, Login: c.Login,
			Reason: fmt.Sprintf("HTTP %s: %s", resp.Status, snippet(data))}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, syncContentType) {
		return "", fmt.Errorf("%s: reply is %q, not a sync reply: %s", where, ct, snippet(data))
	}
	return string(data), nil
}

const syncContentType = "application/x-fossil-uncompressed"

// checkReply reads a sync reply: error and message cards are refusals, gimme
// cards name artifacts the server lacks, and the closing timestamp line
// counts the errors. A gimme card for an artifact none of the pushed ones
// names is the server's older phantom, which it asks every push for: not
// this write's fault, so not its error.
func (c *Client) checkReply(u, reply string, pushed [][]byte) error {
	var reasons, missing []string
	closed := false
	for _, line := range strings.Split(reply, "\n") {
		switch {
		case strings.HasPrefix(line, "error "):
			reasons = append(reasons, Defossilize(strings.TrimPrefix(line, "error ")))
		case strings.HasPrefix(line, "message "):
			reasons = append(reasons, Defossilize(strings.TrimPrefix(line, "message ")))
		case strings.HasPrefix(line, "gimme "):
			h := strings.TrimSpace(strings.TrimPrefix(line, "gimme "))
			if names(pushed, h) {
				missing = append(missing, h)
			}
		case strings.HasPrefix(line, "# timestamp "):
			closed = true
			if f := strings.Fields(line); len(f) >= 5 && f[3] == "errors" && f[4] != "0" && len(reasons) == 0 {
				reasons = append(reasons, "the server counted "+f[4]+" errors")
			}
		}
	}
	if len(reasons) > 0 {
		return &RefusedError{Op: "push", URL: u, Login: c.Login, Reason: strings.Join(reasons, "; ")}
	}
	if !closed {
		return fmt.Errorf("push to %s: the reply did not finish: %s", u, snippet([]byte(reply)))
	}
	if len(missing) > 0 {
		return fmt.Errorf("push to %s: %w: %s", u, ErrPhantom, strings.Join(missing, ", "))
	}
	return nil
}

// names says whether one of the artifacts names the hash h (a tag's target,
// a post's thread or parent).
func names(artifacts [][]byte, h string) bool {
	if !IsHash(h) {
		return false
	}
	for _, a := range artifacts {
		if bytes.Contains(a, []byte(h)) {
			return true
		}
	}
	return false
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// NewThread writes the first post of a new forum thread and returns its hash.
func (c *Client) NewThread(ctx context.Context, title, markdown string) (string, error) {
	data, err := PostDraft{Date: c.now(), User: c.Login, Title: title, Text: markdown}.Bytes()
	if err != nil {
		return "", fmt.Errorf("new thread: %w", err)
	}
	return one(c.push(ctx, data))
}

// Reply writes a reply to the post to, in the thread whose first post is
// root (root and to are equal when replying to the first post).
func (c *Client) Reply(ctx context.Context, root, to, markdown string) (string, error) {
	data, err := PostDraft{Date: c.now(), User: c.Login, Root: root, InReplyTo: to, Text: markdown}.Bytes()
	if err != nil {
		return "", fmt.Errorf("reply to %s: %w", to, err)
	}
	return one(c.push(ctx, data))
}

// Edit writes a new version of a post: prev is the version it replaces. An
// edit of a thread's first post keeps a title; an edit of a reply names the
// post it replied to. An empty text deletes the post, as Fossil does.
func (c *Client) Edit(ctx context.Context, p ForumPost, markdown string) (string, error) {
	d := PostDraft{Date: c.now(), User: c.Login, Root: p.Root, Prev: p.Hash, InReplyTo: p.InReplyTo, Text: markdown}
	if p.InReplyTo == "" {
		d.Title = p.Title
		if d.Title == "" {
			d.Title = "(untitled)"
		}
	}
	data, err := d.Bytes()
	if err != nil {
		return "", fmt.Errorf("edit %s: %w", p.Hash, err)
	}
	return one(c.push(ctx, data))
}

// NewTicket creates a ticket with the given fields and returns the change's
// hash and the new ticket's id.
func (c *Client) NewTicket(ctx context.Context, fields ...Field) (hash, ticket string, err error) {
	ticket = NewTicketID()
	hash, err = c.ChangeTicket(ctx, ticket, fields...)
	return hash, ticket, err
}

// ChangeTicket writes a change to a ticket: each field is set, or appended
// to when its name starts with "+" (e.g. "+icomment").
func (c *Client) ChangeTicket(ctx context.Context, ticket string, fields ...Field) (string, error) {
	data, err := TicketDraft{Date: c.now(), User: c.Login, Ticket: ticket, Fields: fields}.Bytes()
	if err != nil {
		return "", fmt.Errorf("change ticket %s: %w", ticket, err)
	}
	return one(c.push(ctx, data))
}

// Tag adds a tag with a raw name (e.g. "ci", "audited"; never all hex) and a
// value to a check-in, as Fossil's `tag add --raw` does.
func (c *Client) Tag(ctx context.Context, checkin, name, value string) (string, error) {
	data, err := ControlDraft{Date: c.now(), User: c.Login, Tags: []Tag{{Op: TagAdd, Name: name, Target: checkin, Value: value}}}.Bytes()
	if err != nil {
		return "", fmt.Errorf("tag %s: %w", checkin, err)
	}
	return one(c.push(ctx, data))
}
