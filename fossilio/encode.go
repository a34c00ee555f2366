package fossilio

import "strings"

// Fossilize escapes s as Fossil writes a card argument: space, newline, tab,
// CR, VT, FF, NUL and backslash become a backslash and one letter, so that the
// argument holds no separator.
func Fossilize(s string) string {
	if !strings.ContainsAny(s, " \n\t\r\v\f\x00\\") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ':
			b.WriteString(`\s`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case 0:
			b.WriteString(`\0`)
		case '\\':
			b.WriteString(`\\`)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Defossilize undoes Fossilize. A backslash before any other character yields
// that character, and a trailing backslash stays, as in Fossil. Fossil keeps
// strings NUL-terminated, so a decoded NUL ends the value there too.
func Defossilize(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				c = '\n'
			case 's':
				c = ' '
			case 't':
				c = '\t'
			case 'r':
				c = '\r'
			case 'v':
				c = '\v'
			case 'f':
				c = '\f'
			case '0':
				return b.String()
			default:
				c = s[i]
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}
