package messages

import (
	"fmt"
	"strings"
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
	Login   string     `json:"login"`
	Project string     `json:"project"`
	Kind    ListenKind `json:"kind"`
	Names   string     `json:"names"`
}

// Key is the workspace whose session listens.
func (l *Listener) Key() WorkspaceKey { return WorkspaceKey{Login: l.Login, Project: l.Project} }

func (l *Listener) validate(prefix string) error {
	if err := checkLogin(joinField(prefix, "login"), l.Login); err != nil {
		return err
	}
	if err := checkProject(joinField(prefix, "project"), l.Project); err != nil {
		return err
	}
	return checkListened(joinField(prefix, "kind"), joinField(prefix, "names"), l.Kind, l.Names)
}

func checkListened(kindField, namesField string, kind ListenKind, names string) error {
	switch kind {
	case ListenThread:
		return checkHash(namesField, names)
	case ListenTicket:
		return checkTicketID(namesField, names)
	case ListenBranch:
		return checkBranch(namesField, names)
	case "":
		return fieldErr(kindField, ErrMissing, "is empty; it is thread, ticket or branch")
	}
	return fieldErr(kindField, ErrInvalid, fmt.Sprintf("%s is not a kind of listener (thread, ticket, branch)", quoteShort(string(kind))))
}

func (l *Listener) decode(o jobj) (err error) {
	if l.Login, l.Project, err = readKey(o); err != nil {
		return err
	}
	k, err := o.str("kind", true, "a listener listens to a thread, a ticket or a branch")
	if err != nil {
		return err
	}
	l.Kind = ListenKind(k)
	l.Names, err = o.str("names", true, "a listener names its thread's root post, its ticket's id or its branch")
	return err
}

// String renders the listener on one line.
func (l Listener) String() string { return l.render("listener", 0) }

func (l *Listener) render(kind NoteKind, version int) string {
	return newLine(kind).version(version).word(l.Login+"/"+l.Project).kv("kind", string(l.Kind)).kv("names", l.Names).String()
}

// ListenNote starts a listener: written by the agent login on the record
// listened to, or for a branch on the session's own record. The session answers
// only what arrives after it.
type ListenNote struct {
	Version int `json:"-"`
	Listener
}

