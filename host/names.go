package host

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBadName is wrapped by every error about a login, a project, a workspace key
// or a listening record that does not have the shape decision D1 (or D2) gives.
var ErrBadName = errors.New("host: bad name")

// NameError says which name is wrong and why.
type NameError struct {
	Kind   string // "login", "project", "key" or "record"
	Name   string
	Reason string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("host: bad %s %q: %s", e.Kind, e.Name, e.Reason)
}

// Unwrap lets errors.Is(err, ErrBadName) hold.
func (e *NameError) Unwrap() error { return ErrBadName }

// MaxName bounds a login and a project (D1).
const MaxName = 64

// pseudoUsers are Fossil's built-in users; none may be an agent's login (D1).
var pseudoUsers = []string{"nobody", "anonymous", "reader", "developer"}

// ValidLogin checks a login per D1, and refuses the names of the agents root's
// own files (ocxd, ocxd.*, node.json, hook, hook.*), since AGENTS/LOGIN would
// collide with them.
func ValidLogin(s string) error {
	if err := validName("login", s); err != nil {
		return err
	}
	for _, p := range pseudoUsers {
		if strings.EqualFold(s, p) {
			return &NameError{"login", s, "it is one of Fossil's pseudo-users"}
		}
	}
	if s == "ocxd" || strings.HasPrefix(s, "ocxd.") || s == "node.json" ||
		s == "hook" || strings.HasPrefix(s, "hook.") {
		return &NameError{"login", s, "it is the name of one of the agents root's own files"}
	}
	return nil
}

// ValidProject checks a project per D1.
func ValidProject(s string) error { return validName("project", s) }

// validName applies D1's shape: [A-Za-z0-9][A-Za-z0-9._-]*, at most MaxName
// bytes. Since the first byte is a letter or digit the name is never "." or
// "..", and since '/' is refused it is always one path component.
func validName(kind, s string) error {
	if s == "" {
		return &NameError{kind, s, "it is empty"}
	}
	if len(s) > MaxName {
		return &NameError{kind, s, fmt.Sprintf("it is %d bytes, more than %d", len(s), MaxName)}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return &NameError{kind, s, fmt.Sprintf("byte %d (%q) is not allowed: [A-Za-z0-9][A-Za-z0-9._-]*", i, c)}
		}
	}
	return nil
}

// Key names a workspace: an agent login and a project (D1).
type Key struct {
	Login   string
	Project string
}

// ParseKey reads LOGIN/PROJECT and validates both names.
func ParseKey(s string) (Key, error) {
	login, project, ok := strings.Cut(s, "/")
	if !ok {
		return Key{}, &NameError{"key", s, "it is not LOGIN/PROJECT"}
	}
	k := Key{Login: login, Project: project}
	if err := k.Validate(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Validate checks both names.
func (k Key) Validate() error {
	if err := ValidLogin(k.Login); err != nil {
		return err
	}
	return ValidProject(k.Project)
}

// String renders LOGIN/PROJECT.
func (k Key) String() string { return k.Login + "/" + k.Project }

// ValidRecord checks the name of a listening file (D2): a thread's root hash or
// a ticket's id (40 or 64 lowercase hex digits), or branch-NAME as BranchRecord
// writes it.
func ValidRecord(s string) error {
	if name, ok := strings.CutPrefix(s, "branch-"); ok {
		if name == "" {
			return &NameError{"record", s, "the branch name is empty"}
		}
		if len(s) > 255 {
			return &NameError{"record", s, "it is longer than a file name may be (255 bytes)"}
		}
		for i := 0; i < len(name); i++ {
			switch c := name[i]; {
			case c == '/' || c == 0:
				return &NameError{"record", s, fmt.Sprintf("byte %d (%q) must be escaped", i+7, c)}
			case c == '%':
				if i+2 >= len(name) || !isHex(name[i+1]) || !isHex(name[i+2]) {
					return &NameError{"record", s, fmt.Sprintf("'%%' at byte %d does not start an escape", i+7)}
				}
			}
		}
		return nil
	}
	if len(s) != 40 && len(s) != 64 {
		return &NameError{"record", s, "it is neither branch-NAME nor a full hash (40 or 64 hex digits)"}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return &NameError{"record", s, fmt.Sprintf("byte %d (%q) is not lowercase hex", i, c)}
		}
	}
	return nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// BranchRecord names the listening file of a branch: branch-NAME with '%' and
// '/' written %25 and %2F (D2), so that any branch name is one file name.
func BranchRecord(branch string) (string, error) {
	if branch == "" {
		return "", &NameError{"record", branch, "the branch name is empty"}
	}
	if strings.IndexByte(branch, 0) >= 0 {
		return "", &NameError{"record", branch, "a branch name holds no NUL"}
	}
	r := "branch-" + strings.NewReplacer("%", "%25", "/", "%2F").Replace(branch)
	if err := ValidRecord(r); err != nil {
		return "", err
	}
	return r, nil
}
