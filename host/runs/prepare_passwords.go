package runs

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ocx-go/ocx/host/unixhost"
)

// The node's file of passwords (seed 004, section 4): on a node that is not
// the server's, the run users it may run as and their Fossil passwords,
// which its password step takes. docs/runs.md, "The file of passwords".
//
// The format is strict, so that a file a person edits by hand is read as
// they meant or refused, never guessed at: one line for each user,
//
//	USER PASSWORD\n
//
// USER being the Fossil user (valid UTF-8, no white space, no control
// character, not beginning with #), one space, then PASSWORD (printable
// ASCII, '!' to '~': no space). Every line ends with a newline, the last one too; no blank line,
// no comment, no carriage return, no user twice. An empty file holds no
// password. No error ever quotes a password.

// PasswordsFileName is the file of passwords' name, in the node's agents
// root: AGENTS/run-passwords.
const PasswordsFileName = "run-passwords"

// Bounds on the file of passwords, so that a runaway file is refused whole.
const (
	maxPasswordsFile = 1 << 20
	maxPasswordUser  = 255
	maxPassword      = 1024
)

// passwords is a file of passwords, read. Its String lists the users, never
// a password.
type passwords struct {
	byUser map[string]string
}

// Password returns the user's password, and whether the file holds one.
func (p passwords) Password(user string) (string, bool) {
	pw, ok := p.byUser[user]
	return pw, ok
}

// Has says whether the file holds a password for user: what RunRefusal's
// RunFacts.HasPassword needs (section 11, row 6).
func (p passwords) Has(user string) bool { _, ok := p.byUser[user]; return ok }

// Users lists the users the file holds a password for, sorted.
func (p passwords) Users() []string {
	return slices.Sorted(maps.Keys(p.byUser))
}

func (p passwords) String() string {
	return fmt.Sprintf("passwords for %d users (%s)", len(p.byUser), strings.Join(p.Users(), ", "))
}

