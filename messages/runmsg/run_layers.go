package runmsg

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// The layers of a run (seed 004, table 1, sections 5 to 8): the workspace's
// steps, the sandbox, the limits and the process. Each is read strictly: a
// key a layer does not have is refused, naming it, so that no setting and no
// limit is ever dropped (a node never runs a run with less than it asks).

// The step kinds of section 5, in its order.
const (
	StepDirectory = "directory"
	StepPassword  = "password"
	StepClone     = "clone"
	StepCheckout  = "checkout"
	// StepCommand is beyond seed 004 (D99): a command of the run's
	// choosing, run in the run's sandbox and limits.
	StepCommand = "command"
)

// stepKinds lists the step kinds of section 5, and command (D99).
var stepKinds = []string{StepDirectory, StepPassword, StepClone, StepCheckout, StepCommand}

// RunStep is one step of the workspace layer. At is directory's argument;
// Into clone's and checkout's; Of checkout's; Run and In command's (D99).
// A step of a kind section 5 does not have is read with its kind alone:
// refusing it is row 3's, not the decoder's.
type RunStep struct {
	Step string   `json:"step"`
	At   string   `json:"at,omitempty"`
	Of   string   `json:"of,omitempty"`
	Into string   `json:"into,omitempty"`
	Run  []string `json:"run,omitempty"`
	In   string   `json:"in,omitempty"`
}

// stepArgs gives each kind's arguments, every one required.
var stepArgs = map[string][]string{
	StepDirectory: {"at"},
	StepPassword:  {},
	StepClone:     {"into"},
	StepCheckout:  {"of", "into"},
	StepCommand:   {"run", "in"},
}

// stepNeeds gives the step each kind needs before it (section 5, Needs). A
// command step needs a directory step: it runs in the workspace (D99).
var stepNeeds = map[string]string{StepClone: StepPassword, StepCheckout: StepClone, StepCommand: StepDirectory}

// MaxStepRun is the most words a command step's run holds (D99).
const MaxStepRun = 256

// stepSets gives the values each kind sets (section 5, Sets).
var stepSets = map[string][]string{
	StepDirectory: {ValueWorkspace},
	StepClone:     {ValueClone},
	StepCheckout:  {valueTree, valueCheckout},
}

// KnownStep says whether section 5 has the step's kind.
func (s RunStep) KnownStep() bool { _, ok := stepArgs[s.Step]; return ok }

// Needs names the step kind that must come before this one, or "".
func (s RunStep) Needs() string { return stepNeeds[s.Step] }

// Sets names the values the step sets, in section 5's order.
func (s RunStep) Sets() []string { return slices.Clone(stepSets[s.Step]) }

// SetValues records in vals what the step, its values in place, has set:
// workspace its at, clone and tree its into, checkout the check-in the
// checkout resolved to in full (checkin, ignored by other kinds).
func (s RunStep) SetValues(vals RunValues, checkin string) {
	switch s.Step {
	case StepDirectory:
		vals[ValueWorkspace] = s.At
	case StepClone:
		vals[ValueClone] = s.Into
	case StepCheckout:
		vals[valueTree] = s.Into
		vals[valueCheckout] = checkin
	}
}

func (s RunStep) String() string {
	l := messages.Render("step").Word(s.Step)
	l = l.OptKV("at", s.At).OptKV("of", s.Of).OptKV("into", s.Into)
	if len(s.Run) > 0 {
		l = l.List("run", s.Run)
	}
	return l.OptKV("in", s.In).String()
}

