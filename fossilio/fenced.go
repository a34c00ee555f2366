package fossilio

import "strings"

// FencedJSON returns the fenced JSON blocks of a post's or a change's text, in
// order: the lines between a line "```json" and the next line "```". A block
// that is never closed is not a block. What a block means is for the messages
// package to decide.
func FencedJSON(text string) []string {
	var blocks []string
	var cur []string
	in := false
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```json":
			in, cur = true, cur[:0]
		case in && trimmed == "```":
			blocks = append(blocks, strings.Join(cur, ""))
			in = false
		case in:
			cur = append(cur, strings.TrimRight(line, "\r\n")+"\n")
		}
	}
	return blocks
}
