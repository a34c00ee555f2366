package runmsg

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// Expanding a run's values (seed 004, section 2): which strings name
// values, what is unset by when, and the run with its values in place.

// Errors of the run engine's checks, for errors.Is.
var (
	// ErrUnsetValue: a string names a value not set by then (section 2).
	ErrUnsetValue = errors.New("unset value")
	// errUnknownStep: a workspace step of a kind section 5 does not have.
	errUnknownStep = errors.New("unknown step")
	// errStepNeeds: a step whose needs are not met before it.
	errStepNeeds = errors.New("step needs unmet")
)

// valueField is one string where values are read, and its field's name.
type valueField struct {
	field string
	s     *string
}

// valueStrings lists the step's arguments, where values are read; its kind
// is its name, not an argument, and is read as written.
func (s *RunStep) valueStrings(field string) []valueField {
	var out []valueField
	for _, a := range []struct {
		k string
		p *string
	}{{"at", &s.At}, {"of", &s.Of}, {"into", &s.Into}} {
		if *a.p != "" {
			out = append(out, valueField{field + "." + a.k, a.p})
		}
	}
	// A command step's run and in (D99), as process.command and cwd.
	for i := range s.Run {
		out = append(out, valueField{strictjson.IndexField(field+".run", i), &s.Run[i]})
	}
	if s.In != "" {
		out = append(out, valueField{field + ".in", &s.In})
	}
	return out
}

// valueStrings lists every string of the sandbox.
func (sb *runSandbox) valueStrings(field string) []valueField {
	var out []valueField
	list := func(k string, l []string) {
		for i := range l {
			out = append(out, valueField{strictjson.IndexField(field+"."+k, i), &l[i]})
		}
	}
	list("capabilities", sb.Capabilities)
	list("read_only", sb.ReadOnly)
	list("read_write", sb.ReadWrite)
	list("homes", sb.Homes)
	for i := range sb.Files {
		f := strictjson.IndexField(field+".files", i)
		out = append(out, valueField{f + ".at", &sb.Files[i].At}, valueField{f + ".text", &sb.Files[i].Text})
	}
	return append(out, valueField{field + ".proc", &sb.Proc}, valueField{field + ".dev", &sb.Dev}, valueField{field + ".tmp", &sb.Tmp})
}

// valueStrings lists every string of the process but user, deliveries,
// hears and checkins, and never env's keys. keep's strings are listed too:
// stdout_when's form, checked as written, holds no value; keep.mask's
// strings may name values (D98); keep.match is a regular expression, whose
// $ is its own, and is read as written.
func (p *RunProcess) valueStrings(field string) []valueField {
	var out []valueField
	for i := range p.Command {
		out = append(out, valueField{strictjson.IndexField(field+".command", i), &p.Command[i]})
	}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		v := p.Env[k] // a copy: a map's values are not addressable, and Expand writes env through the map
		out = append(out, valueField{strictjson.JoinField(field+".env", k), &v})
	}
	if p.Cwd != "" {
		out = append(out, valueField{field + ".cwd", &p.Cwd})
	}
	if p.Keep != nil {
		out = append(out, valueField{field + ".keep.stdout_when", &p.Keep.StdoutWhen})
		for i := range p.Keep.Mask {
			out = append(out, valueField{strictjson.IndexField(field+".keep.mask", i), &p.Keep.Mask[i]})
		}
	}
	return out
}

// clone copies the run deeply, so that Expand can write in place.
func (r *Run) clone() *Run {
	c := *r
	c.Workspace = slices.Clone(r.Workspace)
	for i := range c.Workspace {
		c.Workspace[i].Run = slices.Clone(c.Workspace[i].Run)
	}
	if r.Sandbox != nil {
		s := *r.Sandbox
		s.Capabilities = slices.Clone(s.Capabilities)
		s.ReadOnly = slices.Clone(s.ReadOnly)
		s.ReadWrite = slices.Clone(s.ReadWrite)
		s.Homes = slices.Clone(s.Homes)
		s.Files = slices.Clone(s.Files)
		c.Sandbox = &s
	}
	if r.Limits != nil {
		l := *r.Limits
		c.Limits = &l
	}
	c.Process.Command = slices.Clone(r.Process.Command)
	c.Process.Env = maps.Clone(r.Process.Env)
	c.Process.Hears = slices.Clone(r.Process.Hears)
	c.Process.Checkins = slices.Clone(r.Process.Checkins)
	if r.Process.Keep != nil {
		k := *r.Process.Keep
		k.Mask = slices.Clone(k.Mask)
		c.Process.Keep = &k
	}
	return &c
}

func unsetValue(field, name, by string) error {
	return strictjson.FieldErr(field, ErrUnsetValue, fmt.Sprintf("names the value $$%s$$, which nothing sets %s", name, by))
}

