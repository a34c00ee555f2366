package consolepage

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/ocx-go/ocx/messages/wire"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/remote"
)

// Receipts is the receipt page (D72): for a node on another host, what
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
func (p *Page) Receipts(rest []string) {
	p.AsJSON = true
	proj := p.Config.Projects[p.Project]
	if p.F.Viewer == "" {
		p.Plain(http.StatusForbidden, fmt.Sprintf("the receipt page answers the node users node.json lists for %s (remote_nodes), and each login of itself, and a visitor who has not logged in is none", p.Project))
		return
	}
	_, isNode := proj.RemoteNode(p.F.Viewer)
	var hashes []string
	switch {
	case p.R.Method == http.MethodPost && len(rest) == 0 && p.R.ContentLength == 0:
		p.Plain(http.StatusBadRequest, "the receipt page's POST names no hash: send them one a line, as text/plain (Fossil passes a body only with its Content-Type)")
		return
	case p.R.Method == http.MethodPost && len(rest) == 0:
		var err error
		if hashes, err = readHashes(p.R.Body); err != nil {
			p.Plain(http.StatusBadRequest, "the receipt page's POST: "+err.Error())
			return
		}
	case p.R.Method == http.MethodGet || p.R.Method == http.MethodHead:
		// GET /receipt/HASH[/HASH...], as many as a request line holds
		// (Fossil reads 2,000 bytes of it, and takes only letters,
		// digits, '.', '_', '-' and '/' in an extension's path); GET
		// /receipt, none: the users and the project alone. A GET is
		// rendered by the daemon.
		for _, h := range rest {
			if !fossilio.IsHash(h) {
				p.Plain(http.StatusBadRequest, fmt.Sprintf("receipt/%s: the receipt page names an artifact by its full hash (40 or 64 hex digits), several each after a slash", short(h)))
				return
			}
			hashes = append(hashes, h)
		}
	default:
		p.Plain(http.StatusNotFound, "the receipt page is GET /receipt/HASH[/HASH...], or a POST to /receipt of hashes, one a line")
		return
	}
	if !isNode && (len(hashes) > 0 || p.R.Method == http.MethodPost) {
		p.Plain(http.StatusForbidden, fmt.Sprintf("the receipt page answers of artifacts the node users node.json lists for %s (remote_nodes), and %q is not one: it answers any other login of itself alone (GET /receipt)", p.Project, p.F.Viewer))
		return
	}
	r, err := p.Reads.Repo(p.Project)
	if err != nil {
		p.Plain(http.StatusInternalServerError, err.Error())
		return
	}
	defer r.Close()
	rs, _, err := r.Receipts(p.Ctx, hashes...)
	if err != nil {
		p.Plain(http.StatusInternalServerError, err.Error())
		return
	}
	code, err := r.ProjectCode(p.Ctx)
	if err != nil {
		p.Plain(http.StatusInternalServerError, err.Error())
		return
	}
	viewer := wire.ReceiptViewer{Login: p.F.Viewer}
	if u, err := r.User(p.Ctx, p.F.Viewer); err == nil {
		viewer.Caps = u.Caps
	} else if !errors.Is(err, fossilio.ErrNoSuchUser) {
		p.Plain(http.StatusInternalServerError, err.Error())
		return
	}
	if viewer.Effective, err = r.EffectiveCaps(p.Ctx, p.F.Viewer); err != nil && !errors.Is(err, fossilio.ErrNoSuchUser) {
		p.Plain(http.StatusInternalServerError, err.Error())
		return
	}
	if viewer.Privileged, err = r.Privileged(p.Ctx, p.F.Viewer); err != nil {
		p.Plain(http.StatusInternalServerError, err.Error())
		return
	}
	data, err := remote.Answer(code, rs, viewer).Encode()
	if err != nil {
		p.Plain(http.StatusInternalServerError, err.Error())
		return
	}
	p.W.Header().Set("Content-Type", "application/json")
	p.W.Write(data)
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
