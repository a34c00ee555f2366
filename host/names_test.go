package host

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestValidNames(t *testing.T) {
	good := []string{"alice", "a", "ci-ocx", "A.b_c-9", strings.Repeat("x", 64), "0day", "ocxdaemon", "hooked"}
	for _, s := range good {
		if err := ValidLogin(s); err != nil {
			t.Errorf("ValidLogin(%q) = %v", s, err)
		}
		if err := ValidProject(s); err != nil {
			t.Errorf("ValidProject(%q) = %v", s, err)
		}
	}
	bad := []string{"", ".", "..", ".hidden", "-x", "_x", "a/b", "a b", strings.Repeat("x", 65), "é", "a\x00"}
	for _, s := range bad {
		if err := ValidLogin(s); !errors.Is(err, ErrBadName) {
			t.Errorf("ValidLogin(%q) = %v, want ErrBadName", s, err)
		}
		if err := ValidProject(s); !errors.Is(err, ErrBadName) {
			t.Errorf("ValidProject(%q) = %v, want ErrBadName", s, err)
		}
	}
	for _, s := range []string{"nobody", "Anonymous", "reader", "DEVELOPER", "ocxd", "ocxd.lock", "ocxd.x", "node.json", "hook", "hook.mark.demo"} {
		if err := ValidLogin(s); !errors.Is(err, ErrBadName) {
			t.Errorf("ValidLogin(%q) = %v, want ErrBadName", s, err)
		}
	}
	if err := ValidProject("reader"); err != nil {
		t.Errorf("a project may be called reader: %v", err)
	}
	err := ValidLogin("a/b")
	if !strings.Contains(err.Error(), `"a/b"`) || !strings.Contains(err.Error(), "login") {
		t.Errorf("error does not name the login: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	k, err := ParseKey("alice/demo")
	if err != nil || k != (Key{"alice", "demo"}) || k.String() != "alice/demo" {
		t.Fatalf("ParseKey = %v %v", k, err)
	}
	for _, s := range []string{"alice", "alice/", "/demo", "alice/demo/x", "nobody/demo", "alice/..", ""} {
		if _, err := ParseKey(s); !errors.Is(err, ErrBadName) {
			t.Errorf("ParseKey(%q) = %v, want ErrBadName", s, err)
		}
	}
}

func TestRecords(t *testing.T) {
	hex40 := strings.Repeat("ab", 20)
	for _, s := range []string{hex40, strings.Repeat("0f", 32), "branch-trunk", "branch-feature%2Fx", "branch-100%25"} {
		if err := ValidRecord(s); err != nil {
			t.Errorf("ValidRecord(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"", "AB" + hex40[2:], hex40[:39], "branch-", "branch-a/b", "branch-50%", "branch-%zz", "..", "branch-" + strings.Repeat("x", 249)} {
		if err := ValidRecord(s); !errors.Is(err, ErrBadName) {
			t.Errorf("ValidRecord(%q) = %v, want ErrBadName", s, err)
		}
	}
	r, err := BranchRecord("feature/50%")
	if err != nil || r != "branch-feature%2F50%25" {
		t.Fatalf("BranchRecord = %q %v", r, err)
	}
	if _, err := BranchRecord(""); err == nil {
		t.Fatal("BranchRecord accepted an empty branch")
	}
}

// Every branch name without NUL that fits makes one valid file name, and two
// different branches never share one.
func TestBranchRecordProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.StringMatching(`[^\x00]{1,60}`).Draw(t, "a")
		b := rapid.StringMatching(`[^\x00]{1,60}`).Draw(t, "b")
		ra, err := BranchRecord(a)
		if err != nil {
			t.Fatalf("BranchRecord(%q): %v", a, err)
		}
		if strings.Contains(ra, "/") || ra == "." || ra == ".." {
			t.Fatalf("BranchRecord(%q) = %q is not one file name", a, ra)
		}
		rb, _ := BranchRecord(b)
		if a != b && ra == rb {
			t.Fatalf("%q and %q share %q", a, b, ra)
		}
	})
}
