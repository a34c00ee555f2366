package messages

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// ListenKind is what a listener listens to (seed 000's listeners).
type ListenKind string

// The kinds of listener: a thread or a ticket feeds a stays session; a branch
// launches a completes session for each check-in on it (CI).
const (
	ListenThread ListenKind = "thread"
	ListenTicket ListenKind = "ticket"
	ListenBranch ListenKind = "branch"
)

// Listener is what a listen or unlisten note says: which workspace's session
// listens, to what kind of record, and what it names: the thread's root post
// hash, the ticket's id, or the branch's name.
type Listener struct {
	Login   string     `json:"login" why:"the note names the agent login of its workspace"`
	Project string     `json:"project" why:"the note names the project of its workspace"`
	Kind    ListenKind `json:"kind" why:"a listener listens to a thread, a ticket or a branch"`
	Names   string     `json:"names" why:"a listener names its thread's root post, its ticket's id or its branch"`
}

// Key is the workspace whose session listens.
func (l *Listener) Key() WorkspaceKey { return WorkspaceKey{Login: l.Login, Project: l.Project} }

func (l *Listener) validate(prefix string) error {
	if err := CheckLogin(strictjson.JoinField(prefix, "login"), l.Login); err != nil {
		return err
	}
	if err := CheckProject(strictjson.JoinField(prefix, "project"), l.Project); err != nil {
		return err
	}
	return checkListened(strictjson.JoinField(prefix, "kind"), strictjson.JoinField(prefix, "names"), l.Kind, l.Names)
}

func checkListened(kindField, namesField string, kind ListenKind, names string) error {
	switch kind {
	case ListenThread:
		return CheckHash(namesField, names)
	case ListenTicket:
		return checkTicketID(namesField, names)
	case ListenBranch:
		return CheckBranch(namesField, names)
	case "":
		return strictjson.FieldErr(kindField, strictjson.ErrMissing, "is empty; it is thread, ticket or branch")
	}
	return strictjson.FieldErr(kindField, strictjson.ErrInvalid, fmt.Sprintf("%s is not a kind of listener (thread, ticket, branch)", strictjson.QuoteShort(string(kind))))
}

// String renders the listener on one line.
func (l Listener) String() string { return l.render("listener", 0) }

func (l *Listener) render(kind NoteKind, version int) string {
	return Render(kind).version(version).Word(l.Login+"/"+l.Project).KV("kind", string(l.Kind)).KV("names", l.Names).String()
}

// ListenNote starts a listener: written by the agent login on the record
// listened to, or for a branch on the session's own record. The session answers
// only what arrives after it.
type ListenNote struct {
	Version int `json:"-" ocx:"version"`
	Listener
}

// UnlistenNote ends the listener its fields name.
type UnlistenNote struct {
	Version int `json:"-" ocx:"version"`
	Listener
}

// NoteKind is "listen".
func (*ListenNote) NoteKind() NoteKind { return KindListen }

func (n *ListenNote) version() int { return n.Version }

// NoteKind is "unlisten".
func (*UnlistenNote) NoteKind() NoteKind { return KindUnlisten }

func (n *UnlistenNote) version() int { return n.Version }

// Validate checks the names and what the listener names, by its kind.
func (n *ListenNote) Validate() error {
	if err := checkVersion(n.Version); err != nil {
		return err
	}
	return n.Listener.validate("")
}

// Validate checks the names and what the listener names, by its kind.
func (n *UnlistenNote) Validate() error {
	if err := checkVersion(n.Version); err != nil {
		return err
	}
	return n.Listener.validate("")
}

// Encode renders the canonical block.
func (n *ListenNote) Encode() ([]byte, error) { return encodeChecked(n) }

// Encode renders the canonical block.
func (n *UnlistenNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *ListenNote) String() string { return n.Listener.render(KindListen, n.Version) }

// String renders the note on one line.
func (n *UnlistenNote) String() string { return n.Listener.render(KindUnlisten, n.Version) }

// UnheardWhy says why a post reached no one.
type UnheardWhy string

// The reasons a post went unheard (seed 002, "note an unheard post").
const (
	// UnheardNoReader: the wake pipe is there but no process holds it open for
	// reading: the session is not listening.
	UnheardNoReader UnheardWhy = "no-reader"
	// UnheardNoPipe: the session listens to the record but has no wake pipe:
	// no session was ever started in the workspace, or it was removed.
	UnheardNoPipe UnheardWhy = "no-pipe"
	// UnheardEnded: the session was woken for the post, and ended (it was
	// killed, stopped, or died) before it answered it: the daemon notes it
	// when it records the session's end (D77).
	UnheardEnded UnheardWhy = "ended"
)