// Encode renders the file, a line for each user in sorted order: what
// ParsePasswords reads back as it is.
func (p passwords) Encode() []byte {
	var b strings.Builder
	for _, u := range p.Users() {
		b.WriteString(u)
		b.WriteByte(' ')
		b.WriteString(p.byUser[u])
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// NewPasswords makes a Passwords from users and their passwords, checking
// each as ParsePasswords does.
func NewPasswords(byUser map[string]string) (passwords, error) {
	p := passwords{byUser: make(map[string]string, len(byUser))}
	for _, u := range slices.Sorted(maps.Keys(byUser)) {
		if why := checkPasswordUser(u); why != "" {
			return passwords{}, fmt.Errorf("runs: passwords: user %q %s", u, why)
		}
		if why := checkPassword(byUser[u]); why != "" {
			return passwords{}, fmt.Errorf("runs: passwords: the password of %q %s", u, why)
		}
		p.byUser[u] = byUser[u]
	}
	return p, nil
}

// passwordsError says where a file of passwords does not read, by line; it
// never quotes a password.
type passwordsError struct {
	Path string // "" when parsed from bytes
	Line int    // 1-based; 0 for the file as a whole
	Why  string
}

func (e *passwordsError) Error() string {
	where := "the file of passwords"
	if e.Path != "" {
		where += " " + e.Path
	}
	if e.Line > 0 {
		return fmt.Sprintf("runs: %s, line %d: %s", where, e.Line, e.Why)
	}
	return fmt.Sprintf("runs: %s: %s", where, e.Why)
}

// parsePasswords reads a file of passwords' bytes, strictly (see above).
func parsePasswords(b []byte) (passwords, error) {
	p := passwords{byUser: map[string]string{}}
	if len(b) > maxPasswordsFile {
		return passwords{}, &passwordsError{Why: fmt.Sprintf("is %d bytes, more than %d", len(b), maxPasswordsFile)}
	}
	if len(b) == 0 {
		return p, nil
	}
	if b[len(b)-1] != '\n' {
		return passwords{}, &passwordsError{Line: strings.Count(string(b), "\n") + 1, Why: "does not end with a newline"}
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	for i, l := range lines {
		bad := func(why string) error { return &passwordsError{Line: i + 1, Why: why} }
		if l == "" {
			return passwords{}, bad("is empty; every line is USER, one space, PASSWORD")
		}
		user, pw, ok := strings.Cut(l, " ")
		if !ok {
			return passwords{}, bad("has no space; every line is USER, one space, PASSWORD")
		}
		if why := checkPasswordUser(user); why != "" {
			return passwords{}, bad("its user " + why)
		}
		if why := checkPassword(pw); why != "" {
			return passwords{}, bad(fmt.Sprintf("the password of %q %s", user, why))
		}
		if _, dup := p.byUser[user]; dup {
			return passwords{}, bad(fmt.Sprintf("names %q again", user))
		}
		p.byUser[user] = pw
	}
	return p, nil
}

// checkPasswordUser says what is wrong with a user's name in the file, or "".
func checkPasswordUser(u string) string {
	switch {
	case u == "":
		return "is empty"
	case len(u) > maxPasswordUser:
		return fmt.Sprintf("is longer than %d bytes", maxPasswordUser)
	case !utf8.ValidString(u):
		return "is not UTF-8"
	case u[0] == '#':
		return "begins with #, and the file has no comments"
	}
	for _, r := range u {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return "holds a space or a control character"
		}
	}
	return ""
}

// checkPassword says what is wrong with a password, without quoting it, or "".
func checkPassword(pw string) string {
	switch {
	case pw == "":
		return "is empty"
	case len(pw) > maxPassword:
		return fmt.Sprintf("is longer than %d bytes", maxPassword)
	}
	for i := 0; i < len(pw); i++ {
		if pw[i] < '!' || pw[i] > '~' {
			return fmt.Sprintf("holds a byte that is not printable ASCII without space, at %d", i+1)
		}
	}
	return ""
}

// ErrNoPasswordsFile is wrapped when the node has no file of passwords.
var ErrNoPasswordsFile = errors.New("runs: no file of passwords")

// ReadPasswords reads the file of passwords at path, an absolute path: the
// file itself is opened without following a link (beneath its directory,
// unixhost.Root), must be a regular file the node's own account owns and
// no other account can read or write (mode 0600 or less), at most
// MaxPasswordsFile bytes, and must parse. It is read again for every run
// that takes a password, so a file changed since is read as it is now.
// A file that does not exist is ErrNoPasswordsFile: the node holds no
// password.
func ReadPasswords(path string) (passwords, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return passwords{}, &passwordsError{Path: path, Why: "is not an absolute, clean path"}
	}
	root, err := unixhost.OpenRoot(filepath.Dir(path))
	if errors.Is(err, os.ErrNotExist) {
		return passwords{}, fmt.Errorf("%w: %s: %v", ErrNoPasswordsFile, path, err)
	}
	if err != nil {
		return passwords{}, fmt.Errorf("runs: the file of passwords %s: %w", path, err)
	}
	defer root.Close()
	f, err := root.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return passwords{}, fmt.Errorf("%w: %s", ErrNoPasswordsFile, path)
	}
	if err != nil {
		return passwords{}, &passwordsError{Path: path, Why: fmt.Sprintf("cannot be opened without following a link: %v", err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return passwords{}, fmt.Errorf("runs: the file of passwords %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return passwords{}, &passwordsError{Path: path, Why: fmt.Sprintf("is not a regular file (%v)", st.Mode().Type())}
	}
	if st.Mode().Perm()&0o077 != 0 {
		return passwords{}, &passwordsError{Path: path, Why: fmt.Sprintf("has mode %04o: another account may read or write it (0600 is its mode)", st.Mode().Perm())}
	}
	if owner, ours := unixhost.OwnedByUs(st); !ours {
		return passwords{}, &passwordsError{Path: path, Why: fmt.Sprintf("is owned by uid %d, not by the node's account (uid %d): another account may have written it", owner, os.Geteuid())}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordsFile+1))
	if err != nil {
		return passwords{}, fmt.Errorf("runs: read the file of passwords %s: %w", path, err)
	}
	p, err := parsePasswords(b)
	var pe *passwordsError
	if errors.As(err, &pe) {
		pe.Path = path
	}
	return p, err
}

// PasswordFacts is what section 11's row 6 reads of a node on another
// host for user: whether the file of passwords in the agents root holds
// one for user, or why the node trusts none of it (a wrong owner or mode,
// D72), its note's words. No file holds no password. The daemon checks
// a run that arrives with it, and the run tool a run before it is posted.
func PasswordFacts(root, user string) (has bool, why string, err error) {
	pws, err := ReadPasswords(filepath.Join(root, PasswordsFileName))
	var pe *passwordsError
	switch {
	case errors.Is(err, ErrNoPasswordsFile):
		return false, "", nil
	case errors.As(err, &pe):
		return false, pe.Error(), nil
	case err != nil:
		return false, "", fmt.Errorf("read the file of passwords: %w", err)
	}
	return pws.Has(user), "", nil
}
