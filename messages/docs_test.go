package messages

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
)

// updateDocs rewrites the Reads: and Refused: lines of docs/design/notes.md from
// what the code says. Run `go test ./messages -run TestNotesDoc -update-docs`
// after changing an example, then read the diff.
var updateDocs = flag.Bool("update-docs", false, "rewrite the Reads:/Refused: lines of docs/design/notes.md")

const notesPath = "../docs/design/notes.md"

// docBlock is one fenced block of notes.md with the claim line that follows it.
type docBlock struct {
	info      string // the fence's info string: json, json-refused, post, pipe, ...
	body      string // the lines between the fences, joined by '\n'
	raw       string // the whole block, fences included, with its final newline
	line      int    // the opening fence's line
	claimLine int    // the index in lines of the Reads:/Refused: line, or -1
	claimKind string // "Reads", "Refused", "Refused (the schema cannot see this)"
	claim     string // the code span's content
}

// parseDoc splits markdown into its fenced blocks, reading fences of three or
// more backticks with an info string, as the notes use them.
func parseDoc(t testing.TB, text string) ([]string, []docBlock) {
	lines := strings.Split(text, "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "```") {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "`"))
		fenceStr := l[:n]
		info := strings.TrimSpace(l[n:])
		start := i
		j := i + 1
		for ; j < len(lines); j++ {
			if strings.TrimRight(lines[j], " ") == fenceStr {
				break
			}
		}
		if j == len(lines) {
			t.Fatalf("notes.md:%d: block never closed", start+1)
		}
		b := docBlock{info: info, body: strings.Join(lines[start+1:j], "\n"), raw: strings.Join(lines[start:j+1], "\n") + "\n", line: start + 1, claimLine: -1}
		for k := j + 1; k < len(lines); k++ {
			if strings.TrimSpace(lines[k]) == "" {
				continue
			}
			if kind, span, ok := parseClaim(lines[k]); ok {
				b.claimLine, b.claimKind, b.claim = k, kind, span
			} else if strings.HasPrefix(lines[k], "Reads:") || strings.HasPrefix(lines[k], "Refused") {
				b.claimLine = k // unreadable: -update-docs rewrites it
			}
			break
		}
		blocks = append(blocks, b)
		i = j
	}
	return lines, blocks
}

var claimKinds = []string{"Reads", "Refused (the schema cannot see this)", "Refused"}

// parseClaim reads "Reads: `X`" or "Refused: `X`", with a code span of any
// number of backticks, as Markdown writes a span that holds backticks.
func parseClaim(l string) (kind, span string, ok bool) {
	for _, k := range claimKinds {
		rest, found := strings.CutPrefix(l, k+": ")
		if !found {
			continue
		}
		n := len(rest) - len(strings.TrimLeft(rest, "`"))
		if n == 0 {
			return "", "", false
		}
		delim := rest[:n]
		inner, after, found := strings.Cut(rest[n:], delim)
		if !found || strings.TrimSpace(after) != "" && !strings.HasPrefix(strings.TrimSpace(after), "(") {
			return "", "", false
		}
		if len(inner) >= 2 && inner[0] == ' ' && inner[len(inner)-1] == ' ' {
			inner = inner[1 : len(inner)-1]
		}
		return k, inner, true
	}
	return "", "", false
}

// codeSpan renders s as a Markdown code span.
func codeSpan(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	delim := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return delim + s + delim
}

