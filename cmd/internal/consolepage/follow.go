package consolepage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ocx-go/ocx/host/unixhost"
)

// A session's log followed live (issue 44 item 1): the session page asks
// for what its log holds past the byte it showed last, and is answered as
// soon as there is something, or after FollowWait with nothing (a long
// poll: Fossil's /ext reads a CGI's whole reply before it sends any, so a
// stream cannot pass through it). The viewer says where it left off, so a
// reconnect resumes there: no line twice, none lost.
const (
	// followChunk bounds one answer: a viewer behind by more takes it in
	// several.
	followChunk = 64 << 10
	// FollowWait is how long an ask waits for the log to grow: under the
	// wait of ocx-console for the daemon's page, which would otherwise give
	// up on the daemon and have `ocx console` answer instead.
	FollowWait = 8 * time.Second
	// followPoll is how often a waiting ask looks at the log's size.
	followPoll = 200 * time.Millisecond
	// followGather is the least time an ask that finds text at once takes:
	// a busy log is answered in gathers of what it wrote meanwhile, at most
	// four a second a viewer, not an answer for each line; an ask that
	// waited on a quiet log is answered as soon as it grows.
	followGather = 250 * time.Millisecond
	// maxFollowers bounds the asks waiting at once in one process (the
	// daemon's, or one `ocx console`): one past them is answered at once,
	// with what there is, and asks again.
	maxFollowers = 64
)

// followers holds a place for each ask waiting for a log to grow.
var followers = make(chan struct{}, maxFollowers)

// LogChunk is one answer to a viewer following a log.
type LogChunk struct {
	// From is the byte of the log Text begins at, To the one after it:
	// the viewer's next from.
	From int64  `json:"from"`
	To   int64  `json:"to"`
	Text string `json:"text"`
	// Reset says the log was shorter than the viewer's from (it was
	// replaced: a session started again): Text is from its start.
	Reset bool `json:"reset,omitempty"`
}

// sessionLog answers `session/LOGIN/log?from=N`: the session's log from
// byte N on.
func (p *Page) sessionLog(login string) {
	k, ok := p.WorkspaceKey(login)
	if !ok {
		return
	}
	from, err := strconv.ParseInt(p.R.URL.Query().Get("from"), 10, 64)
	if err != nil || from < 0 {
		p.JSONError(http.StatusBadRequest, fmt.Errorf("from: %q is not a byte of the log (0 or more)", p.R.URL.Query().Get("from")))
		return
	}
	paths, err := p.Layout.Workspace(k)
	if err != nil {
		p.JSONError(http.StatusBadRequest, err)
		return
	}
	c, err := p.followLog(paths.Log, from)
	if err != nil {
		p.JSONError(http.StatusInternalServerError, err)
		return
	}
	b, err := json.Marshal(c)
	if err != nil {
		p.JSONError(http.StatusInternalServerError, err)
		return
	}
	p.W.Header().Set("Content-Type", "application/json")
	p.W.Header().Set("Cache-Control", "no-store")
	p.W.Write(b)
}

// followLog reads the log at path (below the agents root, through no
// link, a regular file only) from byte from on, waiting up to FollowWait
// for it to grow when there is nothing yet (FollowLog); one past
// maxFollowers waiting is answered at once.
func (p *Page) followLog(path string, from int64) (LogChunk, error) {
	root, err := p.openRoot()
	if err != nil {
		return LogChunk{}, err
	}
	defer root.Close()
	wait := time.Duration(0)
	select {
	case followers <- struct{}{}:
		defer func() { <-followers }()
		wait = FollowWait
	default: // too many wait: answered at once
	}
	return FollowLog(p.Ctx, root, path, from, wait, p.Refusals.Absent)
}

// FollowLog reads the log at path below root from byte from on: what is
// there, at most followChunk bytes ending at a whole character, or, when
// there is nothing yet, what comes within wait (nothing, when ctx ends or
// wait passes first). No log yet, or one absent says to take as none (a
// link or a pipe an agent put there: Page.logTail's reading), is an empty
// one; a log shorter than from was replaced, and is read from its start
// (Reset).
func FollowLog(ctx context.Context, root *unixhost.Root, path string, from int64, wait time.Duration, absent func(error) bool) (LogChunk, error) {
	began := time.Now()
	deadline := began.Add(wait)
	c := LogChunk{From: from, To: from}
	for first := true; ; first = false {
		b, size, err := root.ReadAt(path, c.From, followChunk)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !absent(err) {
			return LogChunk{}, err
		}
		if size < c.From {
			c.From, c.To, c.Reset = 0, 0, true
			continue
		}
		if n := wholeRunes(b); n > 0 {
			if first && int64(len(b)) < followChunk {
				// Found at once: what the log writes until followGather
				// joins it (kept as first read if the log is gone meanwhile).
				select {
				case <-ctx.Done():
				case <-time.After(time.Until(began.Add(followGather))):
				}
				if more, size, err := root.ReadAt(path, c.From, followChunk); err == nil && size >= c.From && wholeRunes(more) >= n {
					b, n = more, wholeRunes(more)
				}
			}
			c.Text, c.To = strings.ToValidUTF8(string(b[:n]), "\uFFFD"), c.From+int64(n)
			return c, nil
		}
		if c.Reset || !time.Now().Before(deadline) {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, nil
		case <-time.After(followPoll):
		}
	}
}

// wholeRunes is how much of b ends at a whole character: a character cut
// by the chunk's end (or still being written) is left for the next ask,
// at most 3 bytes; bytes that are no character at all pass as they are.
func wholeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