// UnheardNote is what the hook writes, as the session's agent login, on the
// record a person's post is on, when that post reached a session nobody hears.
// One note covers every such post of one run of the hook on one record (a
// burst of a thousand replies gets one note, not a thousand): Post is the
// first of them, and Posts lists them all, in the server's order, when there
// are two or more. Each post is so noted once per session (seed 002).
type UnheardNote struct {
	Version int        `json:"-" ocx:"version"`
	Post    string     `json:"post" why:"an unheard note names the post nobody heard"`
	Posts   []string   `json:"posts,omitempty"`
	Login   string     `json:"login" why:"the note names the agent login of its workspace"`
	Project string     `json:"project" why:"the note names the project of its workspace"`
	Why     UnheardWhy `json:"why" why:"an unheard note says why: no-reader, no-pipe or ended"`
}

// All lists every post the note covers.
func (n *UnheardNote) All() []string {
	if len(n.Posts) > 0 {
		return n.Posts
	}
	return []string{n.Post}
}

// NoteKind is "unheard".
func (*UnheardNote) NoteKind() NoteKind { return kindUnheard }

func (n *UnheardNote) version() int { return n.Version }

// Validate checks every field.
func (n *UnheardNote) Validate() error {
	if err := checkHeader(n.Version, n.Login, n.Project); err != nil {
		return err
	}
	if err := CheckHash("post", n.Post); err != nil {
		return err
	}
	if n.Posts != nil {
		if len(n.Posts) < 2 {
			return strictjson.FieldErr("posts", strictjson.ErrInvalid, "lists every post of a note covering two or more; a note for one post names it in post alone")
		}
		seen := make(map[string]bool, len(n.Posts))
		for i, p := range n.Posts {
			if err := CheckHash(strictjson.IndexField("posts", i), p); err != nil {
				return err
			}
			if seen[p] {
				return strictjson.FieldErr(strictjson.IndexField("posts", i), strictjson.ErrInvalid, "names a post twice")
			}
			seen[p] = true
		}
		if n.Posts[0] != n.Post {
			return strictjson.FieldErr("posts[0]", strictjson.ErrInvalid, "is not post; the list begins with the first post, which post names")
		}
	}
	switch n.Why {
	case UnheardNoReader, UnheardNoPipe, UnheardEnded:
		return nil
	case "":
		return strictjson.FieldErr("why", strictjson.ErrMissing, "is empty; it is no-reader, no-pipe or ended")
	}
	return strictjson.FieldErr("why", strictjson.ErrInvalid, fmt.Sprintf("%s is not why a post went unheard (no-reader, no-pipe, ended)", strictjson.QuoteShort(string(n.Why))))
}

// Encode renders the canonical block.
func (n *UnheardNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *UnheardNote) String() string {
	l := Render(kindUnheard).version(n.Version).Word(n.Login+"/"+n.Project).KV("post", n.Post)
	if n.Posts != nil {
		l.List("posts", n.Posts)
	}
	return l.KV("why", string(n.Why)).String()
}

// branchFilePrefix begins a branch listener's file name in listening/ (D2).
const branchFilePrefix = "branch-"

// ListeningFileName is the name of a listener's file in the session's
// listening/ directory (D2): the thread's root hash, the ticket's id, or
// "branch-" and the branch's name with '%' written %25 and '/' written %2F. A
// branch whose file name would pass NAME_MAX is refused.
func ListeningFileName(kind ListenKind, names string) (string, error) {
	if err := checkListened("kind", "names", kind, names); err != nil {
		return "", strictjson.At("listening file", err)
	}
	if kind != ListenBranch {
		return names, nil
	}
	var b strings.Builder
	b.WriteString(branchFilePrefix)
	for i := 0; i < len(names); i++ {
		switch c := names[i]; c {
		case '%':
			b.WriteString("%25")
		case '/':
			b.WriteString("%2F")
		default:
			b.WriteByte(c)
		}
	}
	if b.Len() > maxFileNameLen {
		return "", &strictjson.FieldError{Where: "listening file", Field: "names", Problem: fmt.Sprintf("branch %s makes a file name of %d bytes; a file name is at most %d", strictjson.QuoteShort(names), b.Len(), maxFileNameLen), Err: strictjson.ErrTooLong}
	}
	return b.String(), nil
}

// ListeningEntry is one file of a session's listening index (D2): what the
// session listens to, and from which of the node's receipts on. After is
// the receipt number (Fossil's rcvid) of the agent's listen note on the node:
// the hook wakes the session only for what the node received after it, so a
// session never answers a record's history (seed 000), and the order is the
// server's, not a time written inside an artifact. After is 0 for the
// session's own record, heard from the start.
type ListeningEntry struct {
	Kind  ListenKind
	Names string
	After int64
}

