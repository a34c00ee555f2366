package messages

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages/strictjson"
)

func TestNames(t *testing.T) {
	for _, ok := range []string{"a", "ci-ocx", "claude-7f3a2b", "A.b_c-9", strings.Repeat("x", 64), "nobodyelse"} {
		if err := ValidateLogin(ok); err != nil {
			t.Errorf("login %q: %v", ok, err)
		}
		if err := ValidateProject(ok); err != nil {
			t.Errorf("project %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", "-a", "_a", ".hidden", "a b", "a\x00", "é", strings.Repeat("x", 65)} {
		if ValidateLogin(bad) == nil || ValidateProject(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, p := range []string{"nobody", "ANONYMOUS", "Reader", "developer"} {
		if err := ValidateLogin(p); err == nil || !strings.Contains(err.Error(), "pseudo-users") {
			t.Errorf("login %q: %v", p, err)
		}
		if err := ValidateProject(p); err != nil {
			t.Errorf("project %q: %v", p, err)
		}
	}
}

func TestWorkspaceKey(t *testing.T) {
	k, err := ParseWorkspaceKey("ci-ocx/ollama")
	if err != nil || k != (WorkspaceKey{Login: "ci-ocx", Project: "ollama"}) || k.String() != "ci-ocx/ollama" {
		t.Fatalf("%v %v", k, err)
	}
	for _, bad := range []string{"ci-ocx", "ci-ocx/ollama/x", "/ollama", "ci-ocx/", "../x/y", "nobody/x"} {
		if _, err := ParseWorkspaceKey(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPaths(t *testing.T) {
	for _, ok := range []string{"/", "/usr", "/a/b.c", "/a/...", "/a/.b", "/a/..b", "/with space/é"} {
		if err := ValidateAbsPath(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "usr", "./usr", "/usr/", "//usr", "/a/./b", "/a/../b", "/..", "/.", "/a\nb", "/a\x00b", "/a\x7fb", "/a\u0085b", "/\xff", "/" + strings.Repeat("a", 4095)} {
		if err := ValidateAbsPath(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := ValidateRepository("/srv/fossil/demo.fossil"); err != nil {
		t.Error(err)
	}
	if ProjectOf("/srv/fossil/demo.fossil") != "demo" {
		t.Error("ProjectOf")
	}
}

func TestHashes(t *testing.T) {
	if ValidateHash(h40) != nil || ValidateHash(h64) != nil || ValidateTicketID(h40) != nil {
		t.Fatal("valid hashes refused")
	}
	for _, bad := range []string{"", h40[:39], h64 + "0", strings.ToUpper(h40), h40[:39] + "g"} {
		if ValidateHash(bad) == nil {
			t.Errorf("hash %q accepted", bad)
		}
	}
	if err := ValidateTicketID(h64); err == nil {
		t.Error("64-digit ticket id accepted")
	}
}

func TestBranches(t *testing.T) {
	for _, ok := range []string{"trunk", "port to arm64", "feature/x", "100%", "日本"} {
		if err := ValidateBranch(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a\tb", "a\x00", strings.Repeat("b", 256)} {
		if err := ValidateBranch(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestListeningFiles(t *testing.T) {
	for _, tc := range []struct {
		kind  ListenKind
		names string
		file  string
	}{
		{ListenBranch, "feature/x%y", "branch-feature%2Fx%25y"},
		{ListenBranch, "%2F", "branch-%252F"},
		{ListenThread, h64, h64},
		{ListenTicket, h40, h40},
	} {
		f, err := ListeningFileName(tc.kind, tc.names)
		if err != nil || f != tc.file {
			t.Errorf("%s %q: %q %v", tc.kind, tc.names, f, err)
		}
	}
	if _, err := ListeningFileName(ListenBranch, strings.Repeat("/", 100)); !errors.Is(err, strictjson.ErrTooLong) {
		t.Errorf("a branch of 100 slashes: %v", err)
	}
	for _, bad := range []struct{ file, content string }{
		{"branch-a%2fb", "branch\n"}, // lower-case escape: not the one file name
		{"branch-a%41", "branch\n"},
		{"branch-a%", "branch\n"},
		{"branch-ocx", "thread\n"},
		{"trunk", "branch\n"},
		{h40, "branch\n"},
		{h40, "ticket"},
		{h40, "ticket\n\n"},
		{h40, ""},
		{h64, "ticket\n"},
		{"branch-", "branch\n"},
		{h64, "thread 0\n"},   // a receipt is above 0; 0 is written by leaving it out
		{h64, "thread 012\n"}, // not written plainly
		{h64, "thread -3\n"},  // no receipt is negative
		{h64, "thread 1 2\n"}, // one receipt
		{h64, "thread  12\n"}, // one space
		{h64, "thread 12 \n"}, // nothing after it
		{h64, "thread x12\n"}, // a number
	} {
		if e, err := ParseListeningFile(bad.file, []byte(bad.content)); err == nil {
			t.Errorf("%q %q read as %+v", bad.file, bad.content, e)
		}
	}
}

func TestCleanTextAndLastLine(t *testing.T) {
	if got := CleanText("a\x00b\nc\xff"); got != "a b c\uFFFD" {
		t.Errorf("CleanText: %q", got)
	}
	for in, want := range map[string]string{
		"":                              "",
		"one\ntwo\n\n  \n":              "two",
		"ok  \tgithub.com/x\t1.2s\n":    "ok   github.com/x 1.2s",
		"\x1b[31mFAIL\x1b[0m\r\n":       "[31mFAIL [0m",
		strings.Repeat("é", 600) + "\n": strings.Repeat("é", 500),
	} {
		got := LastLine([]byte(in))
		if got != want {
			t.Errorf("LastLine(%.20q) = %.40q, want %.40q", in, got, want)
		}
		if _, err := parseCITag("red: " + got); got != "" && err != nil {
			t.Errorf("LastLine gave a line the tag refuses: %v", err)
		}
	}
}

func TestStringsAreOneLine(t *testing.T) {
	nasty := "a\nb \"c\"\x00"
	for _, s := range []interface{ String() string }{
		Sandbox{ReadOnly: []string{nasty}},
		Listener{Login: nasty, Kind: ListenBranch, Names: nasty},
		HookStatus{Project: nasty, Repository: nasty},
		LoginStatus{Login: nasty, Accounts: []AccountStatus{{Project: nasty, Capabilities: nasty}}},
		AccountStatus{Project: nasty, Capabilities: nasty},
		WorkspaceStatus{Login: nasty, Branch: nasty},
		SessionStatus{Login: nasty, Release: nasty},
		&WorkspaceDefinition{Login: nasty, Branch: nasty},
		&EndNote{Note: nasty, Signal: nasty},
		CITag{Result: CIRed, Line: "x"},
	} {
		if got := s.String(); strings.ContainsAny(got, "\n\x00") || got == "" {
			t.Errorf("%T renders %q", s, got)
		}
	}
}

// TestValidateListeningFileName: the names ListeningFileName makes, and
// nothing else, are names of a listening index's files.
func TestValidateListeningFileName(t *testing.T) {
	hex40 := strings.Repeat("ab", 20)
	for _, s := range []string{hex40, strings.Repeat("0f", 32), "branch-trunk", "branch-feature%2Fx", "branch-100%25"} {
		if err := ValidateListeningFileName(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "AB" + hex40[2:], hex40[:39], "branch-", "branch-a/b", "branch-50%", "branch-%zz", "branch-a%41", "..", "../x", "branch-" + strings.Repeat("x", 249)} {
		var fe *strictjson.FieldError
		if err := ValidateListeningFileName(s); !errors.As(err, &fe) {
			t.Errorf("%q: %v, want a refusal", s, err)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.StringMatching(`[^\x00]{1,60}`).Draw(t, "branch")
		name, err := ListeningFileName(ListenBranch, b)
		if err != nil {
			if CheckBranch("names", b) != nil {
				return
			}
			t.Fatalf("%q: %v", b, err)
		}
		if err := ValidateListeningFileName(name); err != nil || strings.Contains(name, "/") {
			t.Fatalf("%q makes %q: %v", b, name, err)
		}
	})
}
