package fossilio

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Type is the type of a structural artifact, as Fossil's parser decides it
// from the cards present.
type Type int

// The artifact types, in Fossil's order.
const (
	TypeNone Type = iota // not parsed
	TypeManifest
	TypeCluster
	TypeControl
	TypeWiki
	TypeTicket
	TypeAttachment
	TypeTechnote
	TypeForum
)

var typeNames = [...]string{"none", "manifest", "cluster", "control", "wiki", "ticket", "attachment", "technote", "forum post"}

func (t Type) String() string {
	if t >= 0 && int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// singleCards are the cards an artifact may hold at most once.
const singleCards = "ABCDEGHIKLNRUW"

// Allowed and required cards per type (src/manifest.c, manifestCardTypes).
var cardRules = [...]struct{ allowed, required string }{
	TypeManifest:   {"BCDFNPQRTUZ", "DZ"},
	TypeCluster:    {"MZ", "MZ"},
	TypeControl:    {"DTUZ", "DTUZ"},
	TypeWiki:       {"CDLNPUWZ", "DLUWZ"},
	TypeTicket:     {"DJKUZ", "DJKUZ"},
	TypeAttachment: {"ACDNUZ", "ADZ"},
	TypeTechnote:   {"CDENPTUWZ", "DEWZ"},
	TypeForum:      {"DGHINPUWZ", "DUWZ"},
}

// TagOp is the prefix of a T card: add once, add and propagate, or cancel.
type TagOp byte

// The three tag operations.
const (
	TagAdd       TagOp = '+'
	tagPropagate TagOp = '*'
	TagCancel    TagOp = '-'
)

// Tag is one T card. Target is "" for a tag a check-in sets on itself ("*").
type Tag struct {
	Op     TagOp
	Name   string // raw name, without the prefix (e.g. "sym-trunk", "branch", "ci")
	Target string
	Value  string
}

// Field is one J card of a ticket change. A name starting with "+" appends
// Value to the field instead of replacing it.
type Field struct {
	Name  string
	Value string
}

// file is one F card of a check-in.
type file struct {
	Name, Hash, Perm, Prior string
}

// Artifact is a parsed structural artifact. Only the cards present are set;
// text arguments are decoded.
type Artifact struct {
	Type Type

	AttachName, AttachTarget, AttachSource string // A
	Baseline                               string // B
	Comment                                string // C
	// Date is the D card's time; zero with DateNow when the card says
	// "now", which Fossil reads as the moment it parsed the artifact.
	// Nothing OCX decides reads it (D47): the server's order is the
	// receipts'.
	Date         time.Time
	DateNow      bool
	EventDate    time.Time // E
	EventID      string    // E
	Files        []file
	ThreadRoot   string // G
	ThreadTitle  string // H
	InReplyTo    string // I
	Fields       []Field
	Ticket       string   // K
	WikiTitle    string   // L
	Children     []string // M
	Mimetype     string   // N
	Parents      []string // P
	Cherrypicks  []string // Q, with their + or - prefix
	RepoChecksum string   // R
	Tags         []Tag
	User         string // U; "anonymous" when empty
	HasText      bool   // a W card is present
	Text         []byte // W payload
}

// Parse parses data as Fossil 2.21 parses a structural artifact
// (src/manifest.c manifest_parse): cards in order, one space between
// arguments, the Z card's MD5, and the allowed and required cards of the type
// the cards imply. It is the check fossilio runs on every artifact before
// sending it, since a server stores a malformed artifact silently.
func Parse(data []byte) (*Artifact, error) {
	fail := func(line int, format string, args ...any) (*Artifact, error) {
		return nil, &ParseError{Line: line, Reason: fmt.Sprintf(format, args...)}
	}
	n := len(data)
	if n == 0 {
		return fail(0, "zero-length")
	}
	if data[n-1] != '\n' {
		return fail(0, "not terminated with \\n")
	}
	z := stripPGP(data)
	n = len(z)
	if n < 10 || z[0] < 'A' || z[0] > 'Z' || z[1] != ' ' {
		return fail(0, "line 1 not recognized")
	}
	if n >= 35 && z[n-35] == 'Z' && z[n-34] == ' ' {
		sum := md5.Sum(z[:n-35])
		if want := hex.EncodeToString(sum[:]); string(z[n-33:n-1]) != want {
			return fail(0, "incorrect Z-card checksum: expected %s", want)
		}
	}

	a := &Artifact{}
	var prev byte
	var seen uint32
	selfTags, simpleTags := 0, 0
	pos, line := 0, 0
	for pos < n {
		line++
		c := z[pos]
		if c < 'A' || c > 'Z' || pos+1 >= n || (z[pos+1] != ' ' && z[pos+1] != '\n') {
			return fail(line, "bad card")
		}
		var toks []string
		if z[pos+1] == '\n' {
			pos += 2
		} else {
			end := bytes.IndexByte(z[pos+2:], '\n')
			if end < 0 {
				return fail(line, "card not terminated")
			}
			lineText := z[pos+2 : pos+2+end]
			if bytes.IndexByte(lineText, 0) >= 0 {
				return fail(line, "NUL byte in card")
			}
			toks = strings.Split(string(lineText), " ")
			pos += 2 + end + 1
		}
		if c < prev && (c != 'N' || prev != 'P' || a.EventID == "") {
			return fail(line, "cards not in lexicographical order")
		}
		if seen&(1<<(c-'A')) != 0 && strings.IndexByte(singleCards, c) >= 0 {
			return fail(line, "more than one %c-card", c)
		}
		seen |= 1 << (c - 'A')
		prev = c
		// arg returns the i-th argument, or "" and false when absent.
		arg := func(i int) (string, bool) {
			if i < len(toks) {
				return toks[i], true
			}
			return "", false
		}
		maxArgs := 0
		switch c {
		case 'A':
			maxArgs = 3
			name, ok1 := arg(0)
			target, ok2 := arg(1)
			if !ok1 || !ok2 {
				return fail(line, "A-card needs a file name and a target")
			}
			name, target = Defossilize(name), Defossilize(target)
			if !simplePath(name) {
				return fail(line, "invalid filename on A-card")
			}
			if !IsHash(strings.ToLower(target)) && !wikiName(target) {
				return fail(line, "invalid target on A-card")
			}
			if src, ok := arg(2); ok {
				if !validHash(src) {
					return fail(line, "invalid source on A-card")
				}
				a.AttachSource = src
			}
			a.AttachName, a.AttachTarget = name, target
			a.Type = TypeAttachment
		case 'B':
			maxArgs = 1
			h, ok := arg(0)
			if !ok || !validHash(h) {
				return fail(line, "invalid hash on B-card")
			}
			a.Baseline = h
			a.Type = TypeManifest
		case 'C':
			maxArgs = 1
			v, ok := arg(0)
			if !ok {
				return fail(line, "missing comment text on C-card")
			}
			a.Comment = Defossilize(v)
		case 'D':
			maxArgs = 1
			v, _ := arg(0)
			t, now, err := parseDate(v)
			if err != nil {
				return fail(line, "cannot parse date on D-card: %q", v)
			}
			a.Date, a.DateNow = t, now
		case 'E':
			maxArgs = 2
			v, _ := arg(0)
			t, _, err := parseDate(v)
			if err != nil {
				return fail(line, "malformed date on E-card")
			}
			id, ok := arg(1)
			if !ok || !validHash(id) {
				return fail(line, "malformed hash on E-card")
			}
			a.EventDate, a.EventID = t, id
			a.Type = TypeTechnote
		case 'F':
			maxArgs = 4
			name, ok := arg(0)
			if !ok {
				return fail(line, "missing filename on F-card")
			}
			name = Defossilize(name)
			if !simplePath(name) {
				return fail(line, "F-card filename is not a simple path")
			}
			h, ok := arg(1)
			if a.Baseline == "" || ok {
				if !ok || !validHash(h) {
					return fail(line, "F-card hash invalid")
				}
			}
			perm, _ := arg(2)
			prior, ok := arg(3)
			if ok {
				prior = Defossilize(prior)
				if !simplePath(prior) {
					return fail(line, "F-card old filename is not a simple path")
				}
			}
			if k := len(a.Files); k > 0 && a.Files[k-1].Name >= name {
				return fail(line, "incorrect F-card sort order")
			}
			a.Files = append(a.Files, file{Name: name, Hash: h, Perm: perm, Prior: prior})
			a.Type = TypeManifest
		case 'G':
			maxArgs = 1
			h, ok := arg(0)
			if !ok || !validHash(h) {
				return fail(line, "invalid hash on G-card")
			}
			a.ThreadRoot = h
			a.Type = TypeForum
		case 'H':
			maxArgs = 1
			v, ok := arg(0)
			if !ok {
				return fail(line, "missing title on H-card")
			}
			a.ThreadTitle = Defossilize(v)
			a.Type = TypeForum
		case 'I':
			maxArgs = 1
			h, ok := arg(0)
			if !ok || !validHash(h) {
				return fail(line, "invalid hash on I-card")
			}
			a.InReplyTo = h
			a.Type = TypeForum
		case 'J':
			maxArgs = 2
			name, ok := arg(0)
			if !ok {
				return fail(line, "name missing from J-card")
			}
			v, _ := arg(1)
			if k := len(a.Fields); k > 0 && a.Fields[k-1].Name >= name {
				return fail(line, "incorrect J-card sort order")
			}
			a.Fields = append(a.Fields, Field{Name: name, Value: Defossilize(v)})
			a.Type = TypeTicket
		case 'K':
			maxArgs = 1
			id, _ := arg(0)
			if len(id) != sha1Len || !isHex(id) {
				return fail(line, "invalid K-card ticket id")
			}
			a.Ticket = id
			a.Type = TypeTicket
		case 'L':
			maxArgs = 1
			v, ok := arg(0)
			if !ok {
				return fail(line, "missing title on L-card")
			}
			v = Defossilize(v)
			if !wikiName(v) {
				return fail(line, "L-card has malformed wiki name")
			}
			a.WikiTitle = v
			a.Type = TypeWiki
		case 'M':
			maxArgs = 1
			h, ok := arg(0)
			if !ok || !validHash(h) {
				return fail(line, "invalid hash on M-card")
			}
			if k := len(a.Children); k > 0 && a.Children[k-1] >= h {
				return fail(line, "M-card in the wrong order")
			}
			a.Children = append(a.Children, h)
			a.Type = TypeCluster
		case 'N':
			maxArgs = 1
			v, ok := arg(0)
			if !ok {
				return fail(line, "missing mimetype on N-card")
			}
			a.Mimetype = Defossilize(v)
		case 'P':
			maxArgs = len(toks)
			for _, h := range toks {
				if !validHash(h) {
					return fail(line, "invalid hash on P-card")
				}
				a.Parents = append(a.Parents, h)
			}
		case 'Q':
			maxArgs = 2
			h, ok := arg(0)
			if !ok || len(h) < 1 || (h[0] != '+' && h[0] != '-') || !validHash(h[1:]) {
				return fail(line, "invalid Q-card")
			}
			if b, ok := arg(1); ok && !validHash(b) {
				return fail(line, "invalid second hash on Q-card")
			}
			a.Cherrypicks = append(a.Cherrypicks, h)
			a.Type = TypeManifest
		case 'R':
			maxArgs = 1
			v, _ := arg(0)
			if len(v) != 32 || !isHex(v) {
				return fail(line, "malformed R-card checksum")
			}
			a.RepoChecksum = v
			a.Type = TypeManifest
		case 'T':
			maxArgs = 3
			name, ok := arg(0)
			if !ok {
				return fail(line, "missing name on T-card")
			}
			target, ok := arg(1)
			if !ok {
				return fail(line, "missing artifact hash on T-card")
			}
			value, _ := arg(2)
			switch {
			case validHash(target):
			case target == "*":
				target = ""
				selfTags++
			default:
				return fail(line, "malformed artifact hash on T-card")
			}
			name = Defossilize(name)
			if name == "" || (name[0] != '-' && name[0] != '+' && name[0] != '*') {
				return fail(line, "T-card name does not begin with '-', '+', or '*'")
			}
			if name[0] == '+' {
				simpleTags++
			}
			if name[1:] == "" || isHex(name[1:]) {
				return fail(line, "T-card name looks like a hexadecimal hash")
			}
			t := Tag{Op: TagOp(name[0]), Name: name[1:], Target: target, Value: Defossilize(value)}
			if k := len(a.Tags); k > 0 {
				p := a.Tags[k-1]
				pn, cn := string(p.Op)+p.Name, name
				if pn > cn || pn == cn && p.Target >= t.Target {
					return fail(line, "T-card in the wrong order")
				}
			}
			a.Tags = append(a.Tags, t)
		case 'U':
			maxArgs = 1
			v, _ := arg(0)
			if v == "" {
				a.User = "anonymous"
			} else {
				a.User = Defossilize(v)
			}
		case 'W':
			maxArgs = 1
			v, ok := arg(0)
			if !ok || len(toks) != 1 {
				return fail(line, "missing size on W-card")
			}
			var size uint64
			for i := 0; i < len(v) && '0' <= v[i] && v[i] <= '9'; i++ {
				size = size*10 + uint64(v[i]-'0')
				if size > 0xffffffff {
					return fail(line, "size overflow on W-card")
				}
			}
			if uint64(pos)+size+1 >= uint64(n) {
				return fail(line, "not enough content after W-card")
			}
			if z[pos+int(size)] != '\n' {
				return fail(line, "W-card content not \\n terminated")
			}
			a.Text = z[pos : pos+int(size)]
			a.HasText = true
			pos += int(size) + 1
		case 'Z':
			maxArgs = 1
			v, _ := arg(0)
			if len(v) != 32 || !isHex(v) {
				return fail(line, "malformed Z-card checksum")
			}
		default:
			return fail(line, "unrecognized card %c", c)
		}
		if len(toks) > maxArgs {
			return fail(line, "extra characters at end of %c-card", c)
		}
	}

	if a.Type == TypeNone {
		if seen&(1<<('C'-'A')) != 0 || len(a.Files) > 0 || len(a.Parents) > 0 {
			a.Type = TypeManifest
		} else {
			a.Type = TypeControl
		}
	}
	rules := cardRules[a.Type]
	if extra := seen &^ cardMask(rules.allowed); extra != 0 {
		return fail(0, "%c-card in %s", maskLetter(extra), a.Type)
	}
	if missing := cardMask(rules.required) &^ seen; missing != 0 {
		return fail(0, "%c-card missing in %s", maskLetter(missing), a.Type)
	}
	switch a.Type {
	case TypeControl:
		if selfTags > 0 {
			return fail(0, "self-referential T-card in control artifact")
		}
	case TypeTechnote:
		if len(a.Tags) != selfTags {
			return fail(0, "non-self-referential T-card in technote")
		}
		if len(a.Tags) != simpleTags {
			return fail(0, "T-card with '*' or '-' in technote")
		}
	case TypeForum:
		if seen&(1<<('H'-'A')) != 0 && a.InReplyTo != "" {
			return fail(0, "cannot have I-card and H-card in a forum post")
		}
		if len(a.Parents) > 1 {
			return fail(0, "too many arguments to P-card")
		}
	}
	return a, nil
}

func cardMask(letters string) uint32 {
	var m uint32
	for i := 0; i < len(letters); i++ {
		m |= 1 << (letters[i] - 'A')
	}
	return m
}

func maskLetter(m uint32) byte {
	for i := 0; i < 26; i++ {
		if m&(1<<i) != 0 {
			return byte('A' + i)
		}
	}
	return '?'
}

// validHash accepts a 40- or 64-digit hex name, as Fossil's hname_validate.
func validHash(s string) bool {
	return (len(s) == sha1Len || len(s) == sha3Len) && isHex(s)
}

// stripPGP removes a PGP clear-sign wrapper, as Fossil ignores it.
func stripPGP(z []byte) []byte {
	const begin = "-----BEGIN PGP SIGNED MESSAGE-----"
	if !bytes.HasPrefix(z, []byte(begin)) {
		return z
	}
	i := len(begin)
	for ; i < len(z); i++ {
		if z[i-1] == '\n' && (z[i-2] == '\n' || z[i-2] == '\r' && i >= 3 && z[i-3] == '\n') {
			break
		}
	}
	if i >= len(z) {
		return z
	}
	z = z[i:]
	if j := bytes.LastIndex(z, []byte("\n-----BEGIN PGP SIGNATURE-")); j >= 0 {
		z = z[:j+1]
	}
	return z
}

// simplePath approximates Fossil's file_is_simple_pathname_nonstrict: a
// relative path with no empty, "." or ".." element.
func simplePath(p string) bool {
	if p == "" || p[0] == '/' || strings.HasSuffix(p, "/") {
		return false
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
	}
	return true
}

// wikiName is Fossil's wiki_name_is_wellformed (src/wiki.c): 1 to 100
// bytes, no byte below space, no space at either end or two in a row.
func wikiName(s string) bool {
	if s == "" || len(s) > 100 || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == ' ' && i > 0 && s[i-1] == ' ' {
			return false
		}
	}
	return true
}

