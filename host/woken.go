package host

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages"
)

// WokenPost is one person's post the hook woke a session for: a line of
// the session's Held/woken, "POST KIND RECORD UNIXNANO" (D77). The daemon
// reads them when it records the session's end: a post the session never
// answered gets an unheard note, why ended.
type WokenPost struct {
	Post string
	// Kind and Record are where the post is: a thread and its root post,
	// or a ticket and its id.
	Kind   messages.ListenKind
	Record string
	// At is when the hook wrote the post's wake line.
	At time.Time
}

// MaxWokenLen bounds the ledger: past it, the hook starts it again (the
// oldest posts are left unchecked, logged).
const MaxWokenLen = 256 << 10

// Line is the post's line in the ledger, with its newline.
func (w WokenPost) Line() []byte {
	return []byte(w.Post + " " + string(w.Kind) + " " + w.Record + " " + strconv.FormatInt(w.At.UnixNano(), 10) + "\n")
}

// ParseWoken reads a ledger: each whole line that reads, in order; bad
// counts the lines that do not (a line a full disk cut, say), which are
// passed over.
func ParseWoken(b []byte) (posts []WokenPost, bad int) {
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		w, err := parseWokenLine(line)
		if err != nil {
			bad++
			continue
		}
		posts = append(posts, w)
	}
	return posts, bad
}

func parseWokenLine(line string) (WokenPost, error) {
	f := strings.Split(line, " ")
	if len(f) != 4 {
		return WokenPost{}, fmt.Errorf("%d fields, want 4", len(f))
	}
	if err := messages.ValidateHash(f[0]); err != nil {
		return WokenPost{}, err
	}
	kind := messages.ListenKind(f[1])
	check := messages.ValidateHash
	switch kind {
	case messages.ListenThread:
	case messages.ListenTicket:
		check = messages.ValidateTicketID
	default:
		return WokenPost{}, fmt.Errorf("kind %q is neither thread nor ticket", f[1])
	}
	if err := check(f[2]); err != nil {
		return WokenPost{}, err
	}
	ns, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || ns <= 0 {
		return WokenPost{}, fmt.Errorf("time %q does not read", f[3])
	}
	return WokenPost{Post: f[0], Kind: kind, Record: f[2], At: time.Unix(0, ns)}, nil
}

// SplitWoken splits a ledger at a session's end: the posts woken before
// it ended (at or before ended), which were that session's, and those
// woken after, a later session's.
func SplitWoken(posts []WokenPost, ended time.Time) (before, after []WokenPost) {
	for _, p := range posts {
		if p.At.After(ended) {
			after = append(after, p)
		} else {
			before = append(before, p)
		}
	}
	return before, after
}
