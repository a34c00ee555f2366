package runs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParsePasswords(t *testing.T) {
	good := "claude-1 pw-1\njosé !\"#$%&'()*+,-./~\n"
	p, err := parsePasswords([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if pw, ok := p.Password("claude-1"); !ok || pw != "pw-1" || !p.Has("josé") || p.Has("nobody-else") {
		t.Errorf("read %v", p)
	}
	if !slices.Equal(p.Users(), []string{"claude-1", "josé"}) {
		t.Errorf("users %v", p.Users())
	}
	if strings.Contains(p.String(), "pw-1") {
		t.Errorf("String shows a password: %s", p)
	}
	if empty, err := parsePasswords(nil); err != nil || len(empty.Users()) != 0 {
		t.Errorf("an empty file: %v %v", empty, err)
	}
	bad := []struct{ in, why string }{
		{"a pw", "line 1: does not end with a newline"},
		{"a pw\n\n", "line 2: is empty"},
		{"a\n", "line 1: has no space"},
		{" pw\n", "line 1: its user is empty"},
		{"a  pw\n", "holds a byte"},
		{"a pw \n", "holds a byte"},
		{"a pw\r\n", "holds a byte"},
		{"a \n", `the password of "a" is empty`},
		{"a\tb pw\n", "its user holds a space"},
		{"a pw\na other\n", `line 2: names "a" again`},
		{"a p\x00w\n", "holds a byte"},
		{"\xff pw\n", "not UTF-8"},
		{"# comment\n", "begins with #"},
		{"a " + strings.Repeat("x", 1025) + "\n", "longer than 1024"},
	}
	for _, c := range bad {
		_, err := parsePasswords([]byte(c.in))
		var pe *passwordsError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%q: %v, want %q", c.in, err, c.why)
			continue
		}
		if strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "other") {
			t.Errorf("%q: the error quotes a password: %v", c.in, err)
		}
	}
	if _, err := NewPasswords(map[string]string{"a b": "x"}); err == nil {
		t.Error("NewPasswords took a user with a space")
	}
	q, err := NewPasswords(map[string]string{"z": "1", "a": "2"})
	if err != nil || string(q.Encode()) != "a 2\nz 1\n" {
		t.Errorf("Encode: %q %v", q.Encode(), err)
	}
}

// The file is opened through no link, and only with mode 0600 or less.
func TestReadPasswords(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, PasswordsFileName)
	if _, err := ReadPasswords(p); !errors.Is(err, ErrNoPasswordsFile) {
		t.Errorf("no file: %v", err)
	}
	if _, err := ReadPasswords(filepath.Join(dir, "none", "x")); !errors.Is(err, ErrNoPasswordsFile) {
		t.Errorf("no directory: %v", err)
	}
	if err := os.WriteFile(p, []byte("claude-1 secret-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPasswords(p); err == nil || !strings.Contains(err.Error(), "mode 0644") {
		t.Errorf("mode 0644: %v", err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPasswords(p)
	if err != nil || !got.Has("claude-1") {
		t.Fatalf("%v %v", got, err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPasswords(link); err == nil || !strings.Contains(err.Error(), "without following a link") {
		t.Errorf("through a link: %v", err)
	}
	if err := os.WriteFile(p, []byte("claude-1 secret-1\nclaude-1 secret-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ReadPasswords(p)
	if err == nil || !strings.Contains(err.Error(), p+", line 2") || strings.Contains(err.Error(), "secret") {
		t.Errorf("a user twice: %v", err)
	}
	if _, err := ReadPasswords("relative"); err == nil {
		t.Error("a relative path was read")
	}
	// Another account's file, mode 0600 though it is, holds nothing the
	// node trusts: it is refused, naming the owner (D72).
	if err := os.WriteFile(p, []byte("claude-1 secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := os.Geteuid() + 1000
	if err := os.Chown(p, other, -1); err != nil {
		t.Fatalf("chown the file to uid %d (the tests run as root): %v", other, err)
	}
	var pe *passwordsError
	_, err = ReadPasswords(p)
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), fmt.Sprintf("owned by uid %d", other)) || strings.Contains(err.Error(), "secret") {
		t.Errorf("another account's file: %v", err)
	}
}

func TestInfoHash(t *testing.T) {
	out := "hash:         b87e3f4a82c9590d3743828d936b6fef1796228f 2026-12-01 15:04:05 UTC\ntags:         trunk\n"
	if h, ok := infoHash(out); !ok || h != "b87e3f4a82c9590d3743828d936b6fef1796228f" {
		t.Errorf("%q %v", h, ok)
	}
	for _, o := range []string{"", "tags: trunk\n", "hash:\n", "hash: XYZ\n"} {
		if h, ok := infoHash(o); ok {
			t.Errorf("%q: %q", o, h)
		}
	}
}

// FuzzParsePasswords: the parser never panics; what it reads, it renders
// back byte for byte (in sorted order: the same lines), so nothing of a
// file is dropped or guessed; and its errors never quote a password.
func FuzzParsePasswords(f *testing.F) {
	for _, s := range []string{"", "a b\n", "claude-1 pw\nrunner-2 x\n", "a b", "a b\n\n", "a  b\n", "a b\r\n",
		"josé ~!\n", "a b\na c\n", "\xff b\n", " b\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePasswords(b)
		if err != nil {
			var pe *passwordsError
			if !errors.As(err, &pe) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		enc := p.Encode()
		if len(enc) != len(b) {
			t.Fatalf("%q renders as %q", b, enc)
		}
		in := strings.SplitAfter(string(b), "\n")
		out := strings.SplitAfter(string(enc), "\n")
		slices.Sort(in)
		slices.Sort(out)
		if !slices.Equal(in, out) {
			t.Fatalf("%q renders as %q", b, enc)
		}
		q, err := parsePasswords(enc)
		if err != nil || !slices.Equal(q.Users(), p.Users()) {
			t.Fatalf("%q: read back %v %v", enc, q, err)
		}
		for _, u := range p.Users() {
			a, _ := p.Password(u)
			c, _ := q.Password(u)
			if a != c {
				t.Fatalf("%q: %q's password changed", b, u)
			}
		}
	})
}