// TestNotesDoc puts every example of docs/design/notes.md under test but the
// pipe lines (messages/pipe tests those): each
// note is valid under its schema, decodes, re-encodes to the very bytes shown,
// and renders as its Reads: line says; each refused example is refused with the
// message its Refused: line shows, by the Go reader and (unless marked) by the
// schema. So the schemas, the types and the docs cannot drift apart.
func TestNotesDoc(t *testing.T) {
	text, err := os.ReadFile(notesPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(text, design.Notes()) && !*updateDocs {
		t.Fatal("the embedded notes.md differs from the file; rebuild")
	}
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	lines, blocks := parseDoc(t, string(text))
	kindsShown := map[string]bool{}
	changed := false
	for _, b := range blocks {
		where := fmt.Sprintf("notes.md:%d (%s)", b.line, b.info)
		var wantKind, got string
		switch b.info {
		case "json", "json-accepted":
			wantKind, got = "Reads", checkDocNote(t, where, schemas, b, kindsShown)
		case "json-refused":
			err := refusedDocNote(t, where, schemas, b)
			wantKind, got = "Refused", err.Error()
			if b.claimKind == "Refused (the schema cannot see this)" {
				wantKind = b.claimKind
			}
		case "post":
			n, err := ReadPost([]byte(b.body))
			if err != nil {
				wantKind, got = "Refused", err.Error()
			} else {
				wantKind, got = "Reads", n.String()
			}
		case "ci-tag":
			for _, l := range strings.Split(b.body, "\n") {
				tag, err := parseCITag(l)
				if err != nil || tag.String() != l {
					t.Errorf("%s: %q: %v (renders %q)", where, l, err, tag.String())
				}
			}
			continue
		case "ci-tag-refused":
			_, err := parseCITag(b.body)
			if err == nil {
				t.Errorf("%s: %q was accepted", where, b.body)
				continue
			}
			wantKind, got = "Refused", err.Error()
		case "listening":
			for _, l := range strings.Split(b.body, "\n") {
				checkDocListening(t, where, l)
			}
			continue
		default:
			continue // plain illustration (text, sh, ...): not a claim
		}
		if b.claimLine < 0 || b.claimKind != wantKind || b.claim != got {
			if *updateDocs {
				newLine := wantKind + ": " + codeSpan(got)
				if b.claimLine >= 0 {
					lines[b.claimLine] = newLine
				} else {
					t.Errorf("%s: no Reads:/Refused: line to update; add one after the block", where)
				}
				changed = true
				continue
			}
			t.Errorf("%s:\n have %s: %s\n want %s: %s", where, b.claimKind, b.claim, wantKind, got)
		}
	}
	for _, k := range append(noteKinds(), kindState) {
		if !kindsShown[string(k)] {
			t.Errorf("notes.md shows no canonical example of %q", k)
		}
	}
	if changed {
		if err := os.WriteFile(notesPath, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("updated notes.md; rebuild and run again")
	}
}

// checkDocNote checks an accepted example and returns its one-line rendering.
func checkDocNote(t *testing.T, where string, schemas *validate.Schemas, b docBlock, shown map[string]bool) string {
	t.Helper()
	var (
		enc    []byte
		str    string
		kind   string
		encErr error
	)
	if strings.Contains(b.body, `"ocx": "state"`) {
		s, err := DecodeState([]byte(b.body))
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return ""
		}
		kind, str = string(kindState), s.String()
		enc, encErr = s.Encode()
		if encErr == nil && b.info == "json" && "```json\n"+string(enc)+"```\n" != b.raw {
			t.Errorf("%s: the canonical encoding differs from the example:\n%s", where, enc)
		}
		again, err := DecodeState(enc)
		if err != nil || again.String() != str {
			t.Errorf("%s: re-encoded state reads back as %v (%v)", where, again, err)
		}
	} else {
		n, err := decodeNote([]byte(b.body))
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return ""
		}
		// The block as a post holds it must read the same.
		p, err := ReadPost([]byte("Some words first.\n\n```json\n" + b.body + "\n```\n\nAnd after.\n"))
		if err != nil || p.String() != n.String() {
			t.Errorf("%s: as a post it reads %v (%v)", where, p, err)
		}
		kind, str = string(n.NoteKind()), n.String()
		enc, encErr = n.Encode()
		if encErr == nil && b.info == "json" && string(enc) != b.raw {
			t.Errorf("%s: the canonical encoding differs from the example:\n%s", where, enc)
		}
		again, err := ReadPost(enc)
		if err != nil || again.String() != str {
			t.Errorf("%s: re-encoded note reads back as %v (%v)", where, again, err)
		}
	}
	if encErr != nil {
		t.Errorf("%s: encode: %v", where, encErr)
	}
	if err := schemas.Validate(design.SchemaFile(kind), []byte(b.body)); err != nil {
		t.Errorf("%s: the schema refuses the example: %#v", where, err)
	}
	if b.info == "json" {
		shown[kind] = true
	}
	return str
}

// refusedDocNote checks a refused example and returns the Go reader's error.
func refusedDocNote(t *testing.T, where string, schemas *validate.Schemas, b docBlock) error {
	t.Helper()
	var err error
	var file string
	if strings.Contains(b.body, `"ocx": "state"`) {
		_, err = DecodeState([]byte(b.body))
		file = design.SchemaFile(string(kindState))
	} else {
		_, err = decodeNote([]byte(b.body))
		for _, k := range noteKinds() {
			if strings.Contains(b.body, `"ocx": "`+string(k)+`"`) {
				file = design.SchemaFile(string(k))
			}
		}
	}
	if err == nil {
		t.Errorf("%s: the Go reader accepts it", where)
		return errors.New("accepted")
	}
	if b.claimKind != "Refused (the schema cannot see this)" {
		if file == "" {
			t.Errorf("%s: no kind to pick a schema by", where)
		} else if serr := schemas.Validate(file, []byte(b.body)); serr == nil {
			t.Errorf("%s: the schema %s accepts it, but the Go reader refuses it: %v", where, file, err)
		}
	}
	return err
}

func checkDocListening(t *testing.T, where, l string) {
	t.Helper()
	kindNames, file, ok := strings.Cut(l, " -> ")
	kind, names, ok2 := strings.Cut(kindNames, " ")
	if !ok || !ok2 {
		t.Errorf("%s: %q is not KIND NAMES -> FILE", where, l)
		return
	}
	got, err := ListeningFileName(ListenKind(kind), names)
	if err != nil || got != file {
		t.Errorf("%s: ListeningFileName(%s, %q) = %q, %v; the doc says %q", where, kind, names, got, err, file)
	}
	e, err := ParseListeningFile(file, ListeningFileContent(ListenKind(kind), 0))
	if err != nil || string(e.Kind) != kind || e.Names != names {
		t.Errorf("%s: ParseListeningFile(%q) = %+v, %v", where, file, e, err)
	}
}
