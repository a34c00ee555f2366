package messages

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// Bounds on names and values. They are part of protocol v1: a writer that needs
// more is refused, never truncated.
const (
	// MaxNameLen bounds a login and a project (decision D1).
	MaxNameLen = 64
	// maxBranchLen bounds a branch name.
	maxBranchLen = 255
	// MaxPathLen bounds an absolute path (PATH_MAX less its NUL).
	MaxPathLen = 4095
	// maxFileNameLen bounds one file name (NAME_MAX), such as a listening file.
	maxFileNameLen = 255
	// MaxTextLen bounds a note's free text (a reason, a summary, a note in words).
	MaxTextLen = 8192
	// MaxShortLen bounds a short one-line value: a model, a release, an argument.
	MaxShortLen = 1024
)

// pseudoUsers are Fossil's built-in capability holders; none may be an agent's
// login (D1). Compared without regard to case, so "Nobody" is refused too.
var pseudoUsers = []string{"nobody", "anonymous", "reader", "developer"}

// reservedRootName says whether s is the name of one of the agents root's own
// files, which no login may take: AGENTS/LOGIN would collide with them.
func reservedRootName(s string) bool {
	return s == "ocxd" || strings.HasPrefix(s, "ocxd.") || s == "node.json" ||
		s == "hook" || strings.HasPrefix(s, "hook.")
}

// ValidateLogin checks a login name per decision D1.
func ValidateLogin(s string) error { return CheckLogin("login", s) }

// ValidateProject checks a project name per decision D1.
func ValidateProject(s string) error { return CheckProject("project", s) }

func CheckLogin(field, s string) error {
	if err := checkName(field, "login", s); err != nil {
		return err
	}
	for _, p := range pseudoUsers {
		if strings.EqualFold(s, p) {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%q is one of Fossil's pseudo-users (nobody, anonymous, reader, developer), never an agent's login", s))
		}
	}
	// AGENTS/LOGIN would collide with the agents root's own files: the
	// daemon's, node.json, and the hook's log and marks (decisions D2, D16, D19).
	if reservedRootName(s) {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%q names one of the agents root's own files (ocxd, ocxd.*, node.json, hook, hook.*), never a login", s))
	}
	return nil
}

// CheckProject checks a project name, naming field in the error.
func CheckProject(field, s string) error { return checkName(field, "project", s) }

// checkName applies D1's shape: [A-Za-z0-9][A-Za-z0-9._-]*, at most MaxNameLen
// bytes. Because a name cannot start with '.', it can never be "." or "..", and
// because '/' is not allowed it is always one path component.
func checkName(field, what, s string) error {
	if s == "" {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; a "+what+" is a name")
	}
	if len(s) > MaxNameLen {
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("is %d bytes; a %s is at most %d", len(s), what, MaxNameLen))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		case i == 0 && (c == '.' || c == '_' || c == '-'):
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%q is not a %s: it must start with a letter or digit, not %q", s, what, rune(c)))
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%q is not a %s: %s is not allowed (letters, digits, '.', '_' and '-' are)", s, what, strconv.QuoteRune(r)))
		}
	}
	return nil
}

// WorkspaceKey names a workspace: an agent login and a project, written
// LOGIN/PROJECT (decision D1).
type WorkspaceKey struct {
	Login   string
	Project string
}

// ParseWorkspaceKey reads LOGIN/PROJECT and validates both names.
func ParseWorkspaceKey(s string) (WorkspaceKey, error) {
	login, project, ok := strings.Cut(s, "/")
	if !ok {
		return WorkspaceKey{}, &strictjson.FieldError{Where: "workspace key", Problem: strictjson.QuoteShort(s) + " is not LOGIN/PROJECT: it has no '/'", Err: strictjson.ErrSyntax}
	}
	k := WorkspaceKey{Login: login, Project: project}
	if err := k.Validate(); err != nil {
		return WorkspaceKey{}, strictjson.At("workspace key", err)
	}
	return k, nil
}

// Validate checks both names.
func (k WorkspaceKey) Validate() error {
	if err := CheckLogin("login", k.Login); err != nil {
		return err
	}
	return CheckProject("project", k.Project)
}

// String renders LOGIN/PROJECT.
func (k WorkspaceKey) String() string { return k.Login + "/" + k.Project }

// ValidateBranch checks a Fossil branch name as OCX accepts it: spaces are
// allowed, as Fossil allows them, but it is never empty, holds no control
// character and is at most maxBranchLen bytes of UTF-8.
func ValidateBranch(s string) error { return CheckBranch("branch", s) }

// CheckBranch checks a branch name, naming field in the error.
func CheckBranch(field, s string) error {
	if s == "" {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; a branch has a name")
	}
	if len(s) > maxBranchLen {
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("is %d bytes; a branch name is at most %d", len(s), maxBranchLen))
	}
	if err := checkChars(field, s, false); err != nil {
		return err
	}
	return nil
}

// ValidateHash checks a full artifact hash: 40 (SHA1) or 64 (SHA3-256)
// lowercase hex digits. Notes and pipe lines always carry full hashes (E8).
func ValidateHash(s string) error { return CheckHash("hash", s) }

// CheckHash checks a full artifact hash, naming field in the error.
func CheckHash(field, s string) error {
	if s == "" {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; a full artifact hash is 40 or 64 hex digits")
	}
	if len(s) != 40 && len(s) != 64 {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is %d characters; a full artifact hash is 40 or 64 lowercase hex digits", strictjson.QuoteShort(s), len(s)))
	}
	return checkHex(field, s)
}

