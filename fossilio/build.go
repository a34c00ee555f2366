package fossilio

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MarkdownMimetype is the mimetype OCX writes on posts and ticket comments.
const MarkdownMimetype = "text/x-markdown"

// cardWriter accumulates cards in the order the caller adds them.
type cardWriter struct{ b bytes.Buffer }

func (w *cardWriter) card(letter byte, args ...string) {
	w.b.WriteByte(letter)
	for _, a := range args {
		w.b.WriteByte(' ')
		w.b.WriteString(a)
	}
	w.b.WriteByte('\n')
}

// text writes a W card and its payload.
func (w *cardWriter) text(body string) {
	w.card('W', strconv.Itoa(len(body)))
	w.b.WriteString(body)
	w.b.WriteByte('\n')
}

// finish appends the Z card and returns the artifact.
func (w *cardWriter) finish() []byte {
	sum := md5.Sum(w.b.Bytes())
	w.card('Z', hex.EncodeToString(sum[:]))
	return w.b.Bytes()
}

// PostDraft describes a forum post to write. A new thread has a Title and no
// Root; a reply has Root (the thread's first post) and InReplyTo. An edit
// also names Prev, the version it replaces (a root edit keeps its Title).
type PostDraft struct {
	Date      time.Time
	User      string
	Title     string
	Root      string
	InReplyTo string
	Prev      string
	Mimetype  string // default MarkdownMimetype
	Text      string
}

// Bytes renders the post as an artifact and checks it parses as a forum post.
func (p PostDraft) Bytes() ([]byte, error) {
	if err := checkLogin(p.User); err != nil {
		return nil, err
	}
	if p.Date.IsZero() {
		return nil, fmt.Errorf("%w: post without a date", ErrBadInput)
	}
	if !utf8.ValidString(p.Text) || !utf8.ValidString(p.Title) {
		return nil, fmt.Errorf("%w: post text or title is not UTF-8", ErrBadInput)
	}
	switch {
	case p.Root == "" && p.Title == "":
		return nil, fmt.Errorf("%w: a new thread needs a title", ErrBadInput)
	case p.Root == "" && (p.InReplyTo != "" || p.Prev != ""):
		return nil, fmt.Errorf("%w: a reply or an edit needs its thread's root", ErrBadInput)
	case p.Root != "" && p.InReplyTo == "" && p.Prev == "":
		return nil, fmt.Errorf("%w: a post in a thread replies to a post or edits one", ErrBadInput)
	case p.InReplyTo != "" && p.Title != "":
		return nil, fmt.Errorf("%w: a reply has no title", ErrBadInput)
	}
	for name, h := range map[string]string{"root": p.Root, "in-reply-to": p.InReplyTo, "previous version": p.Prev} {
		if h != "" && !IsHash(h) {
			return nil, fmt.Errorf("%w: %s %q is not a full hash", ErrBadInput, name, h)
		}
	}
	mime := p.Mimetype
	if mime == "" {
		mime = MarkdownMimetype
	}
	var w cardWriter
	w.card('D', formatDate(p.Date))
	if p.Root != "" {
		w.card('G', p.Root)
	}
	if p.Title != "" {
		w.card('H', Fossilize(p.Title))
	}
	if p.InReplyTo != "" {
		w.card('I', p.InReplyTo)
	}
	w.card('N', Fossilize(mime))
	if p.Prev != "" {
		w.card('P', p.Prev)
	}
	w.card('U', Fossilize(p.User))
	w.text(p.Text)
	return checked(w.finish(), TypeForum)
}

// TicketDraft describes a ticket change: set (or, with a "+" name, append
// to) each field. The first change of an id creates the ticket.
type TicketDraft struct {
	Date   time.Time
	User   string
	Ticket string // 40 hex digits; NewTicketID makes one
	Fields []Field
}

