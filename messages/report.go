package messages

import (
	"fmt"
	"strings"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// reportOutcome is how a session's work ended, by its own account.
type reportOutcome string

// The outcomes of a report (D4).
const (
	ReportDone   reportOutcome = "done"
	ReportFailed reportOutcome = "failed"
)

// ReportNote is a session's report on its own record (D4): a turn's answer that
// holds one is a report, and a completes session exits once it is on the record.
type ReportNote struct {
	Version int           `json:"-" ocx:"version"`
	Outcome reportOutcome `json:"outcome" why:"a report says done or failed"`
	// Summary says in words what was done or what failed.
	Summary string `json:"summary,omitempty"`
}

// NoteKind is "report".
func (*ReportNote) NoteKind() NoteKind { return KindReport }

func (n *ReportNote) version() int { return n.Version }

// Validate checks the outcome and the summary.
func (n *ReportNote) Validate() error {
	if err := checkVersion(n.Version); err != nil {
		return err
	}
	switch n.Outcome {
	case ReportDone, ReportFailed:
	case "":
		return strictjson.FieldErr("outcome", strictjson.ErrMissing, "is empty; it is done or failed")
	default:
		return strictjson.FieldErr("outcome", strictjson.ErrInvalid, fmt.Sprintf("%s is not an outcome (done, failed)", strictjson.QuoteShort(string(n.Outcome))))
	}
	return CheckText("summary", n.Summary, false, MaxTextLen)
}

// Encode renders the canonical block.
func (n *ReportNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *ReportNote) String() string {
	return Render(KindReport).version(n.Version).KV("outcome", string(n.Outcome)).Text("summary", n.Summary).String()
}

// maxCILineLen bounds the command's last line in a ci tag and a ci note.
const maxCILineLen = 1000

// CINote says a CI result on the CI session's own record (D5); a red result is
// always said there as well as tagged on the check-in.
type CINote struct {
	Version int      `json:"-" ocx:"version"`
	Checkin string   `json:"checkin" why:"a ci note names the check-in it tested"`
	Result  CIResult `json:"result" why:"a ci note says green or red"`
	// Line is the command's last line of output, as the tag carries it.
	Line string `json:"line" why:"a ci note carries the command's last line (\"\" when it printed none)"`
}

// NoteKind is "ci".
func (*CINote) NoteKind() NoteKind { return KindCI }

func (n *CINote) version() int { return n.Version }

// Tag is the ci tag the note says.
func (n *CINote) Tag() CITag { return CITag{Result: n.Result, Line: n.Line} }

// Validate checks the check-in, the result and the line.
func (n *CINote) Validate() error {
	if err := checkVersion(n.Version); err != nil {
		return err
	}
	if err := CheckHash("checkin", n.Checkin); err != nil {
		return err
	}
	return (CITag{Result: n.Result, Line: n.Line}).validate("result", "line")
}

// Encode renders the canonical block.
func (n *CINote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *CINote) String() string {
	return Render(KindCI).version(n.Version).KV("checkin", n.Checkin).KV("result", string(n.Result)).Text("line", n.Line).String()
}

// CITagName is the raw tag a CI session puts on the check-in it tested.
const CITagName = "ci"

// CITag is the value of the ci tag (D5): "green: LINE" or "red: LINE", LINE the
// command's last line; just "green" or "red" when it printed nothing.
type CITag struct {
	Result CIResult
	Line   string
}

// parseCITag reads a ci tag's value.
func parseCITag(value string) (CITag, error) {
	result, line, hasLine := strings.Cut(value, ": ")
	t := CITag{Result: CIResult(result), Line: line}
	if !hasLine && strings.Contains(value, ":") {
		return CITag{}, &strictjson.FieldError{Where: "ci tag", Problem: fmt.Sprintf("%s is not \"green: LINE\" or \"red: LINE\": the result is followed by \": \" and the line", strictjson.QuoteShort(value)), Err: strictjson.ErrSyntax}
	}
	if hasLine && line == "" {
		return CITag{}, &strictjson.FieldError{Where: "ci tag", Field: "line", Problem: "is empty after \": \"; a tag without a line is just green or red", Err: strictjson.ErrSyntax}
	}
	if err := t.validate("result", "line"); err != nil {
		return CITag{}, strictjson.At("ci tag", err)
	}
	return t, nil
}

func (t CITag) validate(resultField, lineField string) error {
	switch t.Result {
	case CIGreen, CIRed:
	case "":
		return strictjson.FieldErr(resultField, strictjson.ErrMissing, "is empty; it is green or red")
	default:
		return strictjson.FieldErr(resultField, strictjson.ErrInvalid, fmt.Sprintf("%s is not a CI result (green, red)", strictjson.QuoteShort(string(t.Result))))
	}
	if err := CheckLine(lineField, t.Line, false, maxCILineLen); err != nil {
		return err
	}
	if strings.TrimSpace(t.Line) != t.Line {
		return strictjson.FieldErr(lineField, strictjson.ErrInvalid, fmt.Sprintf("%s has space at an end; LastLine trims it", strictjson.QuoteShort(t.Line)))
	}
	return nil
}

// Validate checks the result and the line.
func (t CITag) Validate() error { return strictjson.At("ci tag", t.validate("result", "line")) }

// Value renders the tag's value, after validating it.
func (t CITag) Value() (string, error) {
	if err := t.Validate(); err != nil {
		return "", err
	}
	return t.String(), nil
}

// String renders the tag's value: "green: LINE", or "green" without a line.
func (t CITag) String() string {
	if t.Line == "" {
		return string(t.Result)
	}
	return string(t.Result) + ": " + t.Line
}

// LastLine picks what a ci tag carries from a command's output: its last line
// that is not blank, trimmed, made one safe line (CleanText), and cut to
// maxCILineLen bytes on a character boundary.
func LastLine(output []byte) string {
	s := strings.TrimRight(string(output), " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSpace(CleanText(s))
	if len(s) > maxCILineLen {
		cut := maxCILineLen
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = strings.TrimSpace(s[:cut])
	}
	return s
}

// CIResult is a CI run's result on a check-in.
type CIResult string

// The results: the ci tag says green or red, a reviewer's verdict pass or
// fail (D42); an end note may also say none, when the run left no result on
// the check-in it was launched for (D5).
const (
	CIGreen CIResult = "green"
	CIRed   CIResult = "red"
	CIPass  CIResult = "pass"
	CIFail  CIResult = "fail"
	CINone  CIResult = "none"
)
