package messages

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// block is one fenced JSON block of a post: the text between a line of three
// backticks and `json` and the line of backticks that closes it.
type block struct {
	Line int    // the line of its opening fence, counting from 1
	JSON []byte // what lies between the fences, lines joined by '\n'
}

// fence is an open fenced code block while Blocks scans a post.
type fence struct {
	char byte // '`' or '~'
	n    int  // how many of them opened it
	json bool // whether its info string is exactly "json"
	line int
}

// Blocks returns every ```json block of a post's text, in order. It reads fences
// as Markdown does, so a ```json line quoted inside another fenced block (```text,
// say) is text, not a block. Lines may end in "\r\n". A ```json block that is
// never closed is a truncated post: Blocks reports it (ErrUnclosedFence) rather
// than read a block that may have lost its end. Another kind of block left open
// runs to the end of the post, as in Markdown, and is not an error.
func Blocks(text []byte) ([]block, error) {
	var (
		out  []block
		open *fence
		buf  []byte
	)
	lineNo := 0
	for len(text) > 0 {
		lineNo++
		var line []byte
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			line, text = text, nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if open == nil {
			if f, ok := openingFence(line); ok {
				f.line = lineNo
				open = &f
				buf = buf[:0]
			}
			continue
		}
		if closingFence(line, open) {
			if open.json {
				out = append(out, block{Line: open.line, JSON: bytes.Clone(buf)})
			}
			open = nil
			continue
		}
		if open.json {
			if len(buf) > 0 || lineNo > open.line+1 {
				buf = append(buf, '\n')
			}
			buf = append(buf, line...)
		}
	}
	if open != nil && open.json {
		return out, &strictjson.FieldError{Where: "post", Field: fmt.Sprintf("block at line %d", open.line), Problem: "the ```json block is never closed; the post may be truncated", Err: strictjson.ErrUnclosedFence}
	}
	return out, nil
}

// openingFence recognises up to three spaces, then three or more backticks (or
// tildes), then an info string; for backticks the info string holds none.
func openingFence(line []byte) (fence, bool) {
	indent := 0
	for indent < len(line) && line[indent] == ' ' {
		indent++
	}
	if indent > 3 || indent == len(line) {
		return fence{}, false
	}
	c := line[indent]
	if c != '`' && c != '~' {
		return fence{}, false
	}
	n := 0
	for indent+n < len(line) && line[indent+n] == c {
		n++
	}
	if n < 3 {
		return fence{}, false
	}
	info := strings.TrimSpace(string(line[indent+n:]))
	if c == '`' && strings.ContainsRune(info, '`') {
		return fence{}, false
	}
	return fence{char: c, n: n, json: c == '`' && n == 3 && info == "json"}, true
}

// closingFence recognises up to three spaces, at least as many fence characters
// as opened the block, and nothing after them but spaces and tabs.
func closingFence(line []byte, f *fence) bool {
	indent := 0
	for indent < len(line) && line[indent] == ' ' {
		indent++
	}
	if indent > 3 {
		return false
	}
	n := 0
	for indent+n < len(line) && line[indent+n] == f.char {
		n++
	}
	if n < f.n {
		return false
	}
	return len(bytes.Trim(line[indent+n:], " \t")) == 0
}