func readStep(o strictjson.Obj) (RunStep, error) {
	kind, err := o.Str("step", true, "a step names its kind ("+strictjson.ListWords(stepKinds)+")")
	if err != nil {
		return RunStep{}, err
	}
	if kind == "" {
		return RunStep{}, strictjson.FieldErr(o.Field("step"), strictjson.ErrMissing, "is empty; a step names its kind ("+strictjson.ListWords(stepKinds)+")")
	}
	if err := messages.CheckLine(o.Field("step"), kind, true, messages.MaxNameLen); err != nil {
		return RunStep{}, err
	}
	args, known := stepArgs[kind]
	if !known {
		return RunStep{Step: kind}, nil
	}
	if err := closed(o, "a "+kind+" step", append([]string{"step"}, args...)...); err != nil {
		return RunStep{}, err
	}
	s := RunStep{Step: kind}
	for _, a := range args {
		if a == "run" {
			if s.Run, err = readStepRun(o); err != nil {
				return RunStep{}, err
			}
			continue
		}
		v, err := o.Str(a, true, "a "+kind+" step names its "+a)
		if err != nil {
			return RunStep{}, err
		}
		if err := messages.CheckLine(o.Field(a), v, true, messages.MaxPathLen); err != nil {
			return RunStep{}, err
		}
		switch a {
		case "at":
			s.At = v
		case "of":
			s.Of = v
		case "into":
			s.Into = v
		case "in":
			s.In = v
		}
	}
	if s.At != "" {
		if err := checkRunPath(o.Field("at"), s.At); err != nil {
			return RunStep{}, err
		}
	}
	if s.Into != "" {
		if err := checkRunPath(o.Field("into"), s.Into); err != nil {
			return RunStep{}, err
		}
	}
	if s.In != "" {
		if err := checkRunPath(o.Field("in"), s.In); err != nil {
			return RunStep{}, err
		}
	}
	return s, nil
}

// readStepRun reads a command step's run (D99): the program, then its
// arguments, as process.command is read; at most MaxStepRun words.
func readStepRun(o strictjson.Obj) ([]string, error) {
	run, err := o.Strs("run", true, "a command step names its program, then its arguments")
	if err != nil {
		return nil, err
	}
	return run, checkStepRun(o.Field("run"), run)
}

// checkStepRun checks a command step's run: not empty, its program named,
// at most MaxStepRun words, each an argument (messages.CheckArg).
func checkStepRun(field string, run []string) error {
	if len(run) == 0 {
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; a command step names its program, then its arguments")
	}
	if len(run) > MaxStepRun {
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("holds %d words; a command step's run holds at most %d", len(run), MaxStepRun))
	}
	if run[0] == "" {
		return strictjson.FieldErr(strictjson.IndexField(field, 0), strictjson.ErrMissing, "is empty; it names the program")
	}
	for i, a := range run {
		if err := messages.CheckArg(strictjson.IndexField(field, i), a); err != nil {
			return err
		}
	}
	return nil
}

