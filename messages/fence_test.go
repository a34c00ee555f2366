package messages

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/strictjson"
)

func TestBlocks(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		want  []string // each block's JSON, "@LINE:" first
		error string
	}{
		{"one", "a\n```json\n{\"x\": 1}\n```\nb", []string{"@2:{\"x\": 1}"}, ""},
		{"CRLF", "```json\r\n{\r\n}\r\n```\r\n", []string{"@1:{\n}"}, ""},
		{"indented three", "   ```json\n{}\n   ```", []string{"@1:{}"}, ""},
		{"indented four is code", "    ```json\n{}\n    ```", nil, ""},
		{"trailing space on fences", "```json  \n{}\n```\t\n", []string{"@1:{}"}, ""},
		{"closing fence longer", "```json\n{}\n`````\n", []string{"@1:{}"}, ""},
		{"JSON upper case is not json", "```JSON\n{}\n```", nil, ""},
		{"json5 is not json", "```json5\n{}\n```", nil, ""},
		{"four backticks json is not a note block", "````json\n{}\n````", nil, ""},
		{"empty block", "```json\n```", []string{"@1:"}, ""},
		{"blank first line kept", "```json\n\n{}\n```", []string{"@1:\n{}"}, ""},
		{"inside a text block", "```text\n```json\n{}\n```\n", nil, ""},
		{"inside a tilde block", "~~~\n```json\n{}\n```\n~~~\n```json\n[]\n```", []string{"@6:[]"}, ""},
		{"text block left open", "```text\n```json\n{}\n", nil, ""},
		{"unclosed", "x\n\n```json\n{}\n", nil, "block at line 3"},
		{"closing with info is not closing", "```json\n{}\n```json\n", nil, "block at line 1"},
		{"two", "```json\n1\n```\n```json\n2\n```", []string{"@1:1", "@4:2"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			blocks, err := Blocks([]byte(tc.text))
			if tc.error != "" {
				if !errors.Is(err, strictjson.ErrUnclosedFence) || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("error %v, want one naming %q", err, tc.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range blocks {
				got = append(got, "@"+strconv.Itoa(b.Line)+":"+string(b.JSON))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadPostStop(t *testing.T) {
	for _, text := range []string{"OCX stop", "  OCX stop\n", "\r\nOCX stop\r\n"} {
		n, err := ReadPost([]byte(text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if s, ok := n.(*StopNote); !ok || *s != (StopNote{}) {
			t.Fatalf("%q reads as %#v", text, n)
		}
	}
}

func TestDecodeNoteAs(t *testing.T) {
	block := `{"ocx": "stop"}`
	if _, err := DecodeNoteAs[*StopNote]([]byte(block)); err != nil {
		t.Fatal(err)
	}
	_, err := DecodeNoteAs[*WorkspaceDefinition]([]byte(block))
	if !errors.Is(err, strictjson.ErrWrongKind) || !strings.Contains(err.Error(), `ocx: is "stop"; a workspace note is expected here`) {
		t.Fatalf("error %v", err)
	}
}
