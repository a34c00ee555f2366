package messages

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design"
	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/messages/strictjson"
	"pgregory.net/rapid"
)

const responseRecord = "93b653f3e69fdc88a716e5e3428a4947e7af5d21926850ad9673c8469d94913d"

// genResponse draws a valid response.
func genResponse() *rapid.Generator[*Response] {
	return rapid.Custom(func(t *rapid.T) *Response {
		answers := rapid.StringMatching(`[0-9a-f]{40}`).Draw(t, "sha1")
		if rapid.Bool().Draw(t, "sha3") {
			answers = rapid.StringMatching(`[0-9a-f]{64}`).Draw(t, "sha3-hash")
		}
		return &Response{
			Answers: answers,
			Outcome: rapid.SampledFrom(responseOutcomes).Draw(t, "outcome"),
			Note:    rapid.StringMatching(`[a-zA-Z0-9 .,:;()\n\t"\\é]{1,80}`).Draw(t, "note"),
		}
	})
}

// TestResponseRoundTrip: whatever is encoded reads back unchanged, from a
// post that says more around the block, and its schema accepts it.
func TestResponseRoundTrip(t *testing.T) {
	s, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		r := genResponse().Draw(rt, "response")
		enc, err := r.Encode()
		if err != nil {
			rt.Fatal(err)
		}
		got, err := ReadResponse([]byte("The run of the record ended.\r\n\r\n" + strings.ReplaceAll(string(enc), "\n", "\r\n")))
		if err != nil || !reflect.DeepEqual(got, r) {
			rt.Fatalf("%s reads back as %+v, %v", enc, got, err)
		}
		if err := s.Validate(design.SchemaFile(responseKind), unfence(rt, enc)); err != nil {
			rt.Fatalf("the schema refuses %s: %v", enc, err)
		}
	})
}

// responseCases are blocks of a response, each accepted (want "") or
// refused with an error that says want, by the decoder and the schema alike.
var responseCases = []struct{ in, want string }{
	{`{"ocx": 1, "kind": "response", "answers": "` + responseRecord + `", "outcome": "exited", "note": "exit 0 after 52 seconds"}`, ""},
	{`{"ocx": 1, "kind": "response", "answers": "` + responseRecord[:40] + `", "outcome": "stopped", "note": "a stop ended it"}`, ""},
	{`{"ocx": 1, "kind": "response", "answers": "` + responseRecord + `", "outcome": "exited", "note": "n", "extra": true}`, ""}, // a later v1 key, passed over (E9)
	{`{"ocx": 1, "kind": "response", "answers": "` + responseRecord + `", "outcome": "exited"}`, "note: is missing"},
	{`{"ocx": 1, "kind": "response", "outcome": "exited", "note": "n"}`, "answers: is missing"},
	{`{"ocx": 1, "kind": "response", "answers": "` + responseRecord[:20] + `", "outcome": "exited", "note": "n"}`, "answers: " + `"` + responseRecord[:20] + `" is 20 characters`},
	{`{"ocx": 1, "kind": "response", "answers": "` + strings.ToUpper(responseRecord) + `", "outcome": "exited", "note": "n"}`, "answers:"},
	{`{"ocx": 1, "kind": "response", "answers": "` + strings.Repeat("g", 40) + `", "outcome": "exited", "note": "n"}`, "answers:"},
	{`{"ocx": 1, "kind": "response", "answers": 12, "outcome": "exited", "note": "n"}`, "answers: must be a string, not a number"},
	{`{"ocx": 1, "kind": "response", "answers": "` + responseRecord + `", "outcome": "partly", "note": "n"}`, `outcome: "partly" is not an outcome`},
	{`{"ocx": 1, "kind": "response", "answers": "` + responseRecord + `", "outcome": ["exited"], "note": "n"}`, "outcome: must be a string, not a list"},
	{`{"ocx": 1, "kind": "response", "answers": "` + responseRecord + `", "outcome": "exited", "note": ""}`, "note: is empty"},
	{`{"ocx": 1, "kind": "response", "answers": "` + responseRecord + `", "outcome": "exited", "note": "a\u0007b"}`, "note:"},
	{`{"ocx": 1, "kind": "response", "answers": "` + responseRecord + `", "outcome": "exited", "note": null}`, "note: must be a string, not null"},
	{`{"ocx": 2, "kind": "response", "answers": "` + responseRecord + `", "outcome": "exited", "note": "n"}`, "ocx: is not 1"},
	{`{"ocx": "1", "kind": "response", "answers": "` + responseRecord + `", "outcome": "exited", "note": "n"}`, "ocx: is not 1"},
	{`{"ocx": 1, "kind": "record", "answers": "` + responseRecord + `", "outcome": "exited", "note": "n"}`, `kind: is not "response"`},
	{`["ocx", 1]`, "a response is a JSON object"},
}

