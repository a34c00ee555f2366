package fossilio

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// clientVersion is the version the fetch announces (Fossil 2.21's release
// number): a server answers a client older than 2.0 with an error instead of
// an artifact named by SHA3 (src/xfer.c send_file).
const clientVersion = "22100"

// maxFetchRounds bounds the requests one Fetch makes: the first, then one
// for each layer of delta sources the server chose not to send whole, or for
// what it left out because its reply was full.
const maxFetchRounds = 8

// Fetch reads artifacts from the server by their full hashes, as the
// client's login, over Fossil's sync protocol: a login card, a pull card and
// one gimme card per hash, in one request. It returns their bytes in the
// order given. Each artifact is checked against its hash before it is
// returned. A hash the server does not send (it has no such artifact, or
// holds it private until a moderator approves it) is a *HashError
// (ErrNotFound); error cards are a *RefusedError with the server's words.
//
// The server may send an artifact as a delta against another (a check-in
// against its parent, say); the source is then asked for too, in a request
// of its own, a bounded number of times.
func (c *Client) Fetch(ctx context.Context, hashes ...string) ([][]byte, error) {
	u, err := c.serverURL()
	if err != nil {
		return nil, err
	}
	if err := c.checkFetch(u, hashes); err != nil {
		return nil, err
	}
	got := make(map[string][]byte, len(hashes))
	deltas := make(map[string]delta)
	want := uniq(hashes)
	for round := 0; len(want) > 0; round++ {
		if round == maxFetchRounds {
			return nil, fmt.Errorf("fetch from %s: %w: still missing %s after %d requests (a delta chain too long?)", u, ErrMalformed, strings.Join(want, ", "), round)
		}
		cards, err := c.fetchOnce(ctx, u, want)
		if err != nil {
			return nil, err
		}
		var next []string
		for _, h := range want {
			fc, ok := cards.files[h]
			switch {
			case !ok && cards.igot[h]:
				// Sent as "I have it" alone: the reply was full. Ask again.
				next = append(next, h)
			case !ok:
				return nil, &HashError{Op: "fetch", Repo: u, Hash: h, Err: ErrNotFound}
			case fc.source == "":
				got[h] = fc.data
			default:
				deltas[h] = delta{source: fc.source, data: fc.data}
				if _, have := got[fc.source]; !have && deltas[fc.source].data == nil {
					next = append(next, fc.source)
				}
			}
		}
		want = uniq(next)
	}
	out := make([][]byte, len(hashes))
	for i, h := range hashes {
		b, err := resolveDelta(u, got, deltas, h, 0)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// checkFetch refuses, before any request to u, a fetch that cannot be
// made: no credentials, a project code that is no hash, no hash or a bad
// one.
func (c *Client) checkFetch(u string, hashes []string) error {
	if err := c.checkCredentials("fetch from " + u); err != nil {
		return err
	}
	if !IsHash(strings.ToLower(c.ProjectCode)) {
		return fmt.Errorf("fetch from %s: %w: project code %q is not a hash", u, ErrBadInput, c.ProjectCode)
	}
	if len(hashes) == 0 {
		return fmt.Errorf("fetch from %s: %w: no hash to fetch", u, ErrBadInput)
	}
	for _, h := range hashes {
		if !IsHash(h) {
			return &HashError{Op: "fetch", Repo: u, Hash: h, Err: ErrBadHash}
		}
	}
	return nil
}

// resolveDelta is the content of h, fetched from u: whole in got, or a
// delta in deltas applied on its source, resolved the same way, and kept
// in got. Deltas are applied from their sources up; every source is in got
// or deltas by now, and a cycle is refused rather than followed forever.
func resolveDelta(u string, got map[string][]byte, deltas map[string]delta, h string, depth int) ([]byte, error) {
	if b, ok := got[h]; ok {
		return b, nil
	}
	d, ok := deltas[h]
	if !ok || depth > maxFetchRounds {
		return nil, fmt.Errorf("fetch %s from %s: %w: its delta source %s never came whole", h, u, ErrMalformed, d.source)
	}
	src, err := resolveDelta(u, got, deltas, d.source, depth+1)
	if err != nil {
		return nil, err
	}
	b, err := ApplyDelta(src, d.data)
	if err != nil {
		return nil, fmt.Errorf("fetch %s from %s: apply the delta against %s: %w", h, u, d.source, err)
	}
	if !hashMatches(h, b) {
		return nil, fmt.Errorf("fetch %s from %s: %w: the delta against %s gives content of another hash", h, u, ErrMalformed, d.source)
	}
	got[h] = b
	return b, nil
}

type delta struct {
	source string
	data   []byte
}

func uniq(hs []string) []string {
	seen := make(map[string]bool, len(hs))
	out := hs[:0:0]
	for _, h := range hs {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// fetchOnce makes one request for the artifacts want and reads the reply.
func (c *Client) fetchOnce(ctx context.Context, u string, want []string) (*fetchReply, error) {
	var payload bytes.Buffer
	payload.WriteString("pragma client-version " + clientVersion + "\n")
	payload.WriteString("pull " + strings.Repeat("0", sha1Len) + " " + c.ProjectCode + "\n")
	for _, h := range want {
		payload.WriteString("gimme " + h + "\n")
	}
	reply, err := c.exchange(ctx, "fetch", u, c.signed(payload.String()))
	if err != nil {
		return nil, err
	}
	r, err := parseFetchReply([]byte(reply))
	if err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", u, err)
	}
	if len(r.reasons) > 0 {
		return nil, &RefusedError{Op: "fetch", URL: u, Login: c.Login, Reason: strings.Join(r.reasons, "; ")}
	}
	return r, nil
}

// fetchReply is what a server's answer to a pull with gimme cards says.
type fetchReply struct {
	files   map[string]fileCard
	igot    map[string]bool
	reasons []string // error and message cards, decoded
}

type fileCard struct {
	source string // the delta's source, "" for a whole artifact
	data   []byte
}

// parseFetchReply reads a sync reply card by card. A file card's content is
// exactly the size it says and is followed directly by the next card, with no
// newline of its own. A whole artifact is checked against its hash here; a
// delta once applied. The reply must end with the server's timestamp line.
func parseFetchReply(reply []byte) (*fetchReply, error) {
	r := &fetchReply{files: map[string]fileCard{}, igot: map[string]bool{}}
	closed := false
	for len(reply) > 0 {
		line, rest, ok := bytes.Cut(reply, []byte("\n"))
		if !ok {
			return nil, fmt.Errorf("%w: the reply ends inside a card: %s", ErrMalformed, snippet(reply))
		}
		reply = rest
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "file":
			var fc fileCard
			var hash, size string
			switch len(f) {
			case 3:
				hash, size = f[1], f[2]
			case 4:
				hash, fc.source, size = f[1], f[2], f[3]
				if !IsHash(fc.source) {
					return nil, fmt.Errorf("%w: a file card names the delta source %q, not a hash", ErrMalformed, fc.source)
				}
			default:
				return nil, fmt.Errorf("%w: a file card of %d arguments: %q", ErrMalformed, len(f)-1, string(line))
			}
			if !IsHash(hash) {
				return nil, fmt.Errorf("%w: a file card names %q, not a hash", ErrMalformed, hash)
			}
			n, err := strconv.Atoi(size)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: file %s: size %q is not a count of bytes", ErrMalformed, hash, size)
			}
			if n > len(reply) {
				return nil, fmt.Errorf("%w: file %s says %d bytes, but the reply holds %d more", ErrMalformed, hash, n, len(reply))
			}
			fc.data = bytes.Clone(reply[:n])
			reply = reply[n:]
			if fc.source == "" && !hashMatches(hash, fc.data) {
				return nil, fmt.Errorf("%w: file %s: the content the server sent is not of this hash", ErrMalformed, hash)
			}
			r.files[hash] = fc
		case "igot":
			if len(f) >= 2 {
				r.igot[f[1]] = true
			}
		case "error", "message":
			if len(f) >= 2 {
				r.reasons = append(r.reasons, Defossilize(f[1]))
			} else {
				r.reasons = append(r.reasons, f[0]+" without words")
			}
		case "#":
			if len(f) >= 2 && f[1] == "timestamp" {
				closed = true
			}
		}
		// Other cards (pragma, push, cookie, uvigot, ...) say nothing a
		// fetch needs.
	}
	if !closed && len(r.reasons) == 0 {
		return nil, fmt.Errorf("%w: the reply did not finish with its timestamp line", ErrMalformed)
	}
	return r, nil
}