// Bytes renders the change as an artifact and checks it parses as a ticket
// change. Fields are sorted by raw name, as Fossil requires.
func (c TicketDraft) Bytes() ([]byte, error) {
	if err := checkLogin(c.User); err != nil {
		return nil, err
	}
	if c.Date.IsZero() {
		return nil, fmt.Errorf("%w: ticket change without a date", ErrBadInput)
	}
	if len(c.Ticket) != sha1Len || !isLowerHex(c.Ticket) {
		return nil, fmt.Errorf("%w: ticket id %q is not 40 lowercase hex digits", ErrBadInput, c.Ticket)
	}
	if len(c.Fields) == 0 {
		return nil, fmt.Errorf("%w: ticket change without fields", ErrBadInput)
	}
	fields := slices.Clone(c.Fields)
	slices.SortFunc(fields, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	for i, f := range fields {
		name := strings.TrimPrefix(f.Name, "+")
		if name == "" || strings.ContainsAny(name, " \t\r\n\v\f\\+") || !utf8.ValidString(name) {
			return nil, fmt.Errorf("%w: ticket field name %q", ErrBadInput, f.Name)
		}
		if i > 0 && fields[i-1].Name == f.Name {
			return nil, fmt.Errorf("%w: ticket field %q given twice", ErrBadInput, f.Name)
		}
		if !utf8.ValidString(f.Value) {
			return nil, fmt.Errorf("%w: ticket field %q is not UTF-8", ErrBadInput, f.Name)
		}
	}
	var w cardWriter
	w.card('D', formatDate(c.Date))
	for _, f := range fields {
		if f.Value == "" {
			w.card('J', f.Name)
		} else {
			w.card('J', f.Name, Fossilize(f.Value))
		}
	}
	w.card('K', c.Ticket)
	w.card('U', Fossilize(c.User))
	return checked(w.finish(), TypeTicket)
}

// NewTicketID returns a fresh random ticket id (40 lowercase hex digits).
func NewTicketID() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WikiDraft describes a version of a wiki page: its whole text. A page's
// first version has no Prev; each later one names the version it replaces
// (WikiPage.Hash). An empty Text deletes the page, as Fossil deletes one.
type WikiDraft struct {
	Date     time.Time
	User     string
	Name     string // the page's name (CheckWikiName)
	Prev     string
	Mimetype string // default MarkdownMimetype
	Text     string
}

// Bytes renders the version as an artifact and checks it parses as a wiki
// page. Like Fossil's own (wiki_cmd_commit), it has no N card when the
// mimetype is Fossil's default, text/x-fossil-wiki.
func (d WikiDraft) Bytes() ([]byte, error) {
	if err := checkLogin(d.User); err != nil {
		return nil, err
	}
	if d.Date.IsZero() {
		return nil, fmt.Errorf("%w: wiki page %q without a date", ErrBadInput, d.Name)
	}
	if err := CheckWikiName(d.Name); err != nil {
		return nil, err
	}
	if !utf8.ValidString(d.Text) {
		return nil, fmt.Errorf("%w: wiki page %q: text is not UTF-8", ErrBadInput, d.Name)
	}
	if d.Prev != "" && !IsHash(d.Prev) {
		return nil, fmt.Errorf("%w: wiki page %q: previous version %q is not a full hash", ErrBadInput, d.Name, d.Prev)
	}
	mime := d.Mimetype
	if mime == "" {
		mime = MarkdownMimetype
	}
	if !utf8.ValidString(mime) || hasControl(mime) {
		return nil, fmt.Errorf("%w: wiki page %q: mimetype %q", ErrBadInput, d.Name, mime)
	}
	var w cardWriter
	w.card('D', formatDate(d.Date))
	w.card('L', Fossilize(d.Name))
	if mime != "text/x-fossil-wiki" {
		w.card('N', Fossilize(mime))
	}
	if d.Prev != "" {
		w.card('P', d.Prev)
	}
	w.card('U', Fossilize(d.User))
	w.text(d.Text)
	return checked(w.finish(), TypeWiki)
}

// ControlDraft describes a tag change: one or more T cards on other artifacts.
type ControlDraft struct {
	Date time.Time
	User string
	Tags []Tag
}

// Bytes renders the tag change as an artifact and checks it parses as a
// control artifact. Tags are sorted by prefixed name, then target.
func (c ControlDraft) Bytes() ([]byte, error) {
	if err := checkLogin(c.User); err != nil {
		return nil, err
	}
	if c.Date.IsZero() {
		return nil, fmt.Errorf("%w: tag change without a date", ErrBadInput)
	}
	if len(c.Tags) == 0 {
		return nil, fmt.Errorf("%w: tag change without tags", ErrBadInput)
	}
	tags := slices.Clone(c.Tags)
	for _, t := range tags {
		if err := checkTagName(t.Name); err != nil {
			return nil, err
		}
		if t.Op != TagAdd && t.Op != tagPropagate && t.Op != TagCancel {
			return nil, fmt.Errorf("%w: tag operation %q", ErrBadInput, t.Op)
		}
		if !IsHash(t.Target) {
			return nil, fmt.Errorf("%w: tag target %q is not a full hash", ErrBadInput, t.Target)
		}
		if !utf8.ValidString(t.Value) || strings.IndexByte(t.Value, 0) >= 0 {
			return nil, fmt.Errorf("%w: tag value is not UTF-8 text", ErrBadInput)
		}
	}
	slices.SortFunc(tags, func(a, b Tag) int {
		if c := strings.Compare(string(a.Op)+a.Name, string(b.Op)+b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Target, b.Target)
	})
	var w cardWriter
	w.card('D', formatDate(c.Date))
	for _, t := range tags {
		if t.Value == "" {
			w.card('T', Fossilize(string(t.Op)+t.Name), t.Target)
		} else {
			w.card('T', Fossilize(string(t.Op)+t.Name), t.Target, Fossilize(t.Value))
		}
	}
	w.card('U', Fossilize(c.User))
	return checked(w.finish(), TypeControl)
}

// checkTagName refuses a raw tag name Fossil would store inert or refuse: an
// empty or all-hex name, one with a control character, or one with the
// prefixes Fossil reserves for wiki pages, tickets and technotes.
func checkTagName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty tag name", ErrBadInput)
	case isHex(name):
		return fmt.Errorf("%w: tag name %q is all hex digits, which Fossil stores but never applies", ErrBadInput, name)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: tag name %q is not UTF-8", ErrBadInput, name)
	case strings.HasPrefix(name, "wiki-"), strings.HasPrefix(name, "tkt-"), strings.HasPrefix(name, "event-"):
		return fmt.Errorf("%w: tag name %q uses a prefix Fossil reserves", ErrBadInput, name)
	}
	for _, r := range name {
		if r < ' ' || r == 0x7f {
			return fmt.Errorf("%w: tag name %q holds a control character", ErrBadInput, name)
		}
	}
	return nil
}

// checked parses an artifact just built, so that nothing malformed is ever
// sent: a server stores a malformed artifact silently as an unknown blob.
func checked(data []byte, want Type) ([]byte, error) {
	a, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("fossilio: built artifact does not parse: %w", err)
	}
	if a.Type != want {
		return nil, fmt.Errorf("%w: built a %s, wanted a %s", ErrMalformed, a.Type, want)
	}
	return data, nil
}
