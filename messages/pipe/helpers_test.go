package pipe

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
	"pgregory.net/rapid"
)

const (
	h64 = "93b653f3e69fdc88a716e5e3428a4947e7af5d21926850ad9673c8469d94913d"
	h40 = "a9f7f290053f573c5e19492705598fcd9dd10dc8"
)

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var fe *strictjson.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %T is not a *FieldError: %v", err, err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") || len(msg) > 4096 {
		t.Fatalf("error message is not one bounded line (%d bytes): %q", len(msg), msg)
	}
}

func fieldOf(err error) string {
	var fe *strictjson.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

func genName() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 9).Draw(t, "long") == 0 {
			return "a" + rapid.StringMatching(`[A-Za-z0-9._-]{63}`).Draw(t, "name64")
		}
		return rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9._-]{0,20}`).Draw(t, "name")
	})
}

func genLogin() *rapid.Generator[string] {
	return genName().Filter(func(s string) bool { return messages.ValidateLogin(s) == nil })
}

func genHash() *rapid.Generator[string] {
	return rapid.OneOf(rapid.StringMatching(`[0-9a-f]{40}`), rapid.StringMatching(`[0-9a-f]{64}`))
}

// docBlock is one pipe or pipe-refused block of notes.md, with the claim
// that follows it.
type docBlock struct {
	info  string // pipe or pipe-refused
	body  string // the lines between the fences
	line  int    // the opening fence's line
	claim string // the Refused: line's code span, "" when there is none
}

// pipeBlocks reads the pipe and pipe-refused blocks of notes.md.
func pipeBlocks(t testing.TB, text string) []docBlock {
	lines := strings.Split(text, "\n")
	var out []docBlock
	for i := 0; i < len(lines); i++ {
		info, ok := strings.CutPrefix(lines[i], "```")
		if !ok || (info != "pipe" && info != "pipe-refused") {
			continue
		}
		j := i + 1
		for j < len(lines) && lines[j] != "```" {
			j++
		}
		if j == len(lines) {
			t.Fatalf("notes.md:%d: block never closed", i+1)
		}
		b := docBlock{info: info, body: strings.Join(lines[i+1:j], "\n"), line: i + 1}
		for k := j + 1; k < len(lines); k++ {
			if strings.TrimSpace(lines[k]) == "" {
				continue
			}
			if rest, ok := strings.CutPrefix(lines[k], "Refused: `"); ok && strings.HasSuffix(rest, "`") {
				b.claim = strings.TrimSuffix(rest, "`")
			}
			break
		}
		out = append(out, b)
		i = j
	}
	return out
}

// docSeeds returns the bodies of the pipe blocks of notes.md with an info
// string among infos.
func docSeeds(f *testing.F, infos ...string) []string {
	var out []string
	for _, b := range pipeBlocks(f, string(design.Notes())) {
		for _, i := range infos {
			if b.info == i {
				out = append(out, b.body)
			}
		}
	}
	if len(out) == 0 {
		f.Fatalf("notes.md has no %v blocks", infos)
	}
	return out
}

// TestNotesDocPipe puts the pipe lines of docs/design/notes.md under test:
// each line shown parses, re-encodes to itself and renders as itself; each
// refused one is refused with the message its Refused: line shows.
func TestNotesDocPipe(t *testing.T) {
	text, err := os.ReadFile("../../docs/design/notes.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := pipeBlocks(t, string(text))
	if len(blocks) == 0 {
		t.Fatal("notes.md shows no pipe lines")
	}
	for _, b := range blocks {
		where := fmt.Sprintf("notes.md:%d (%s)", b.line, b.info)
		if b.info == "pipe" {
			for _, l := range strings.Split(b.body, "\n") {
				pl, err := Parse([]byte(l))
				if err != nil {
					t.Errorf("%s: %q: %v", where, l, err)
					continue
				}
				enc, err := pl.Encode()
				if err != nil || string(enc) != l+"\n" || pl.String() != l {
					t.Errorf("%s: %q re-encodes as %q (%v), renders as %q", where, l, enc, err, pl.String())
				}
			}
			continue
		}
		_, err := Parse([]byte(b.body))
		if err == nil {
			t.Errorf("%s: %q was accepted", where, b.body)
			continue
		}
		if b.claim != err.Error() {
			t.Errorf("%s:\n have Refused: %s\n want Refused: %s", where, b.claim, err.Error())
		}
	}
}