// formatDate writes a time as Fossil writes a D card: UTC, milliseconds.
func formatDate(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000")
}

// Structural says whether Fossil takes data for a structural artifact when
// it arrives: Fossil tries to parse every artifact it receives, whatever
// names it (a check-in's F card, say), and stores one that parses as what
// its cards make it: a check-in, a tag change, a forum post, a ticket
// change, a wiki page. t is the type when this node's parser reads data as
// one. Bytes it does not read but that end in a Z card whose checksum
// holds, as every structural artifact must, are taken for one too, with
// t TypeNone: Fossil's parser reads some cards more widely than this one,
// and no file ends so by chance.
func Structural(data []byte) (t Type, structural bool) {
	if a, err := Parse(data); err == nil {
		return a.Type, true
	}
	return TypeNone, zCardHolds(data)
}

// zCardHolds says whether data, without a PGP wrapper, ends in a Z card
// holding the MD5 of everything before it.
func zCardHolds(data []byte) bool {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return false
	}
	z := stripPGP(data)
	n := len(z)
	if n < 35 || z[n-35] != 'Z' || z[n-34] != ' ' || (n > 35 && z[n-36] != '\n') {
		return false
	}
	sum := md5.Sum(z[:n-35])
	return string(z[n-33:n-1]) == hex.EncodeToString(sum[:])
}

// BranchState is a check-in's branch as Fossil's raw "branch" tag gives
// it: its name, and whether it propagates to the check-ins whose primary
// parent it is (a "*branch" tag; a "+branch" one names the check-in's
// branch alone). The zero value is no branch.
type BranchState struct {
	Name       string
	Propagates bool
}

// Branch is the branch the check-in whose manifest is a has, parent being
// what its primary parent has (the zero value when it has none, or for a
// check-in without a P card), as Fossil's cross-link gives it: its own
// "branch" T card when it carries one (a cancel leaves it none; of two,
// the first, which Fossil applies first and keeps), else its parent's when
// that propagates. Only the artifact's own bytes and the parent's state
// decide, never a table of the repository it came from.
func (a *Artifact) Branch(parent BranchState) BranchState {
	for _, t := range a.Tags {
		if t.Target != "" || t.Name != "branch" {
			continue
		}
		switch t.Op {
		case tagPropagate:
			return BranchState{Name: t.Value, Propagates: true}
		case TagAdd:
			return BranchState{Name: t.Value}
		}
		return BranchState{}
	}
	if parent.Propagates {
		return parent
	}
	return BranchState{}
}
