package messages

import (
	"bytes"
	"strings"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// HearsFileContent is what AGENTS/LOGIN/held/PROJECT/hears holds for a resolved hears list:
// one login a line, in the order given, or "*" alone; an empty list (the
// session hears nobody) is an empty file. The hook reads it for each post
// that would wake the session (D27).
func HearsFileContent(hears []string) ([]byte, error) {
	if err := CheckHears("hears", hears); err != nil {
		return nil, strictjson.At("hears file", err)
	}
	var b bytes.Buffer
	for _, u := range hears {
		b.WriteString(u)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// ParseHearsFile reads AGENTS/LOGIN/held/PROJECT/hears: the inverse of HearsFileContent.
// It never returns nil: an empty file hears nobody.
func ParseHearsFile(data []byte) ([]string, error) {
	const where = "hears file"
	out := []string{}
	if len(data) == 0 {
		return out, nil
	}
	if data[len(data)-1] != '\n' {
		return nil, &strictjson.FieldError{Where: where, Problem: "does not end with a newline: each login is a line", Err: strictjson.ErrSyntax}
	}
	for _, l := range strings.Split(string(data[:len(data)-1]), "\n") {
		out = append(out, l)
	}
	if err := CheckHears("hears", out); err != nil {
		return nil, strictjson.At(where, err)
	}
	return out, nil
}

// Hears reports whether a hears list names sender: "*" hears every known
// sender; nobody hears an unknown one ("").
func Hears(hears []string, sender string) bool {
	if sender == "" {
		return false
	}
	for _, u := range hears {
		if u == HearsEveryone || u == sender {
			return true
		}
	}
	return false
}

// CheckinsFileContent renders AGENTS/LOGIN/held/PROJECT/checkins: one branch a line, each
// line ended by a newline; no branch, an empty file.
func CheckinsFileContent(branches []string) ([]byte, error) {
	if err := CheckBranches("checkins", branches); err != nil {
		return nil, strictjson.At("checkins file", err)
	}
	var b bytes.Buffer
	for _, br := range branches {
		b.WriteString(br)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// ParseCheckinsFile reads AGENTS/LOGIN/held/PROJECT/checkins: the inverse of
// CheckinsFileContent. It never returns nil.
func ParseCheckinsFile(data []byte) ([]string, error) {
	const where = "checkins file"
	out := []string{}
	if len(data) == 0 {
		return out, nil
	}
	if data[len(data)-1] != '\n' {
		return nil, &strictjson.FieldError{Where: where, Problem: "does not end with a newline: each branch is a line", Err: strictjson.ErrSyntax}
	}
	out = append(out, strings.Split(string(data[:len(data)-1]), "\n")...)
	if err := CheckBranches("checkins", out); err != nil {
		return nil, strictjson.At(where, err)
	}
	return out, nil
}