// ValidateTicketID checks a Fossil ticket id: exactly 40 lowercase hex digits
// under any hash policy (Fossil's K card).
func ValidateTicketID(s string) error { return checkTicketID("ticket", s) }

func checkTicketID(field, s string) error {
	if len(s) != 40 {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is %d characters; a ticket id is 40 lowercase hex digits", strictjson.QuoteShort(s), len(s)))
	}
	return checkHex(field, s)
}

func checkHex(field, s string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not lowercase hex: %q at offset %d", strictjson.QuoteShort(s), rune(c), i))
		}
	}
	return nil
}

// ValidateAbsPath checks a host path as a sandbox lists it: absolute, clean
// (path.Clean leaves it unchanged, so no "..", ".", "//" or trailing '/'), valid
// UTF-8 without control characters (NUL included), at most MaxPathLen bytes.
func ValidateAbsPath(s string) error { return CheckAbsPath("path", s) }

// CheckAbsPath checks an absolute path, naming field in the error.
func CheckAbsPath(field, s string) error {
	if s == "" {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; a path here is absolute")
	}
	if len(s) > MaxPathLen {
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("is %d bytes; a path is at most %d", len(s), MaxPathLen))
	}
	if err := checkChars(field, s, false); err != nil {
		return err
	}
	if s[0] != '/' {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, strictjson.QuoteShort(s)+" is not an absolute path")
	}
	if c := path.Clean(s); c != s {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a clean path (clean, it is %s)", strictjson.QuoteShort(s), strictjson.QuoteShort(c)))
	}
	return nil
}

// repositorySuffix ends every repository file name; the rest is its project (D1).
const repositorySuffix = ".fossil"

// ValidateRepository checks a repository file as a pipe line names it: an
// absolute, clean path with no whitespace, whose file name is PROJECT.fossil for
// a valid project name.
func ValidateRepository(s string) error { return CheckRepository("repository", s) }

func CheckRepository(field, s string) error {
	if err := CheckAbsPath(field, s); err != nil {
		return err
	}
	for _, r := range s {
		if unicode.IsSpace(r) {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s holds whitespace (%s); a repository path in a pipe line has none", strictjson.QuoteShort(s), strconv.QuoteRune(r)))
		}
	}
	base := path.Base(s)
	project, ok := strings.CutSuffix(base, repositorySuffix)
	if !ok {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a repository file: its name does not end in %s", strictjson.QuoteShort(s), repositorySuffix))
	}
	if err := checkName(field, "project", project); err != nil {
		var fe *strictjson.FieldError
		if errors.As(err, &fe) {
			fe.Problem = fmt.Sprintf("%s does not name a project: %s", strictjson.QuoteShort(s), fe.Problem)
			fe.Err = strictjson.ErrInvalid
		}
		return err
	}
	return nil
}

// ProjectOf returns the project a repository file holds: its file name without
// .fossil. It assumes ValidateRepository passed.
func ProjectOf(repository string) string {
	return strings.TrimSuffix(path.Base(repository), repositorySuffix)
}

// checkChars refuses invalid UTF-8 and control characters (C0, DEL and C1,
// so NUL too). multiline admits '\n' and '\t', for text written for people.
func checkChars(field, s string, multiline bool) error {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("is not valid UTF-8 (at byte %d)", i))
			}
		}
		if unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t')) {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("holds the control character %s at byte %d", strconv.QuoteRune(r), i))
		}
	}
	return nil
}

// CheckText checks free text for people: valid UTF-8, newlines and tabs
// allowed, no other control character, at most max bytes.
func CheckText(field, s string, required bool, max int) error {
	if s == "" && required {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; it says in words what happened")
	}
	if len(s) > max {
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("is %d bytes; at most %d", len(s), max))
	}
	return checkChars(field, s, true)
}

// CheckLine checks a one-line value: no control characters at all.
func CheckLine(field, s string, required bool, max int) error {
	if s == "" && required {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty")
	}
	if len(s) > max {
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("is %d bytes; at most %d", len(s), max))
	}
	return checkChars(field, s, false)
}

// CleanText makes s safe to carry in a note as one-line text: invalid UTF-8
// becomes U+FFFD and control characters become spaces. Writers use it on what
// they did not produce themselves, such as a process's command line read from /proc.
func CleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// ClipText cuts s to at most n bytes, on a character boundary.
func ClipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// MarshalText writes a workspace key as LOGIN/PROJECT, the form the daemon's
// hand-off (and its logs) use.
func (k WorkspaceKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads LOGIN/PROJECT and validates both names.
func (k *WorkspaceKey) UnmarshalText(b []byte) error {
	p, err := ParseWorkspaceKey(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// CheckArg checks one argument of a command line: UTF-8 without NUL, which no
// argument can hold, at most MaxShortLen*4 bytes. Other characters, newlines
// included, are allowed: a shell script is an argument.
func CheckArg(field, s string) error {
	if len(s) > MaxTextLen {
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("is %d bytes; an argument is at most %d", len(s), MaxTextLen))
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("holds NUL at byte %d; no argument can", i))
		}
	}
	return checkChars(field, s, true)
}

// CheckUser checks a Fossil user's login as a receipt or a hears list names
// it: any login Fossil holds, so not only D1's agent names, but one line of
// valid UTF-8 without control characters and without space at either end.
func CheckUser(field, s string) error {
	if s == "" {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; it names a Fossil user")
	}
	if len(s) > MaxShortLen {
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("is %d bytes; a user's login is at most %d", len(s), MaxShortLen))
	}
	if strings.Trim(s, " ") != s {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s begins or ends with a space; a login does not", strictjson.QuoteShort(s)))
	}
	return checkChars(field, s, false)
}
