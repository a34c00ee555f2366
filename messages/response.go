package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// responseKind is the kind of a protocol v1 response block (seed 001 E5).
const responseKind = "response"

// ResponseOutcome is how a v1 record's run ended, the first that applies
// (D51).
type ResponseOutcome string

// The outcomes of a response, in the order they apply (D51).
const (
	// ResponseStopped: a stop ended it (the stop tool, or the daemon asked).
	ResponseStopped ResponseOutcome = "stopped"
	// ResponseBudget: the node ended it past a limit of its budget; the
	// note names the limit.
	ResponseBudget ResponseOutcome = "budget"
	// responseFailed: it never ran (its sandbox failed), or its agent's
	// last report said failed.
	responseFailed ResponseOutcome = "failed"
	// ResponseDone: its agent's last report said done.
	ResponseDone ResponseOutcome = "done"
	// responseExited: its process exited, or a signal ended it, by itself,
	// with no report.
	responseExited ResponseOutcome = "exited"
	// ResponseLost: the node saw it gone but could not tell how it ended.
	ResponseLost ResponseOutcome = "lost"
)

// responseOutcomes lists the outcomes in the order they apply.
var responseOutcomes = []ResponseOutcome{ResponseStopped, ResponseBudget, responseFailed, ResponseDone, responseExited, ResponseLost}

// responseKeys are the keys of a response block, every one required; a
// reader passes over any other (E9).
var responseKeys = []string{"ocx", "kind", "answers", "outcome", "note"}

// Response is protocol v1's response (seed 001 E5): one fenced block
// {"ocx": 1, "kind": "response", "answers", "outcome", "note"} replying to
// the record it answers, written once when the record's run ends, by the
// record's node user (E5, D51).
type Response struct {
	// Answers is the full hash of the record.
	Answers string          `json:"answers"`
	Outcome ResponseOutcome `json:"outcome"`
	// Note says the end in words: how the process ended, the limit, the
	// agent's last report.
	Note string `json:"note"`
}

// Validate checks every field.
func (r *Response) Validate() error {
	if err := CheckHash("answers", r.Answers); err != nil {
		return err
	}
	if err := checkOutcome(r.Outcome); err != nil {
		return err
	}
	return CheckText("note", r.Note, true, MaxTextLen)
}

func checkOutcome(o ResponseOutcome) error {
	if slices.Contains(responseOutcomes, o) {
		return nil
	}
	words := make([]string, len(responseOutcomes))
	for i, k := range responseOutcomes {
		words[i] = string(k)
	}
	if o == "" {
		return strictjson.FieldErr("outcome", strictjson.ErrMissing, "is empty; it is "+strictjson.ListWords(words))
	}
	return strictjson.FieldErr("outcome", strictjson.ErrInvalid, fmt.Sprintf("%s is not an outcome (%s)", strictjson.QuoteShort(string(o)), strictjson.ListWords(words)))
}

// Encode renders the response's fenced block.
func (r *Response) Encode() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, strictjson.At("response", err)
	}
	body, err := json.Marshal(struct {
		Ocx  int    `json:"ocx"`
		Kind string `json:"kind"`
		*Response
	}{version, responseKind, r})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteString("```json\n")
	out.Write(body)
	out.WriteString("\n```\n")
	return out.Bytes(), nil
}

// ReadResponse reads the response a post's text holds: its one JSON block
// with "ocx": 1 and "kind": "response". The reader is strict: a key twice,
// a key it does not know, a missing key, a value of the wrong type, a
// hash that is not full or an outcome it does not know is refused, the
// error naming the field.
func ReadResponse(text []byte) (*Response, error) {
	b, v, err := NoteBlock(text)
	if err != nil {
		return nil, err
	}
	return decodeResponse(v, fmt.Sprintf("response (block at line %d)", b.Line))
}

// DecodeResponse reads a response from the JSON of its block without the
// fences, as ReadResponse does.
func DecodeResponse(block []byte) (*Response, error) {
	v, err := strictjson.Parse(block, strictjson.MaxNoteLen)
	if err != nil {
		return nil, strictjson.At("response", err)
	}
	return decodeResponse(v, "response")
}

func decodeResponse(v any, where string) (*Response, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &strictjson.FieldError{Where: where, Problem: "is " + strictjson.JSONType(v) + "; a response is a JSON object", Err: strictjson.ErrInvalid}
	}
	if n, ok := m["ocx"].(json.Number); !ok || n.String() != strconv.Itoa(version) {
		return nil, &strictjson.FieldError{Where: where, Field: "ocx", Problem: `is not 1; a protocol v1 response says "ocx": 1`, Err: strictjson.ErrUnknownVersion}
	}
	if k, _ := m["kind"].(string); k != responseKind {
		return nil, &strictjson.FieldError{Where: where, Field: "kind", Problem: `is not "response"`, Err: strictjson.ErrWrongKind}
	}
	// Version 1 may gain keys (E9): a reader passes over one it does not
	// know; a response holds no limit, so none is refused.
	o := strictjson.Obj{Map: m}
	r := new(Response)
	var err error
	if r.Answers, err = o.Str("answers", true, "a response names the full hash of the record it answers"); err != nil {
		return nil, strictjson.At(where, err)
	}
	outcome, err := o.Str("outcome", true, "a response says how the run ended")
	if err != nil {
		return nil, strictjson.At(where, err)
	}
	r.Outcome = ResponseOutcome(outcome)
	if r.Note, err = o.Str("note", true, "a response says the end in words"); err != nil {
		return nil, strictjson.At(where, err)
	}
	if err := r.Validate(); err != nil {
		return nil, strictjson.At(where, err)
	}
	return r, nil
}

// ResponseFor is the response to record for a run that ended as end says
// (D51), the outcome the first that applies: stopped when a stop ended it
// (stopRequested, no limit first), budget when the node ended it past a
// limit, failed when its sandbox failed or report (the agent's last report
// since the run's launch, nil for none) says failed, done when report says
// done, lost when the node could not tell how it ended, else exited. The
// note says the process's end in words and the report's summary; it is
// made of what the end note and the report say alone, so the same end
// always gives the same response. foundGone says the run ended while no
// daemon ran (D76): the note says so, beside its unknown status.
func ResponseFor(record string, end *EndNote, stopRequested, foundGone bool, report *ReportNote) Response {
	r := Response{Answers: record}
	switch {
	case end.Budget != "":
		r.Outcome = ResponseBudget
	case stopRequested:
		r.Outcome = ResponseStopped
	case end.Status == EndSandboxFailed, report != nil && report.Outcome == ReportFailed:
		r.Outcome = responseFailed
	case report != nil && report.Outcome == ReportDone:
		r.Outcome = ResponseDone
	case end.Status == EndUnknown:
		r.Outcome = ResponseLost
	default:
		r.Outcome = responseExited
	}
	note := end.StatusString()
	if foundGone && end.Status == EndUnknown {
		note += ": it ended while no daemon ran"
	}
	if end.Budget != "" {
		note += ", past its " + end.Budget + " limit"
	}
	if report != nil {
		note += "; its agent's last report: " + string(report.Outcome)
		if report.Summary != "" {
			note += ": " + report.Summary
		}
	}
	r.Note = ClipText(CleanText(note), MaxTextLen)
	return r
}