func (s RunStep) validate(field string) error {
	if !s.KnownStep() {
		return strictjson.FieldErr(field+".step", strictjson.ErrInvalid, fmt.Sprintf("%s is not a step kind (%s)", strictjson.QuoteShort(s.Step), strictjson.ListWords(stepKinds)))
	}
	has := map[string]string{"at": s.At, "of": s.Of, "into": s.Into, "in": s.In}
	if slices.Contains(stepArgs[s.Step], "run") {
		if err := checkStepRun(field+".run", s.Run); err != nil {
			return err
		}
	} else if s.Run != nil {
		return strictjson.FieldErr(field+".run", strictjson.ErrUnknownKey, "is not an argument of a "+s.Step+" step")
	}
	for k, v := range has {
		if slices.Contains(stepArgs[s.Step], k) {
			if v == "" {
				return strictjson.FieldErr(field+"."+k, strictjson.ErrMissing, "is missing; a "+s.Step+" step names its "+k)
			}
			if err := messages.CheckLine(field+"."+k, v, true, messages.MaxPathLen); err != nil {
				return err
			}
		} else if v != "" {
			return strictjson.FieldErr(field+"."+k, strictjson.ErrUnknownKey, "is not an argument of a "+s.Step+" step")
		}
	}
	for _, k := range []string{"at", "into", "in"} {
		if has[k] != "" {
			if err := checkRunPath(field+"."+k, has[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// runFile is a file the sandbox makes for the process alone.
type runFile struct {
	At   string `json:"at"`
	Text string `json:"text"`
}

// runSandbox is the sandbox layer (table 6). Every field is required.
type runSandbox struct {
	UID          uint32    `json:"uid"`
	GID          uint32    `json:"gid"`
	Capabilities []string  `json:"capabilities"`
	Network      bool      `json:"network"`
	OwnSession   bool      `json:"own_session"`
	EndsWithNode bool      `json:"ends_with_node"`
	ReadOnly     []string  `json:"read_only"`
	ReadWrite    []string  `json:"read_write"`
	Homes        []string  `json:"homes"`
	Files        []runFile `json:"files"`
	Proc         string    `json:"proc"`
	Dev          string    `json:"dev"`
	Tmp          string    `json:"tmp"`
}

var sandboxKeys = []string{"uid", "gid", "capabilities", "network", "own_session", "ends_with_node",
	"read_only", "read_write", "homes", "files", "proc", "dev", "tmp"}

// maxID is the largest uid or gid a sandbox names: (uid_t)-1 is no user.
const maxID = 1<<32 - 2

func readSandbox(o strictjson.Obj) (*runSandbox, error) {
	if err := closed(o, "sandbox", sandboxKeys...); err != nil {
		return nil, err
	}
	for _, k := range sandboxKeys {
		if !o.Has(k) {
			return nil, o.Missing(k, "every field of a sandbox is required, so the run says all of it ("+strictjson.ListWords(sandboxKeys)+")")
		}
	}
	s := &runSandbox{}
	uid, _, err := o.Uint("uid", true, maxID, "")
	if err != nil {
		return nil, err
	}
	gid, _, err := o.Uint("gid", true, maxID, "")
	if err != nil {
		return nil, err
	}
	s.UID, s.GID = uint32(uid), uint32(gid)
	if s.Capabilities, err = o.Strs("capabilities", true, ""); err != nil {
		return nil, err
	}
	for i, c := range s.Capabilities {
		if err := messages.CheckLine(strictjson.IndexField(o.Field("capabilities"), i), c, true, messages.MaxNameLen); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		k string
		p *bool
	}{{"network", &s.Network}, {"own_session", &s.OwnSession}, {"ends_with_node", &s.EndsWithNode}} {
		if *f.p, err = o.Boolean(f.k, true, ""); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		k string
		p *[]string
	}{{"read_only", &s.ReadOnly}, {"read_write", &s.ReadWrite}, {"homes", &s.Homes}} {
		if *f.p, err = o.Strs(f.k, true, ""); err != nil {
			return nil, err
		}
	}
	files, err := o.Objects("files", true, "")
	if err != nil {
		return nil, err
	}
	s.Files = make([]runFile, len(files))
	for i, f := range files {
		if err := closed(f, "a file", "at", "text"); err != nil {
			return nil, err
		}
		if s.Files[i].At, err = f.Str("at", true, "a file says where it is made"); err != nil {
			return nil, err
		}
		if s.Files[i].Text, err = f.Str("text", true, "a file says what it holds"); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		k string
		p *string
	}{{"proc", &s.Proc}, {"dev", &s.Dev}, {"tmp", &s.Tmp}} {
		if *f.p, err = o.Str(f.k, true, ""); err != nil {
			return nil, err
		}
	}
	return s, s.validate(o.Path)
}

func (s *runSandbox) validate(field string) error {
	for i, c := range s.Capabilities {
		if err := messages.CheckLine(strictjson.IndexField(strictjson.JoinField(field, "capabilities"), i), c, true, messages.MaxNameLen); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		k string
		v []string
	}{{"read_only", s.ReadOnly}, {"read_write", s.ReadWrite}, {"homes", s.Homes}} {
		for i, p := range l.v {
			if err := checkRunPath(strictjson.IndexField(strictjson.JoinField(field, l.k), i), p); err != nil {
				return err
			}
		}
	}
	for i, f := range s.Files {
		fe := strictjson.IndexField(strictjson.JoinField(field, "files"), i)
		if err := checkRunPath(fe+".at", f.At); err != nil {
			return err
		}
		if err := messages.CheckArg(fe+".text", f.Text); err != nil {
			return err
		}
	}
	for _, l := range []struct{ k, v string }{{"proc", s.Proc}, {"dev", s.Dev}, {"tmp", s.Tmp}} {
		if err := checkRunPath(strictjson.JoinField(field, l.k), l.v); err != nil {
			return err
		}
	}
	return nil
}

// checkRunPath checks a path as a run writes it, before its values are in
// place: one line, and absolute or beginning with a value ($$workspace$$/x).
// Expand checks that it is absolute and clean once its values are in.
func checkRunPath(field, s string) error {
	if err := messages.CheckLine(field, s, true, messages.MaxPathLen); err != nil {
		return err
	}
	if !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "$$") {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, strictjson.QuoteShort(s)+" is not an absolute path, nor one beginning with a value such as $$workspace$$")
	}
	return nil
}

// size reads a size key: a JSON number of bytes or a string with a unit.
func size(o strictjson.Obj, key string) (messages.RunSize, error) {
	v, ok := o.Map[key]
	if !ok {
		return "", nil
	}
	switch x := v.(type) {
	case json.Number:
		if _, err := messages.ParseSize(o.Field(key), x.String(), true); err != nil {
			return "", err
		}
		return messages.RunSize(x.String()), nil
	case string:
		if _, err := messages.ParseSize(o.Field(key), x, false); err != nil || !strings.ContainsAny(x[len(x)-1:], "KMG") {
			return "", strictjson.FieldErr(o.Field(key), strictjson.ErrInvalid, fmt.Sprintf("%s is not a size: as text, a whole number and K, M or G, as \"64K\"; bytes alone are a number", strictjson.QuoteShort(x)))
		}
		return messages.RunSize(x), nil
	}
	return "", o.WrongType(key, "a size (a whole number of bytes, or text such as \"64K\")", v)
}

// RunLimits is the limits layer (table 7). Each limit is optional; absent,
// it is not applied. started lists them as written.
type RunLimits struct {
	Wall      string           `json:"wall,omitempty"`
	CPU       *uint64          `json:"cpu,omitempty"`
	Processes *uint64          `json:"processes,omitempty"`
	Memory    messages.RunSize `json:"memory,omitempty"`
	// Disk is beyond seed 004's table 7 (D82): the size of the file
	// system the node makes the run's workspace on, which the kernel
	// holds it to (a write past it fails with ENOSPC).
	Disk messages.RunSize `json:"disk,omitempty"`
}

// limitNames lists table 7's limits, and disk after them (D82).
var limitNames = []string{messages.LimitWall, messages.LimitCPU, messages.LimitProcesses, messages.LimitMemory, messages.LimitDisk}

func readLimits(o strictjson.Obj) (*RunLimits, error) {
	if err := closed(o, "limits", limitNames...); err != nil {
		return nil, err
	}
	l := &RunLimits{}
	var err error
	if l.Wall, err = o.Str(messages.LimitWall, false, ""); err != nil {
		return nil, err
	}
	for _, k := range []struct {
		key string
		p   **uint64
	}{{messages.LimitCPU, &l.CPU}, {messages.LimitProcesses, &l.Processes}} {
		n, present, err := o.Uint(k.key, false, messages.MaxLimit, "")
		if err != nil {
			return nil, err
		}
		if present {
			*k.p = &n
		}
	}
	if l.Memory, err = size(o, messages.LimitMemory); err != nil {
		return nil, err
	}
	if l.Disk, err = size(o, messages.LimitDisk); err != nil {
		return nil, err
	}
	return l, l.validate(o.Path)
}

func (l *RunLimits) validate(field string) error {
	if l.Wall != "" {
		if _, err := messages.ParseWall(strictjson.JoinField(field, messages.LimitWall), l.Wall); err != nil {
			return err
		}
	}
	for _, k := range []struct {
		key string
		p   *uint64
	}{{messages.LimitCPU, l.CPU}, {messages.LimitProcesses, l.Processes}} {
		if k.p != nil && (*k.p == 0 || *k.p > messages.MaxLimit) {
			return strictjson.FieldErr(strictjson.JoinField(field, k.key), strictjson.ErrInvalid, fmt.Sprintf("%d is not a limit: a whole number from 1 to %d", *k.p, uint64(messages.MaxLimit)))
		}
	}
	if l.Memory != "" {
		if _, err := l.Memory.Parse(strictjson.JoinField(field, messages.LimitMemory)); err != nil {
			return err
		}
	}
	if l.Disk != "" {
		f := strictjson.JoinField(field, messages.LimitDisk)
		n, err := l.Disk.Parse(f)
		if err != nil {
			return err
		}
		if err := messages.CheckDiskSize(f, string(l.Disk), n); err != nil {
			return err
		}
	}
	return nil
}

// Names lists the limits the layer asks, in table 7's order.
func (l *RunLimits) Names() []string {
	if l == nil {
		return nil
	}
	var out []string
	if l.Wall != "" {
		out = append(out, messages.LimitWall)
	}
	if l.CPU != nil {
		out = append(out, messages.LimitCPU)
	}
	if l.Processes != nil {
		out = append(out, messages.LimitProcesses)
	}
	if l.Memory != "" {
		out = append(out, messages.LimitMemory)
	}
	if l.Disk != "" {
		out = append(out, messages.LimitDisk)
	}
	return out
}

// The deliveries of table 8.
const (
	deliveriesFeed  = "feed"
	DeliveriesStart = "start"
)

// The stdout_when of table 8's keep.
const (
	keepOnFailure = "failure"
	KeepAlways    = "always"
)

// defaultKeepSize is keep's default for STDERR and STDOUT.
const defaultKeepSize messages.RunSize = "64K"

// RunKeep is the process's keep: how much of the end of STDERR and STDOUT
// the node keeps, and when STDOUT's. Empty fields take their defaults.
//
// Mask and Match are beyond seed 004's table 8 (D98), its "filter on the
// kept logs, beyond their sizes": every occurrence of a Mask string (values
// in place) is replaced before anything of a kept log leaves the node, the
// run's own secrets always among them; Match, a regular expression (Go's
// RE2), keeps only the lines it matches.
type RunKeep struct {
	Stderr     messages.RunSize `json:"stderr,omitempty"`
	Stdout     messages.RunSize `json:"stdout,omitempty"`
	StdoutWhen string           `json:"stdout_when,omitempty"`
	Mask       []string         `json:"mask,omitempty"`
	Match      string           `json:"match,omitempty"`
}

// keepKeys are keep's fields: table 8's, then the filters of D98.
var keepKeys = []string{"stderr", "stdout", "stdout_when", "mask", "match"}

// Bounds on keep's filters (D98).
const (
	// MaxKeepMasks is how many strings keep.mask may list.
	MaxKeepMasks = 64
	// MaxKeepMask is the longest string keep.mask may list, and the
	// longest keep.match.
	MaxKeepMask = messages.MaxShortLen
)

// empty says the keep sets nothing.
func (k *RunKeep) empty() bool {
	return k.Stderr == "" && k.Stdout == "" && k.StdoutWhen == "" && len(k.Mask) == 0 && k.Match == ""
}

// validateFilters checks keep.mask and keep.match as written: each mask
// one line of 1 to MaxKeepMask bytes, at most MaxKeepMasks of them;
// match one line that compiles as a Go regular expression (RE2: no
// backtracking, so no input makes it slow).
func (k *RunKeep) validateFilters(field string) error {
	f := func(s string) string { return strictjson.JoinField(field, s) }
	if len(k.Mask) > MaxKeepMasks {
		return strictjson.FieldErr(f("mask"), strictjson.ErrTooLong, fmt.Sprintf("lists %d strings; at most %d", len(k.Mask), MaxKeepMasks))
	}
	for i, m := range k.Mask {
		fi := strictjson.IndexField(f("mask"), i)
		if err := messages.CheckLine(fi, m, true, MaxKeepMask); err != nil {
			return err
		}
	}
	if k.Match != "" {
		if err := messages.CheckLine(f("match"), k.Match, true, MaxKeepMask); err != nil {
			return err
		}
		if _, err := regexp.Compile(k.Match); err != nil {
			return strictjson.FieldErr(f("match"), strictjson.ErrInvalid, fmt.Sprintf("%s is not a regular expression (Go's RE2 syntax): %v", strictjson.QuoteShort(k.Match), err))
		}
	}
	return nil
}

// RunProcess is the process layer (table 8). Fields left out are empty
// here, as written; WithDefaults gives them table 8's defaults.
type RunProcess struct {
	User       string            `json:"user"`
	Command    []string          `json:"command"`
	Env        map[string]string `json:"env,omitempty"`
	Cwd        string            `json:"cwd,omitempty"`
	Manual     bool              `json:"manual,omitempty"`
	On         *RunOn            `json:"on,omitempty"`
	Session    bool              `json:"session,omitempty"`
	Hears      []string          `json:"hears,omitempty"`
	Checkins   []string          `json:"checkins,omitempty"`
	Deliveries string            `json:"deliveries,omitempty"`
	Terminal   bool              `json:"terminal,omitempty"`
	Keep       *RunKeep          `json:"keep,omitempty"`
}

var processKeys = []string{"user", "command", "env", "cwd", "manual", "on", "session", "hears", "checkins",
	"deliveries", "terminal", "keep"}

func readProcess(o strictjson.Obj) (RunProcess, error) {
	var p RunProcess
	if err := closed(o, "process", processKeys...); err != nil {
		return p, err
	}
	var err error
	if p.User, err = o.Str("user", true, "a process names the Fossil user it acts as"); err != nil {
		return p, err
	}
	if p.Command, err = o.Strs("command", true, "a process names its program, then its arguments"); err != nil {
		return p, err
	}
	if env, present, err := o.Object("env", false, ""); err != nil {
		return p, err
	} else if present && len(env.Map) > 0 {
		p.Env = make(map[string]string, len(env.Map))
		for k, v := range env.Map {
			s, ok := v.(string)
			if !ok {
				return p, env.WrongType(k, "a string", v)
			}
			p.Env[k] = s
		}
	}
	if p.Cwd, err = o.OptStr("cwd"); err != nil {
		return p, err
	}
	for _, f := range []struct {
		k string
		p *bool
	}{{"manual", &p.Manual}, {"session", &p.Session}, {"terminal", &p.Terminal}} {
		if *f.p, err = o.Boolean(f.k, false, ""); err != nil {
			return p, err
		}
	}
	if on, present, err := o.Object("on", false, ""); err != nil {
		return p, err
	} else if present {
		if p.On, err = readOn(on); err != nil {
			return p, err
		}
	}
	if p.Hears, err = o.Strs("hears", false, ""); err != nil {
		return p, err
	}
	if p.Checkins, err = o.Strs("checkins", false, ""); err != nil {
		return p, err
	}
	if len(p.Hears) == 0 {
		p.Hears = nil
	}
	if len(p.Checkins) == 0 {
		p.Checkins = nil
	}
	if p.Deliveries, err = o.OptStr("deliveries"); err != nil {
		return p, err
	}
	if keep, present, err := o.Object("keep", false, ""); err != nil {
		return p, err
	} else if present {
		if err := closed(keep, "keep", keepKeys...); err != nil {
			return p, err
		}
		k := &RunKeep{}
		if k.Stderr, err = size(keep, "stderr"); err != nil {
			return p, err
		}
		if k.Stdout, err = size(keep, "stdout"); err != nil {
			return p, err
		}
		if k.StdoutWhen, err = keep.OptStr("stdout_when"); err != nil {
			return p, err
		}
		if k.Mask, err = keep.Strs("mask", false, ""); err != nil {
			return p, err
		}
		if len(k.Mask) == 0 {
			k.Mask = nil
		}
		if k.Match, err = keep.OptStr("match"); err != nil {
			return p, err
		}
		if !k.empty() {
			p.Keep = k
		}
	}
	return p, p.validate(o.Path)
}

func (p *RunProcess) validate(field string) error {
	f := func(k string) string { return strictjson.JoinField(field, k) }
	if err := messages.CheckUser(f("user"), p.User); err != nil {
		return err
	}
	if len(p.Command) == 0 {
		return strictjson.FieldErr(f("command"), strictjson.ErrMissing, "is empty; a process names its program, then its arguments")
	}
	if p.Command[0] == "" {
		return strictjson.FieldErr(strictjson.IndexField(f("command"), 0), strictjson.ErrMissing, "is empty; it names the program")
	}
	for i, a := range p.Command {
		if err := messages.CheckArg(strictjson.IndexField(f("command"), i), a); err != nil {
			return err
		}
	}
	for k, v := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || messages.CheckLine("", k, true, messages.MaxShortLen) != nil {
			return strictjson.FieldErr(strictjson.JoinField(f("env"), k), strictjson.ErrInvalid, "is not an environment variable's name: one line, not empty, without = or NUL")
		}
		if err := messages.CheckArg(strictjson.JoinField(f("env"), k), v); err != nil {
			return err
		}
	}
	if p.Cwd != "" {
		if err := checkRunPath(f("cwd"), p.Cwd); err != nil {
			return err
		}
	}
	if err := messages.CheckHears(f("hears"), p.Hears); err != nil {
		return err
	}
	if err := messages.CheckBranches(f("checkins"), p.Checkins); err != nil {
		return err
	}
	if p.On != nil {
		if err := p.On.validate(f("on")); err != nil {
			return err
		}
		switch {
		case p.Manual:
			return strictjson.FieldErr(f("on"), strictjson.ErrInvalid, "is given with manual true; a run starts on events or by a person, not both")
		case p.Session:
			return strictjson.FieldErr(f("on"), strictjson.ErrInvalid, "is given with session true; each firing of a trigger runs to completion")
		}
	}
	if p.Deliveries != "" && p.Deliveries != deliveriesFeed && p.Deliveries != DeliveriesStart {
		return strictjson.FieldErr(f("deliveries"), strictjson.ErrInvalid, fmt.Sprintf("%s is neither feed nor start", strictjson.QuoteShort(p.Deliveries)))
	}
	if p.Keep != nil {
		for _, s := range []struct {
			k string
			v messages.RunSize
		}{{"stderr", p.Keep.Stderr}, {"stdout", p.Keep.Stdout}} {
			if s.v != "" {
				if _, err := messages.ParseSize(strictjson.JoinField(f("keep"), s.k), string(s.v), false); err != nil {
					return err
				}
			}
		}
		if w := p.Keep.StdoutWhen; w != "" && w != keepOnFailure && w != KeepAlways {
			return strictjson.FieldErr(strictjson.JoinField(f("keep"), "stdout_when"), strictjson.ErrInvalid, fmt.Sprintf("%s is neither failure nor always", strictjson.QuoteShort(w)))
		}
		if err := p.Keep.validateFilters(f("keep")); err != nil {
			return err
		}
	}
	return nil
}

// WithDefaults returns the process with table 8's defaults in place of what
// was left out: env empty, cwd $$workspace$$ when the run sets workspace
// and / otherwise (a default naming a value not set is left out, section
// 2), deliveries feed, keep 64K, 64K, failure. Lists stay as written.
func (p RunProcess) WithDefaults(setsWorkspace bool) RunProcess {
	if p.Env == nil {
		p.Env = map[string]string{}
	}
	if p.Cwd == "" {
		p.Cwd = "/"
		if setsWorkspace {
			p.Cwd = "$$" + ValueWorkspace + "$$"
		}
	}
	if p.Deliveries == "" {
		p.Deliveries = deliveriesFeed
	}
	k := RunKeep{}
	if p.Keep != nil {
		k = *p.Keep
	}
	if k.Stderr == "" {
		k.Stderr = defaultKeepSize
	}
	if k.Stdout == "" {
		k.Stdout = defaultKeepSize
	}
	if k.StdoutWhen == "" {
		k.StdoutWhen = keepOnFailure
	}
	p.Keep = &k
	return p
}

// closed refuses a key the object does not have, naming it: the run
// engine's messages are read strictly at every depth.
func closed(o strictjson.Obj, what string, known ...string) error {
	if k, ok := o.UnknownKey(known); ok {
		return strictjson.FieldErr(o.Field(k), strictjson.ErrUnknownKey, fmt.Sprintf("is not a field of %s, which has %s; an unknown field is refused, never dropped", what, strictjson.ListWords(known)))
	}
	return nil
}