// TestResponseDecoderAgreesWithSchema: the strict decoder and
// response.schema.json accept and refuse the same blocks, the decoder's
// refusal a *FieldError naming the field.
func TestResponseDecoderAgreesWithSchema(t *testing.T) {
	s, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range responseCases {
		_, derr := DecodeResponse([]byte(c.in))
		serr := s.Validate(design.SchemaFile(responseKind), []byte(c.in))
		switch {
		case c.want == "" && (derr != nil || serr != nil):
			t.Errorf("%s: want it accepted; decoder: %v; schema: %v", c.in, derr, serr)
		case c.want != "" && (derr == nil || serr == nil):
			t.Errorf("%s: want it refused (%s); decoder: %v; schema: %v", c.in, c.want, derr, serr)
		case c.want != "" && !strings.Contains(derr.Error(), c.want):
			t.Errorf("%s: refused with %q, which does not say %q", c.in, derr, c.want)
		}
		var fe *strictjson.FieldError
		if derr != nil && !errors.As(derr, &fe) {
			t.Errorf("%s: %v is not a *FieldError", c.in, derr)
		}
	}
	// A key twice is beyond a schema (encoding/json keeps the last); the
	// decoder refuses it.
	dup := `{"ocx": 1, "kind": "response", "answers": "` + responseRecord + `", "outcome": "exited", "outcome": "done", "note": "n"}`
	if _, err := DecodeResponse([]byte(dup)); err == nil || !strings.Contains(err.Error(), "outcome") {
		t.Errorf("a key twice: %v", err)
	}
	// A post with the block and words around it; a post with two blocks.
	post := "The run ended.\n\n```json\n" + responseCases[0].in + "\n```\n"
	if r, err := ReadResponse([]byte(post)); err != nil || r.Outcome != responseExited || r.Answers != responseRecord {
		t.Errorf("ReadResponse: %+v, %v", r, err)
	}
	if _, err := ReadResponse([]byte(post + post)); !errors.Is(err, strictjson.ErrSeveralNotes) {
		t.Errorf("two blocks: %v", err)
	}
	if _, err := ReadResponse([]byte("```json\n{\"ocx\": \"end\"}\n```\n")); !errors.Is(err, strictjson.ErrUnknownVersion) {
		t.Errorf("an end note read as a response: %v", err)
	}
}

// FuzzReadResponse: the response's reader never panics; a refusal is one
// bounded line naming the field; what it accepts re-encodes to a block it
// reads back unchanged, and the schema accepts it.
func FuzzReadResponse(f *testing.F) {
	for _, c := range responseCases {
		f.Add("```json\n" + c.in + "\n```\n")
	}
	f.Add("words\n```json\n{\"ocx\": 1, \"kind\": \"response\"}\n```\n```json\n{\"ocx\": 1}\n```\n")
	f.Add("```json\n{\"ocx\": 1, \"kind\": \"response\", \"answers\": \"" + responseRecord + "\", \"outcome\": \"done\", \"note\": \"\\ud800\"}\n```\n")
	schemas, err := validate.Load()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ReadResponse([]byte(text))
		if err != nil {
			checkRefusal(t, err)
			return
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatalf("accepted %+v but cannot encode it: %v", r, err)
		}
		if serr := schemas.Validate(design.SchemaFile(responseKind), unfence(t, enc)); serr != nil {
			t.Fatalf("the schema refuses the encoding of an accepted response: %s: %v", enc, serr)
		}
		again, err := ReadResponse(enc)
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-encoded response reads back as %+v, %v; was %+v", again, err, r)
		}
	})
}

// TestResponseFor: the outcome is the first that applies, and the note says
// the end and the agent's last report.
func TestResponseFor(t *testing.T) {
	zero, one := 0, 1
	exited := EndNote{Status: EndExited, ExitCode: &zero}
	signaled := EndNote{Status: EndSignaled, Signal: "SIGTERM"}
	wall := EndNote{Status: EndSignaled, Signal: "SIGTERM", Budget: LimitWall}
	done := &ReportNote{Outcome: ReportDone, Summary: "docs in step"}
	failed := &ReportNote{Outcome: ReportFailed}
	for _, c := range []struct {
		end     EndNote
		stop    bool
		gone    bool
		report  *ReportNote
		outcome ResponseOutcome
		note    string
	}{
		{signaled, true, false, done, ResponseStopped, "signaled SIGTERM; its agent's last report: done: docs in step"},
		{wall, true, false, done, ResponseBudget, "signaled SIGTERM, past its wall limit; its agent's last report: done: docs in step"},
		{EndNote{Status: EndSandboxFailed, ExitCode: &one}, false, false, nil, responseFailed, "sandbox-failed 1"},
		{exited, false, false, failed, responseFailed, "exited 0; its agent's last report: failed"},
		{exited, false, false, done, ResponseDone, "exited 0; its agent's last report: done: docs in step"},
		{EndNote{Status: EndUnknown}, false, false, nil, ResponseLost, "unknown"},
		{EndNote{Status: EndUnknown}, false, true, nil, ResponseLost, "unknown: it ended while no daemon ran"},
		{EndNote{Status: EndUnknown}, false, true, done, ResponseDone, "unknown: it ended while no daemon ran; its agent's last report: done: docs in step"},
		{exited, false, false, nil, responseExited, "exited 0"},
		{signaled, false, false, nil, responseExited, "signaled SIGTERM"},
	} {
		r := ResponseFor(responseRecord, &c.end, c.stop, c.gone, c.report)
		if r.Outcome != c.outcome || r.Note != c.note || r.Answers != responseRecord {
			t.Errorf("%s stop=%v report=%v: %+v; want %s %q", c.end.StatusString(), c.stop, c.report, r, c.outcome, c.note)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
}