// ListeningFileContent is what a listener's file holds: its kind, since a
// thread's root hash and a ticket's id cannot be told apart by name (D2),
// then, for a listener a listen note made, a space and the note's receipt
// number; then a newline.
func ListeningFileContent(kind ListenKind, after int64) []byte {
	if after <= 0 {
		return []byte(string(kind) + "\n")
	}
	return []byte(string(kind) + " " + strconv.FormatInt(after, 10) + "\n")
}

// ParseListeningFile is the inverse of ListeningFileName and
// ListeningFileContent: from a file's name and what it holds, the listener's
// kind, what it names and the receipt it hears after. The escape is read
// strictly (only %25 and %2F), and the receipt as canonical decimal, so each
// listener has exactly one file name and one content.
func ParseListeningFile(name string, content []byte) (ListeningEntry, error) {
	const where = "listening file"
	body := string(content)
	if len(content) == 0 || content[len(content)-1] != '\n' || strings.ContainsRune(body[:len(body)-1], '\n') {
		return ListeningEntry{}, &strictjson.FieldError{Where: where, Field: strictjson.QuoteShort(name), Problem: "holds " + strictjson.QuoteShort(body) + "; it holds its kind (thread, ticket or branch), a receipt number when a listen note made it, and a newline", Err: strictjson.ErrSyntax}
	}
	kindText, afterText, hasAfter := strings.Cut(body[:len(body)-1], " ")
	kind := ListenKind(kindText)
	var after int64
	if hasAfter {
		n, err := strconv.ParseInt(afterText, 10, 64)
		if err != nil || n <= 0 || strconv.FormatInt(n, 10) != afterText {
			return ListeningEntry{}, &strictjson.FieldError{Where: where, Field: strictjson.QuoteShort(name), Problem: "holds the receipt " + strictjson.QuoteShort(afterText) + ", not a whole number above 0 written plainly", Err: strictjson.ErrSyntax}
		}
		after = n
	}
	names := name
	if rest, ok := strings.CutPrefix(name, branchFilePrefix); ok {
		if kind != ListenBranch {
			return ListeningEntry{}, &strictjson.FieldError{Where: where, Field: strictjson.QuoteShort(name), Problem: fmt.Sprintf("is named for a branch but holds the kind %s", strictjson.QuoteShort(string(kind))), Err: strictjson.ErrInvalid}
		}
		var b strings.Builder
		for i := 0; i < len(rest); i++ {
			c := rest[i]
			if c == '/' {
				return ListeningEntry{}, &strictjson.FieldError{Where: where, Field: strictjson.QuoteShort(name), Problem: "holds '/', which no file name can", Err: strictjson.ErrInvalid}
			}
			if c != '%' {
				b.WriteByte(c)
				continue
			}
			switch {
			case strings.HasPrefix(rest[i:], "%25"):
				b.WriteByte('%')
			case strings.HasPrefix(rest[i:], "%2F"):
				b.WriteByte('/')
			default:
				return ListeningEntry{}, &strictjson.FieldError{Where: where, Field: strictjson.QuoteShort(name), Problem: fmt.Sprintf("has '%%' at byte %d not followed by 25 or 2F, the only escapes a branch's file name uses", len(branchFilePrefix)+i), Err: strictjson.ErrInvalid}
			}
			i += 2
		}
		names = b.String()
	} else if kind == ListenBranch {
		return ListeningEntry{}, &strictjson.FieldError{Where: where, Field: strictjson.QuoteShort(name), Problem: "holds the kind branch but its name does not start with " + branchFilePrefix, Err: strictjson.ErrInvalid}
	}
	if len(name) > maxFileNameLen {
		return ListeningEntry{}, &strictjson.FieldError{Where: where, Field: strictjson.QuoteShort(name), Problem: fmt.Sprintf("is %d bytes; a file name is at most %d", len(name), maxFileNameLen), Err: strictjson.ErrTooLong}
	}
	if err := checkListened("kind", "names", kind, names); err != nil {
		return ListeningEntry{}, strictjson.At(where, err)
	}
	return ListeningEntry{Kind: kind, Names: names, After: after}, nil
}

// ValidateListeningFileName checks the name of a file of a listening index:
// one ListeningFileName makes (a thread's root hash, a ticket's id, or
// branch- and the branch's name escaped strictly), which is always one
// path component.
func ValidateListeningFileName(name string) error {
	kind := ListenThread
	if strings.HasPrefix(name, branchFilePrefix) {
		kind = ListenBranch
	}
	_, err := ParseListeningFile(name, ListeningFileContent(kind, 0))
	return err
}
