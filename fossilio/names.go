package fossilio

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// pseudoUsers are Fossil's built-in users, which are never an OCX login.
var pseudoUsers = map[string]bool{"nobody": true, "anonymous": true, "reader": true, "developer": true}

// checkLoginName checks a login OCX creates (docs/decisions.md, D1):
// [A-Za-z0-9][A-Za-z0-9._-]*, at most 64 bytes, not "." or "..", and not one
// of Fossil's pseudo-users.
func checkLoginName(login string) error {
	if login == "" || len(login) > 64 || login == "." || login == ".." {
		return fmt.Errorf("%w: login %q must be 1 to 64 bytes, not . or ..", ErrBadInput, login)
	}
	for i := 0; i < len(login); i++ {
		c := login[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("%w: login %q: only letters, digits, '.', '_' and '-', starting with a letter or digit", ErrBadInput, login)
		}
	}
	if pseudoUsers[strings.ToLower(login)] {
		return fmt.Errorf("%w: login %q is one of Fossil's pseudo-users", ErrBadInput, login)
	}
	return nil
}

// checkLogin accepts any existing Fossil login a write may be made as (a
// person's login need not follow D1): non-empty UTF-8 without control
// characters.
func checkLogin(login string) error {
	if login == "" || !utf8.ValidString(login) {
		return fmt.Errorf("%w: login %q", ErrBadInput, login)
	}
	for _, r := range login {
		if r < ' ' || r == 0x7f {
			return fmt.Errorf("%w: login %q holds a control character", ErrBadInput, login)
		}
	}
	return nil
}

// projectName is a project's name: its repository file's name without
// ".fossil" (docs/decisions.md, D1).
func projectName(repoPath string) string {
	return strings.TrimSuffix(filepath.Base(repoPath), ".fossil")
}
