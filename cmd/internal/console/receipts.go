package console

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/remote"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages/wire"
)

// receipts is the receipt page (D72): for a node on another host, what
// this node's repository says of artifacts (who sent each, where it
// stands in the server's order, its sender's standing) and the users its
// receipts name with their standing, nothing of its other users (D81), in
// JSON. GET /receipt/HASH answers one artifact, GET /receipt/H1/H2/...
// the few a request line holds (the daemon renders a GET, D71); a POST
// to /receipt of hashes, one a line, answers many, in a process of its
// own. It writes nothing, so a POST needs no token: what authorizes it is
// Fossil's own login of a node user that this node's node.json lists for
// the project (remote_nodes), the only viewers it answers of artifacts.
// Any other viewer logged in who asks of no artifact (GET /receipt) is
// answered of itself alone: its capabilities and standing, which a node
// on another host asks as a caller or an agent login it runs (D81).
func (q *request) receipts(rest []string) {
	q.asJSON = true
	p := q.n.Config.Projects[q.project]
	if q.f.Viewer == "" {
		q.plain(http.StatusForbidden, fmt.Sprintf("the receipt page answers the node users node.json lists for %s (remote_nodes), and each login of itself, and a visitor who has not logged in is none", q.project))
		return
	}
	_, isNode := p.RemoteNode(q.f.Viewer)
	var hashes []string
	switch {
	case q.r.Method == http.MethodPost && len(rest) == 0 && q.r.ContentLength == 0:
		q.plain(http.StatusBadRequest, "the receipt page's POST names no hash: send them one a line, as text/plain (Fossil passes a body only with its Content-Type)")
		return
	case q.r.Method == http.MethodPost && len(rest) == 0:
		var err error
		if hashes, err = readHashes(q.r.Body); err != nil {
			q.plain(http.StatusBadRequest, "the receipt page's POST: "+err.Error())
			return
		}
	case q.r.Method == http.MethodGet || q.r.Method == http.MethodHead:
		// GET /receipt/HASH[/HASH...], as many as a request line holds
		// (Fossil reads 2,000 bytes of it, and takes only letters,
		// digits, '.', '_', '-' and '/' in an extension's path); GET
		// /receipt, none: the users and the project alone. A GET is
		// rendered by the daemon.
		for _, h := range rest {
			if !fossilio.IsHash(h) {
				q.plain(http.StatusBadRequest, fmt.Sprintf("receipt/%s: the receipt page names an artifact by its full hash (40 or 64 hex digits), several each after a slash", short(h)))
				return
			}
			hashes = append(hashes, h)
		}
	default:
		q.plain(http.StatusNotFound, "the receipt page is GET /receipt/HASH[/HASH...], or a POST to /receipt of hashes, one a line")
		return
	}
	if !isNode && (len(hashes) > 0 || q.r.Method == http.MethodPost) {
		q.plain(http.StatusForbidden, fmt.Sprintf("the receipt page answers of artifacts the node users node.json lists for %s (remote_nodes), and %q is not one: it answers any other login of itself alone (GET /receipt)", q.project, q.f.Viewer))
		return
	}
	r, err := q.n.OpenRepo(q.project)
	if err != nil {
		q.plain(http.StatusInternalServerError, err.Error())
		return
	}
	defer r.Close()
	rs, _, err := r.Receipts(q.ctx, hashes...)
	if err != nil {
		q.plain(http.StatusInternalServerError, err.Error())
		return
	}
	code, err := r.ProjectCode(q.ctx)
	if err != nil {
		q.plain(http.StatusInternalServerError, err.Error())
		return
	}
	viewer := wire.ReceiptViewer{Login: q.f.Viewer}
	if u, err := r.User(q.ctx, q.f.Viewer); err == nil {
		viewer.Caps = u.Caps
	} else if !errors.Is(err, fossilio.ErrNoSuchUser) {
		q.plain(http.StatusInternalServerError, err.Error())
		return
	}
	if viewer.Effective, err = r.EffectiveCaps(q.ctx, q.f.Viewer); err != nil && !errors.Is(err, fossilio.ErrNoSuchUser) {
		q.plain(http.StatusInternalServerError, err.Error())
		return
	}
	if viewer.Privileged, err = r.Privileged(q.ctx, q.f.Viewer); err != nil {
		q.plain(http.StatusInternalServerError, err.Error())
		return
	}
	data, err := remote.Answer(code, rs, viewer).Encode()
	if err != nil {
		q.plain(http.StatusInternalServerError, err.Error())
		return
	}
	q.w.Header().Set("Content-Type", "application/json")
	q.w.Write(data)
}

// readHashes reads a POST's hashes, one a line, each a full hash, at
// most wire.MaxReceiptsAsked.
func readHashes(body io.Reader) ([]string, error) {
	max := int64(wire.MaxReceiptsAsked * 66)
	sc := bufio.NewScanner(io.LimitReader(body, max+1))
	var out []string
	read := int64(0)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		read += int64(len(sc.Bytes())) + 1
		if line == "" {
			continue
		}
		if !fossilio.IsHash(line) {
			return nil, fmt.Errorf("line %d is %q, not a full hash", len(out)+1, short(line))
		}
		if len(out) == wire.MaxReceiptsAsked {
			return nil, fmt.Errorf("more than %d hashes; ask for them in parts", wire.MaxReceiptsAsked)
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if read > max {
		return nil, fmt.Errorf("the body is longer than %d bytes; ask for at most %d hashes at once", max, wire.MaxReceiptsAsked)
	}
	return out, nil
}

func short(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}
