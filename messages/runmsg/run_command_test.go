package runmsg

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/docs/design/validate"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// The command step (D99), beyond seed 004's section 5: how it is read,
// refused, checked for its values, and expanded.

const commandSteps = `{"step": "directory", "at": "$$root$$/$$run$$"}, {"step": "password"},
 {"step": "clone", "into": "$$workspace$$/clone"}, {"step": "checkout", "of": "trunk", "into": "$$workspace$$/tree"}`

func commandRun(steps string) string {
	return `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "x", "workspace": [` + steps + `],
 "process": {"user": "b", "command": ["cat", "$$tree$$/out"]}}`
}

// TestCommandStepReads: a command step reads, encodes canonically, reads
// back, and the schema takes it.
func TestCommandStepReads(t *testing.T) {
	block := commandRun(commandSteps + `, {"step": "command", "run": ["sh", "-c", "echo built > out; id -u", "$$checkout$$"], "in": "$$tree$$"}`)
	r := mustRun(t, block)
	s := r.Workspace[4]
	if s.Step != StepCommand || !reflect.DeepEqual(s.Run, []string{"sh", "-c", "echo built > out; id -u", "$$checkout$$"}) || s.In != "$$tree$$" {
		t.Fatalf("read %#v", s)
	}
	if s.Needs() != StepDirectory || len(s.Sets()) != 0 {
		t.Errorf("needs %q, sets %v; want directory, none", s.Needs(), s.Sets())
	}
	if got := s.String(); !strings.Contains(got, "command") || !strings.Contains(got, "$$tree$$") {
		t.Errorf("String() = %q", got)
	}
	if err := CheckRunValues(r, nil); err != nil {
		t.Fatalf("CheckRunValues: %v", err)
	}
	enc, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(enc), `"step": "command",`) || !strings.Contains(string(enc), `"in": "$$tree$$"`) {
		t.Errorf("encoded:\n%s", enc)
	}
	back := mustRun(t, string(unfenceT(t, enc)))
	if !reflect.DeepEqual(back, r) {
		t.Errorf("round trip:\n got %#v\nwant %#v", back, r)
	}
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.ValidateMessage([]byte(block)); err != nil {
		t.Errorf("the schema refuses a command step: %v", err)
	}
}

// TestCommandStepRefused: a bad command step is refused by section 11's
// row 2, naming the field, by the reader and the schema alike.
func TestCommandStepRefused(t *testing.T) {
	long := `"` + strings.Repeat(`a", "`, MaxStepRun) + `a"`
	cases := []struct{ name, step, field string }{
		{"no run", `{"step": "command", "in": "/w"}`, "workspace[1].run"},
		{"no in", `{"step": "command", "run": ["make"]}`, "workspace[1].in"},
		{"run empty", `{"step": "command", "run": [], "in": "/w"}`, "workspace[1].run"},
		{"run not a list", `{"step": "command", "run": "make deps", "in": "/w"}`, "workspace[1].run"},
		{"run not text", `{"step": "command", "run": ["make", 1], "in": "/w"}`, "workspace[1].run[1]"},
		{"program empty", `{"step": "command", "run": ["", "x"], "in": "/w"}`, "workspace[1].run[0]"},
		{"an argument with NUL", `{"step": "command", "run": ["make", "a\u0000b"], "in": "/w"}`, "workspace[1].run[1]"},
		{"run too long", `{"step": "command", "run": [` + long + `], "in": "/w"}`, "workspace[1].run"},
		{"in relative", `{"step": "command", "run": ["make"], "in": "tree"}`, "workspace[1].in"},
		{"in two lines", `{"step": "command", "run": ["make"], "in": "/w\n/x"}`, "workspace[1].in"},
		{"another step's argument", `{"step": "command", "run": ["make"], "in": "/w", "into": "/x"}`, "workspace[1].into"},
		{"an unknown key", `{"step": "command", "run": ["make"], "in": "/w", "env": {}}`, "workspace[1].env"},
		{"run on another kind", `{"step": "clone", "into": "/w/c", "run": ["make"]}`, "workspace[1].run"},
	}
	schemas, err := validate.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			block := commandRun(`{"step": "directory", "at": "/w"}, ` + c.step)
			_, err := ReadMessage(fenceRun(block))
			var mm *MalformedMessage
			if !errors.As(err, &mm) {
				t.Fatalf("got %v, want a malformed run naming %s", err, c.field)
			}
			if mm.Err.Field != c.field {
				t.Errorf("names %q, want %q: %v", mm.Err.Field, c.field, err)
			}
			ref := RunRefusal(nil, err, RefusalFacts{SenderPrivileged: true})
			if ref == nil || ref.Row != RefusedMalformed || !strings.Contains(ref.Note, c.field) {
				t.Errorf("refusal %v, want row 2 naming %s", ref, c.field)
			}
			if c.name != "an argument with NUL" && c.name != "in two lines" {
				if err := schemas.ValidateMessage([]byte(block)); err == nil {
					t.Errorf("the schema takes it")
				}
			}
		})
	}
	// The longest run allowed reads.
	most := `"` + strings.Repeat(`a", "`, MaxStepRun-1) + `a"`
	mustRun(t, commandRun(`{"step": "directory", "at": "/w"}, {"step": "command", "run": [`+most+`], "in": "/w"}`))
}