// CheckRunValues is section 11's row 3, checked when the run arrives and
// before any step: each step's kind is one section 5 has, its needs are
// met before it, and every string names only values set by then: nodeValues
// (nil for nodeValueNames) and what the steps before it set; the sandbox
// and process see every step's. The error names the step or value, and
// where. A default naming a value not set is left out, not refused.
func CheckRunValues(r *Run, nodeValues []string) error {
	if nodeValues == nil {
		nodeValues = nodeValueNames
	}
	set := map[string]bool{}
	for _, n := range nodeValues {
		set[n] = true
	}
	done := map[string]bool{}
	command := "" // the first command step's field (D99)
	check := func(fields []valueField, by string) error {
		for _, f := range fields {
			for _, n := range valueRefs(*f.s) {
				if !set[n] {
					return unsetValue(f.field, n, by)
				}
			}
		}
		return nil
	}
	for i := range r.Workspace {
		s := &r.Workspace[i]
		field := strictjson.IndexField("workspace", i)
		if !s.KnownStep() {
			return strictjson.FieldErr(field+".step", errUnknownStep, fmt.Sprintf("%s is not a step kind section 5 has (%s)", strictjson.QuoteShort(s.Step), strictjson.ListWords(stepKinds)))
		}
		if need := s.Needs(); need != "" && !done[need] {
			return strictjson.FieldErr(field, errStepNeeds, fmt.Sprintf("is a %s step, which needs a %s step before it", s.Step, need))
		}
		if command != "" && len(s.Sets()) > 0 {
			// A command step runs in the run's sandbox, which sees every
			// value the steps set: they are all set before it (D99).
			return strictjson.FieldErr(field, errStepNeeds, fmt.Sprintf("is a %s step after the command step %s; a command step runs in the run's sandbox, which sees every value the steps set, so every step that sets one comes before it", s.Step, command))
		}
		if s.Step == StepCommand && command == "" {
			command = field
		}
		if err := check(s.valueStrings(field), "before this step"); err != nil {
			return err
		}
		done[s.Step] = true
		for _, n := range s.Sets() {
			set[n] = true
		}
	}
	if r.Sandbox != nil {
		if err := check(r.Sandbox.valueStrings("sandbox"), "before the sandbox"); err != nil {
			return err
		}
	}
	return check(r.Process.valueStrings("process"), "before the process")
}

// ExpandStep returns the step with the values in place: what the engine
// runs, then records with SetValues.
func ExpandStep(s RunStep, field string, vals RunValues) (RunStep, error) {
	s.Run = slices.Clone(s.Run) // written in place below: never the caller's
	for _, f := range s.valueStrings(field) {
		v, missing, ok := expandString(*f.s, vals)
		if !ok {
			return RunStep{}, unsetValue(f.field, missing, "")
		}
		*f.s = v
	}
	for _, f := range []struct{ k, v string }{{"at", s.At}, {"into", s.Into}, {"in", s.In}} {
		if f.v != "" {
			if err := messages.CheckAbsPath(field+"."+f.k, f.v); err != nil {
				return RunStep{}, err
			}
		}
	}
	return s, nil
}

// Expand returns the run with every value in place in workspace, sandbox
// and process, given every value set (the node's and the steps'), and
// the process's defaults filled in (WithDefaults; a default naming a value
// not set is left out). Once the values are in, every sandbox path, each
// step's at and into and the process's cwd must be absolute and clean.
// The error names the field, and the value not set or the path.
func (r *Run) Expand(vals RunValues) (*Run, error) {
	c := r.clone()
	_, hasWS := vals[ValueWorkspace]
	c.Process = c.Process.WithDefaults(hasWS)
	for i := range c.Workspace {
		s, err := ExpandStep(c.Workspace[i], strictjson.IndexField("workspace", i), vals)
		if err != nil {
			return nil, err
		}
		c.Workspace[i] = s
	}
	var fields []valueField
	if c.Sandbox != nil {
		fields = append(fields, c.Sandbox.valueStrings("sandbox")...)
	}
	for _, f := range fields {
		v, missing, ok := expandString(*f.s, vals)
		if !ok {
			return nil, unsetValue(f.field, missing, "")
		}
		*f.s = v
	}
	p := &c.Process
	for i := range p.Command {
		v, missing, ok := expandString(p.Command[i], vals)
		if !ok {
			return nil, unsetValue(strictjson.IndexField("process.command", i), missing, "")
		}
		p.Command[i] = v
	}
	for k, v := range p.Env {
		e, missing, ok := expandString(v, vals)
		if !ok {
			return nil, unsetValue(strictjson.JoinField("process.env", k), missing, "")
		}
		p.Env[k] = e
	}
	cwd, missing, ok := expandString(p.Cwd, vals)
	if !ok {
		return nil, unsetValue("process.cwd", missing, "")
	}
	p.Cwd = cwd
	if p.Keep != nil {
		for i, m := range p.Keep.Mask {
			e, missing, ok := expandString(m, vals)
			if !ok {
				return nil, unsetValue(strictjson.IndexField("process.keep.mask", i), missing, "")
			}
			p.Keep.Mask[i] = e
		}
	}
	if err := messages.CheckAbsPath("process.cwd", p.Cwd); err != nil {
		return nil, err
	}
	if c.Sandbox != nil {
		s := c.Sandbox
		for _, l := range []struct {
			k string
			v []string
		}{{"read_only", s.ReadOnly}, {"read_write", s.ReadWrite}, {"homes", s.Homes}} {
			for i, path := range l.v {
				if err := messages.CheckAbsPath(strictjson.IndexField("sandbox."+l.k, i), path); err != nil {
					return nil, err
				}
			}
		}
		for i, f := range s.Files {
			if err := messages.CheckAbsPath(strictjson.IndexField("sandbox.files", i)+".at", f.At); err != nil {
				return nil, err
			}
		}
		for _, l := range []struct{ k, v string }{{"proc", s.Proc}, {"dev", s.Dev}, {"tmp", s.Tmp}} {
			if err := messages.CheckAbsPath("sandbox."+l.k, l.v); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}