// UnlistenNote ends the listener its fields name.
type UnlistenNote struct {
	Version int `json:"-"`
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

func (n *ListenNote) decode(o jobj) error {
	n.Version = versionOf(o)
	return n.Listener.decode(o)
}

func (n *UnlistenNote) decode(o jobj) error {
	n.Version = versionOf(o)
	return n.Listener.decode(o)
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
)

// UnheardNote is what the hook writes, as the session's agent login, on the
// record a person's post is on, when that post reached a session nobody hears.
type UnheardNote struct {
	Version int        `json:"-"`
	Post    string     `json:"post"`
	Login   string     `json:"login"`
	Project string     `json:"project"`
	Why     UnheardWhy `json:"why"`
}

// NoteKind is "unheard".
func (*UnheardNote) NoteKind() NoteKind { return KindUnheard }

func (n *UnheardNote) version() int { return n.Version }

// Validate checks every field.
func (n *UnheardNote) Validate() error {
	if err := checkHeader(n.Version, n.Login, n.Project); err != nil {
		return err
	}
	if err := checkHash("post", n.Post); err != nil {
		return err
	}
	switch n.Why {
	case UnheardNoReader, UnheardNoPipe:
		return nil
	case "":
		return fieldErr("why", ErrMissing, "is empty; it is no-reader or no-pipe")
	}
	return fieldErr("why", ErrInvalid, fmt.Sprintf("%s is not why a post went unheard (no-reader, no-pipe)", quoteShort(string(n.Why))))
}

func (n *UnheardNote) decode(o jobj) (err error) {
	n.Version = versionOf(o)
	if n.Post, err = o.str("post", true, "an unheard note names the post nobody heard"); err != nil {
		return err
	}
	if n.Login, n.Project, err = readKey(o); err != nil {
		return err
	}
	w, err := o.str("why", true, "an unheard note says why: no-reader or no-pipe")
	n.Why = UnheardWhy(w)
	return err
}

// Encode renders the canonical block.
func (n *UnheardNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *UnheardNote) String() string {
	return newLine(KindUnheard).version(n.Version).word(n.Login+"/"+n.Project).kv("post", n.Post).kv("why", string(n.Why)).String()
}

// BranchFilePrefix begins a branch listener's file name in listening/ (D2).
const BranchFilePrefix = "branch-"

// ListeningFileName is the name of a listener's file in the session's
// listening/ directory (D2): the thread's root hash, the ticket's id, or
// "branch-" and the branch's name with '%' written %25 and '/' written %2F. A
// branch whose file name would pass NAME_MAX is refused.
func ListeningFileName(kind ListenKind, names string) (string, error) {
	if err := checkListened("kind", "names", kind, names); err != nil {
		return "", at("listening file", err)
	}
	if kind != ListenBranch {
		return names, nil
	}
	var b strings.Builder
	b.WriteString(BranchFilePrefix)
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
	if b.Len() > MaxFileNameLen {
		return "", &FieldError{Where: "listening file", Field: "names", Problem: fmt.Sprintf("branch %s makes a file name of %d bytes; a file name is at most %d", quoteShort(names), b.Len(), MaxFileNameLen), Err: ErrTooLong}
	}
	return b.String(), nil
}

// ListeningFileContent is what a listener's file holds: its kind and a newline,
// since a thread's root hash and a ticket's id cannot be told apart by name (D2).
func ListeningFileContent(kind ListenKind) []byte { return []byte(string(kind) + "\n") }

// ParseListeningFile is the inverse of ListeningFileName and
// ListeningFileContent: from a file's name and what it holds, the listener's
// kind and what it names. The escape is read strictly (only %25 and %2F), so
// each listener has exactly one file name.
func ParseListeningFile(name string, content []byte) (ListenKind, string, error) {
	const where = "listening file"
	kind := ListenKind(strings.TrimSuffix(string(content), "\n"))
	if len(content) == 0 || content[len(content)-1] != '\n' || strings.ContainsRune(string(kind), '\n') {
		return "", "", &FieldError{Where: where, Field: quoteShort(name), Problem: "holds " + quoteShort(string(content)) + "; it holds its kind (thread, ticket or branch) and a newline", Err: ErrSyntax}
	}
	names := name
	if rest, ok := strings.CutPrefix(name, BranchFilePrefix); ok {
		if kind != ListenBranch {
			return "", "", &FieldError{Where: where, Field: quoteShort(name), Problem: fmt.Sprintf("is named for a branch but holds the kind %s", quoteShort(string(kind))), Err: ErrInvalid}
		}
		var b strings.Builder
		for i := 0; i < len(rest); i++ {
			c := rest[i]
			if c == '/' {
				return "", "", &FieldError{Where: where, Field: quoteShort(name), Problem: "holds '/', which no file name can", Err: ErrInvalid}
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
				return "", "", &FieldError{Where: where, Field: quoteShort(name), Problem: fmt.Sprintf("has '%%' at byte %d not followed by 25 or 2F, the only escapes a branch's file name uses", len(BranchFilePrefix)+i), Err: ErrInvalid}
			}
			i += 2
		}
		names = b.String()
	} else if kind == ListenBranch {
		return "", "", &FieldError{Where: where, Field: quoteShort(name), Problem: "holds the kind branch but its name does not start with " + BranchFilePrefix, Err: ErrInvalid}
	}
	if len(name) > MaxFileNameLen {
		return "", "", &FieldError{Where: where, Field: quoteShort(name), Problem: fmt.Sprintf("is %d bytes; a file name is at most %d", len(name), MaxFileNameLen), Err: ErrTooLong}
	}
	if err := checkListened("kind", "names", kind, names); err != nil {
		return "", "", at(where, err)
	}
	return kind, names, nil
}