// TestCommandStepValues: row 3 for a command step: it needs a directory
// step before it, every step that sets a value comes before it, and its
// run and in name only values set by then.
func TestCommandStepValues(t *testing.T) {
	cmd := `{"step": "command", "run": ["make", "-C", "$$tree$$"], "in": "$$tree$$"}`
	cases := []struct {
		name, steps string
		want        error
		field       string
	}{
		{"after the seed's steps", commandSteps + ", " + cmd, nil, ""},
		{"two command steps", commandSteps + ", " + cmd + ", " + cmd, nil, ""},
		{"a password step after it", commandSteps + ", " + cmd + `, {"step": "password"}`, nil, ""},
		{"no directory before it", `{"step": "command", "run": ["make"], "in": "/w"}`, errStepNeeds, "workspace[0]"},
		{"a checkout after it", `{"step": "directory", "at": "/w"}, {"step": "password"}, {"step": "clone", "into": "/w/c"}, {"step": "command", "run": ["make"], "in": "/w"}, {"step": "checkout", "of": "trunk", "into": "/w/t"}`, errStepNeeds, "workspace[4]"},
		{"a directory after it", `{"step": "directory", "at": "/w"}, {"step": "command", "run": ["make"], "in": "/w"}, {"step": "directory", "at": "/v"}`, errStepNeeds, "workspace[2]"},
		{"its run names a value not set", `{"step": "directory", "at": "/w"}, {"step": "command", "run": ["make", "$$tree$$"], "in": "/w"}`, ErrUnsetValue, "workspace[1].run[1]"},
		{"its in names a value not set", `{"step": "directory", "at": "/w"}, {"step": "command", "run": ["make"], "in": "$$clone$$"}`, ErrUnsetValue, "workspace[1].in"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustRun(t, commandRun(c.steps))
			err := CheckRunValues(r, nil)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *strictjson.FieldError
			if !errors.Is(err, c.want) || !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v, want %v at %s", err, c.want, c.field)
			}
			ref := RunRefusal(r, nil, RefusalFacts{SenderPrivileged: true})
			if ref == nil || ref.Row != RefusedSteps || !strings.Contains(ref.Note, c.field) {
				t.Errorf("refusal %v, want row 3 naming %s", ref, c.field)
			}
		})
	}
}

// TestCommandStepExpand: the values in place in run and in, the run as
// written left alone, and in absolute and clean once they are in.
func TestCommandStepExpand(t *testing.T) {
	r := mustRun(t, commandRun(commandSteps+`, {"step": "command", "run": ["sh", "-c", "echo $HOME $$ ${X}", "$$checkout$$"], "in": "$$tree$$"}`))
	vals := RunValues{ValueRoot: "/r", ValueRun: "h", ValueWorkspace: "/r/h", ValueClone: "/r/h/clone", valueTree: "/r/h/tree", valueCheckout: "c0ffee"}
	s, err := ExpandStep(r.Workspace[4], "workspace[4]", vals)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Run, []string{"sh", "-c", "echo $HOME $$ ${X}", "c0ffee"}) || s.In != "/r/h/tree" {
		t.Errorf("expanded %#v", s)
	}
	if r.Workspace[4].Run[3] != "$$checkout$$" {
		t.Errorf("ExpandStep wrote into the run as written: %q", r.Workspace[4].Run)
	}
	x, err := r.Expand(vals)
	if err != nil {
		t.Fatal(err)
	}
	if x.Workspace[4].Run[3] != "c0ffee" || r.Workspace[4].Run[3] != "$$checkout$$" {
		t.Errorf("Expand: %q, the run as written %q", x.Workspace[4].Run, r.Workspace[4].Run)
	}
	for _, in := range []string{"$$tree$$/../..", "$$tree$$/", "$$user$$"} {
		r := mustRun(t, commandRun(commandSteps+`, {"step": "command", "run": ["make"], "in": "`+in+`"}`))
		vals[ValueUser] = "b"
		_, err := ExpandStep(r.Workspace[4], "workspace[4]", vals)
		var fe *strictjson.FieldError
		if !errors.As(err, &fe) || fe.Field != "workspace[4].in" {
			t.Errorf("in %q: got %v, want a refusal naming workspace[4].in", in, err)
		}
	}
}
