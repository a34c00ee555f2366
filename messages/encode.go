package messages

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// The one way a note, a run engine message and a host file are written:
// their own leading fields, then the body's fields in their order, indented
// by two spaces, HTML left unescaped.

// ObjectAfter renders head (a JSON object opened with its leading fields,
// e.g. `{"ocx":"workspace"`) followed by the fields of body, a struct with
// JSON tags, indented.
func ObjectAfter(head string, body any) ([]byte, error) {
	var fields bytes.Buffer
	enc := json.NewEncoder(&fields)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	inner := bytes.TrimSpace(fields.Bytes())
	var flat bytes.Buffer
	flat.WriteString(head)
	if len(inner) > 2 {
		flat.WriteByte(',')
		flat.Write(inner[1:])
	} else {
		flat.WriteByte('}')
	}
	var out bytes.Buffer
	if err := json.Indent(&out, flat.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// FencedJSON is b in a fenced json block, as a note and a message are
// posted.
func FencedJSON(b []byte) []byte {
	out := make([]byte, 0, len(b)+len("```json\n\n```\n"))
	out = append(out, "```json\n"...)
	out = append(out, b...)
	return append(out, "\n```\n"...)
}

// Token renders a field as itself when it is one plain token, and quoted
// otherwise, so a String() of an invalid value is still one unambiguous line.
func Token(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == ' ' || r == '"' || r == '\\' || r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
