package messages

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bounds on process identities.
const (
	// MaxPID is Linux's PID_MAX_LIMIT on 64-bit hosts.
	MaxPID = 1 << 22
	// MaxSafeInt is the largest whole number every JSON reader reads exactly
	// (2^53-1); a start time in clock ticks stays far below it.
	MaxSafeInt = 1<<53 - 1
)

// The releases a launch may ask for (seed 000: restart on the current or the
// previous release).
const (
	ReleaseCurrent  = "current"
	ReleasePrevious = "previous"
)

// LaunchNote asks the daemon to start a session: written by the caller on the
// session's own record, or by the node user for a CI launch, and handed to the
// daemon as a post line.
type LaunchNote struct {
	Version int    `json:"-"`
	Login   string `json:"login"`
	Project string `json:"project"`
	// Workspace is the hash of the post holding the workspace definition.
	Workspace string `json:"workspace"`
	// Session is the hash of the post holding the session definition.
	Session string `json:"session"`
	// Release is the release to run: "current" (the default when the key is
	// left out) or "previous".
	Release string `json:"release"`
	// Checkin is, for a CI launch, the check-in to test.
	Checkin string `json:"checkin,omitempty"`
}

// NoteKind is "launch".
func (*LaunchNote) NoteKind() NoteKind { return KindLaunch }

func (n *LaunchNote) version() int { return n.Version }

// Key is the workspace the launch is for.
func (n *LaunchNote) Key() WorkspaceKey { return WorkspaceKey{Login: n.Login, Project: n.Project} }

// Validate checks the names, the hashes and the release.
func (n *LaunchNote) Validate() error {
	if err := checkHeader(n.Version, n.Login, n.Project); err != nil {
		return err
	}
	if err := checkHash("workspace", n.Workspace); err != nil {
		return err
	}
	if err := checkHash("session", n.Session); err != nil {
		return err
	}
	if err := checkRelease("release", n.Release); err != nil {
		return err
	}
	return checkOptHash("checkin", n.Checkin)
}

func checkRelease(field, r string) error {
	switch r {
	case ReleaseCurrent, ReleasePrevious:
		return nil
	case "":
		return fieldErr(field, ErrMissing, "is empty; it is current or previous")
	}
	return fieldErr(field, ErrInvalid, fmt.Sprintf("%s is not a release to launch on (current, previous)", quoteShort(r)))
}

func (n *LaunchNote) decode(o jobj) (err error) {
	n.Version = versionOf(o)
	if n.Login, n.Project, err = readKey(o); err != nil {
		return err
	}
	if n.Workspace, err = o.str("workspace", true, "a launch names the post holding its workspace definition"); err != nil {
		return err
	}
	if n.Session, err = o.str("session", true, "a launch names the post holding its session definition"); err != nil {
		return err
	}
	if n.Release, err = o.optStr("release"); err != nil {
		return err
	}
	if n.Release == "" {
		n.Release = ReleaseCurrent
	}
	n.Checkin, err = o.optStr("checkin")
	return err
}

// Encode renders the canonical block; it always writes the release.
func (n *LaunchNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *LaunchNote) String() string {
	return newLine(KindLaunch).version(n.Version).word(n.Login+"/"+n.Project).kv("workspace", n.Workspace).
		kv("session", n.Session).kv("release", n.Release).optKV("checkin", n.Checkin).String()
}

// Origin (daemon, terminal, orphan) is declared in daemon_ids.go, which the
// daemon's vocabulary shares with the notes.

func checkOrigin(field string, o Origin) error {
	switch o {
	case OriginDaemon, OriginTerminal, OriginOrphan:
		return nil
	case "":
		return fieldErr(field, ErrMissing, "is empty; it is daemon, terminal or orphan")
	}
	return fieldErr(field, ErrInvalid, fmt.Sprintf("%s is not how a process was started (daemon, terminal, orphan)", quoteShort(string(o))))
}

// ProcessInfo identifies a running process as the process table shows it: its
// PID and start time (field 22 of /proc/PID/stat, clock ticks since boot, D6),
// its command line, and how it was started.
type ProcessInfo struct {
	PID       int      `json:"pid"`
	StartTime uint64   `json:"start_time"`
	Command   []string `json:"command"`
	StartedBy Origin   `json:"started_by"`
}

// Bounds on the command line NewProcessInfo keeps.
const (
	maxHolderArgs  = 64
	maxHolderBytes = 16 << 10
)

// NewProcessInfo builds a ProcessInfo from what the process table read, making
// the command line safe to carry in a note: each argument becomes valid UTF-8
// without control characters (CleanText), one longer than MaxTextLen is cut on
// a character boundary, and past 64 arguments or 16 KiB the rest is replaced by
// one argument saying how many were left out. A refusal note must be writable
// whatever a process's command line holds.
func NewProcessInfo(pid int, start uint64, argv []string, by Origin) ProcessInfo {
	cmd := make([]string, 0, min(len(argv), maxHolderArgs+1))
	total := 0
	for i, a := range argv {
		a = CleanText(a)
		if len(a) > MaxTextLen {
			cut := MaxTextLen
			for cut > 0 && !utf8RuneStart(a[cut]) {
				cut--
			}
			a = a[:cut]
		}
		if i == maxHolderArgs || total+len(a) > maxHolderBytes {
			cmd = append(cmd, fmt.Sprintf("(%d more arguments left out)", len(argv)-i))
			break
		}
		total += len(a)
		cmd = append(cmd, a)
	}
	if len(cmd) == 0 {
		cmd = append(cmd, "(no command line)")
	} else if cmd[0] == "" {
		cmd[0] = "(empty)"
	}
	return ProcessInfo{PID: pid, StartTime: start, Command: cmd, StartedBy: by}
}

func (p *ProcessInfo) validate(field string) error {
	if err := checkPID(joinField(field, "pid"), p.PID); err != nil {
		return err
	}
	if err := checkStartTime(joinField(field, "start_time"), p.StartTime); err != nil {
		return err
	}
	if len(p.Command) == 0 {
		return fieldErr(joinField(field, "command"), ErrMissing, "is empty; it is the process's command line, as /proc/PID/cmdline holds it")
	}
	for i, a := range p.Command {
		if err := checkArg(indexField(joinField(field, "command"), i), a); err != nil {
			return err
		}
	}
	if p.Command[0] == "" {
		return fieldErr(indexField(joinField(field, "command"), 0), ErrInvalid, "is empty; it names the program")
	}
	return checkOrigin(joinField(field, "started_by"), p.StartedBy)
}

func (p *ProcessInfo) decode(o jobj) (err error) {
	if p.PID, p.StartTime, err = readProcess(o); err != nil {
		return err
	}
	if p.Command, err = o.strs("command", true, "the process's command line"); err != nil {
		return err
	}
	s, err := o.str("started_by", true, "how the process was started: daemon, terminal or orphan")
	p.StartedBy = Origin(s)
	return err
}

func (p *ProcessInfo) String() string {
	return fmt.Sprintf("pid=%d start_time=%d started_by=%s command=%s", p.PID, p.StartTime, token(string(p.StartedBy)), tokens(p.Command))
}

func checkPID(field string, pid int) error {
	if pid < 1 || pid > MaxPID {
		return fieldErr(field, ErrInvalid, fmt.Sprintf("%d is not a PID (1 to %d)", pid, MaxPID))
	}
	return nil
}

func checkStartTime(field string, t uint64) error {
	if t > MaxSafeInt {
		return fieldErr(field, ErrInvalid, fmt.Sprintf("%d is past 2^53-1, which not every JSON reader reads exactly", t))
	}
	return nil
}

func readProcess(o jobj) (pid int, start uint64, err error) {
	p, _, err := o.uint("pid", true, MaxPID, "a process is named by its PID and start time")
	if err != nil {
		return 0, 0, err
	}
	start, _, err = o.uint("start_time", true, MaxSafeInt, "a process is named by its PID and start time (clock ticks since boot)")
	return int(p), start, err
}

// RefusalNote says the daemon did not launch a session, in words a person reads:
// written by the node user on the session's own record, replying to the launch.
// Holder is the process that already names the workspace, when that is why.
// Login and Project name the workspace the launch was for; Login is absent
// when the launch note names none the daemon could read (the refusal then
// says what is wrong with it).
type RefusalNote struct {
	Version int          `json:"-"`
	Launch  string       `json:"launch"`
	Login   string       `json:"login,omitempty"`
	Project string       `json:"project"`
	Reason  string       `json:"reason"`
	Holder  *ProcessInfo `json:"holder,omitempty"`
}

// NoteKind is "refusal".
func (*RefusalNote) NoteKind() NoteKind { return KindRefusal }

func (n *RefusalNote) version() int { return n.Version }

// Validate checks every field.
func (n *RefusalNote) Validate() error {
	if err := checkVersion(n.Version); err != nil {
		return err
	}
	if n.Login != "" {
		if err := checkLogin("login", n.Login); err != nil {
			return err
		}
	}
	if err := checkProject("project", n.Project); err != nil {
		return err
	}
	if err := checkHash("launch", n.Launch); err != nil {
		return err
	}
	if err := checkText("reason", n.Reason, true, MaxTextLen); err != nil {
		return err
	}
	if n.Holder != nil {
		return n.Holder.validate("holder")
	}
	return nil
}

func (n *RefusalNote) decode(o jobj) (err error) {
	n.Version = versionOf(o)
	if n.Launch, err = o.str("launch", true, "a refusal names the launch it refuses"); err != nil {
		return err
	}
	if n.Login, err = o.str("login", false, ""); err != nil {
		return err
	}
	if o.has("login") && n.Login == "" {
		return fieldErr("login", ErrInvalid, "is empty; a refusal for no known login leaves it out")
	}
	if n.Project, err = o.str("project", true, "a refusal names the project of the launch it refuses"); err != nil {
		return err
	}
	if n.Reason, err = o.str("reason", true, "a refusal says why, in words a person reads"); err != nil {
		return err
	}
	h, present, err := o.object("holder", false, "")
	if err != nil || !present {
		return err
	}
	n.Holder = &ProcessInfo{}
	return n.Holder.decode(h)
}

// Encode renders the canonical block.
func (n *RefusalNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *RefusalNote) String() string {
	l := newLine(KindRefusal).version(n.Version).word(n.Login + "/" + n.Project)
	if n.Login == "" {
		l = newLine(KindRefusal).version(n.Version).kv("project", n.Project)
	}
	l.kv("launch", n.Launch).text("reason", n.Reason)
	if n.Holder != nil {
		l.b.WriteString(" holder{")
		l.b.WriteString(n.Holder.String())
		l.b.WriteString("}")
	}
	return l.String()
}

// EndStatus says how a session's process ended.
type EndStatus string

// The statuses of an end note (D6).
const (
	// EndExited: it exited by itself; ExitCode says with what.
	EndExited EndStatus = "exited"
	// EndSignaled: a signal ended it; Signal names it.
	EndSignaled EndStatus = "signaled"
	// EndUnknown: the daemon saw it gone but could not reap it (not its child),
	// so it records no guessed exit status.
	EndUnknown EndStatus = "unknown"
	// EndSandboxFailed: the sandbox could not be set up, so the session never ran.
	EndSandboxFailed EndStatus = "sandbox-failed"
)

// CIResult is a CI run's result on a check-in.
type CIResult string

// The results: the ci tag says green or red; an end note may also say none,
// when the run left no result on the check-in it was launched for (D5).
const (
	CIGreen CIResult = "green"
	CIRed   CIResult = "red"
	CINone  CIResult = "none"
)

// EndNote records a session's end: written by the node user on the session's
// own record, replying to the launch, at most once per process (PID and start
// time, D6).
type EndNote struct {
	Version   int       `json:"-"`
	Launch    string    `json:"launch"`
	Login     string    `json:"login"`
	Project   string    `json:"project"`
	PID       int       `json:"pid"`
	StartTime uint64    `json:"start_time"`
	Status    EndStatus `json:"status"`
	// ExitCode is set for exited (required) and sandbox-failed (when known).
	ExitCode *int `json:"exit_code,omitempty"`
	// Signal names the signal for signaled, as SIGTERM.
	Signal string `json:"signal,omitempty"`
	// Killed says the daemon sent SIGKILL after the stop grace ran out.
	Killed bool `json:"killed"`
	// Release is the release the process ran: the name of its directory under
	// the release root's releases/, or the directory of a developer's build.
	Release string `json:"release"`
	// Seen is when the daemon saw the process end, in UTC.
	Seen time.Time `json:"seen"`
	// Checkin is, for a CI run, the check-in it was launched to test.
	Checkin string `json:"checkin,omitempty"`
	// Result is, for a CI run, what the check-in carried when the run ended:
	// green, red, or none (then the daemon does not launch again, D5).
	Result CIResult `json:"result,omitempty"`
	// Note says the end in words.
	Note string `json:"note"`
}

// NoteKind is "end".
func (*EndNote) NoteKind() NoteKind { return KindEnd }

// StatusString renders how the process ended: "exited 0", "signaled
// SIGKILL", "unknown".
func (n *EndNote) StatusString() string {
	switch n.Status {
	case EndExited, EndSandboxFailed:
		if n.ExitCode != nil {
			return string(n.Status) + " " + strconv.Itoa(*n.ExitCode)
		}
	case EndSignaled:
		return string(n.Status) + " " + n.Signal
	case "":
		return "no status"
	}
	return string(n.Status)
}

func (n *EndNote) version() int { return n.Version }

// Validate checks every field and that the status, exit code, signal and
// killed agree.
func (n *EndNote) Validate() error {
	if err := checkHeader(n.Version, n.Login, n.Project); err != nil {
		return err
	}
	if err := checkHash("launch", n.Launch); err != nil {
		return err
	}
	if err := checkPID("pid", n.PID); err != nil {
		return err
	}
	if err := checkStartTime("start_time", n.StartTime); err != nil {
		return err
	}
	if n.ExitCode != nil && (*n.ExitCode < 0 || *n.ExitCode > 255) {
		return fieldErr("exit_code", ErrInvalid, fmt.Sprintf("%d is not an exit code (0 to 255)", *n.ExitCode))
	}
	if n.Signal != "" {
		if err := checkSignal("signal", n.Signal); err != nil {
			return err
		}
	}
	switch n.Status {
	case EndExited:
		if n.ExitCode == nil {
			return fieldErr("exit_code", ErrMissing, "is missing; an exited process has an exit code")
		}
		if n.Signal != "" {
			return fieldErr("signal", ErrInvalid, "an exited process was not ended by a signal")
		}
		if n.Killed {
			return fieldErr("killed", ErrInvalid, "is true, but a killed process is signaled, not exited")
		}
	case EndSignaled:
		if n.Signal == "" {
			return fieldErr("signal", ErrMissing, "is missing; a signaled process names the signal, as SIGTERM")
		}
		if n.ExitCode != nil {
			return fieldErr("exit_code", ErrInvalid, "a signaled process has no exit code")
		}
	case EndUnknown:
		if n.ExitCode != nil {
			return fieldErr("exit_code", ErrInvalid, "an end the daemon could not reap has no exit code; it is never guessed")
		}
		if n.Signal != "" {
			return fieldErr("signal", ErrInvalid, "an end the daemon could not reap has no signal; it is never guessed")
		}
	case EndSandboxFailed:
		if n.Signal != "" {
			return fieldErr("signal", ErrInvalid, "a sandbox that failed to start names no signal")
		}
		if n.Killed {
			return fieldErr("killed", ErrInvalid, "is true, but a sandbox that failed to start was not killed")
		}
	case "":
		return fieldErr("status", ErrMissing, "is empty; it is exited, signaled, unknown or sandbox-failed")
	default:
		return fieldErr("status", ErrInvalid, fmt.Sprintf("%s is not an end status (exited, signaled, unknown, sandbox-failed)", quoteShort(string(n.Status))))
	}
	if err := checkLine("release", n.Release, true, MaxShortLen); err != nil {
		return err
	}
	if err := checkTime("seen", n.Seen); err != nil {
		return err
	}
	if err := checkOptHash("checkin", n.Checkin); err != nil {
		return err
	}
	switch n.Result {
	case "":
	case CIGreen, CIRed, CINone:
		if n.Checkin == "" {
			return fieldErr("result", ErrInvalid, "a result belongs to a CI run; the note names no checkin")
		}
	default:
		return fieldErr("result", ErrInvalid, fmt.Sprintf("%s is not a CI result (green, red, none)", quoteShort(string(n.Result))))
	}
	return checkText("note", n.Note, true, MaxTextLen)
}

// checkSignal checks a signal's name: SIG, then capitals and digits, and for a
// real-time signal an offset, as SIGRTMIN+3.
func checkSignal(field, s string) error {
	rest, ok := strings.CutPrefix(s, "SIG")
	bad := !ok || rest == "" || len(s) > 32
	if !bad {
		name, off, hasOff := strings.Cut(rest, "+")
		if !hasOff {
			name, off, hasOff = strings.Cut(rest, "-")
		}
		bad = name == "" || name[0] < 'A' || name[0] > 'Z'
		for i := 0; !bad && i < len(name); i++ {
			c := name[i]
			bad = !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
		}
		if !bad && hasOff {
			_, err := strconv.ParseUint(off, 10, 8)
			bad = off == "" || err != nil || off[0] == '+'
		}
	}
	if bad {
		return fieldErr(field, ErrInvalid, fmt.Sprintf("%s is not a signal's name, as SIGTERM or SIGRTMIN+3", quoteShort(s)))
	}
	return nil
}

func checkTime(field string, t time.Time) error {
	if t.IsZero() {
		return fieldErr(field, ErrMissing, "is missing; it is when the end was seen, in UTC")
	}
	if y := t.UTC().Year(); y < 1970 || y > 9999 {
		return fieldErr(field, ErrInvalid, fmt.Sprintf("year %d is out of range (1970 to 9999)", y))
	}
	return nil
}

// readTime reads an RFC 3339 time in UTC, written with Z.
func readTime(o jobj, key, what string) (time.Time, error) {
	s, err := o.str(key, true, what)
	if err != nil {
		return time.Time{}, err
	}
	// Go's RFC 3339 readers take forms RFC 3339 does not (a one-digit hour,
	// a comma before the fraction), so the shape is checked first.
	var t time.Time
	perr := t.UnmarshalText([]byte(s))
	if perr != nil || !utcShape(s) {
		return time.Time{}, fieldErr(o.field(key), ErrInvalid, fmt.Sprintf("%s is not a time in UTC as RFC 3339 writes it (2026-10-13T09:30:00Z)", quoteShort(s)))
	}
	return t.UTC(), nil
}

// utcShape says whether s is YYYY-MM-DDTHH:MM:SS, an optional fraction of one
// to nine digits after '.', and Z: the one form an end note's time takes.
func utcShape(s string) bool {
	const shape = "dddd-dd-ddTdd:dd:dd"
	if len(s) < len(shape)+1 || s[len(s)-1] != 'Z' {
		return false
	}
	for i := 0; i < len(shape); i++ {
		if shape[i] == 'd' {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		} else if s[i] != shape[i] {
			return false
		}
	}
	frac := s[len(shape) : len(s)-1]
	if frac == "" {
		return true
	}
	if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
		return false
	}
	for i := 1; i < len(frac); i++ {
		if frac[i] < '0' || frac[i] > '9' {
			return false
		}
	}
	return true
}

func (n *EndNote) decode(o jobj) (err error) {
	n.Version = versionOf(o)
	if n.Launch, err = o.str("launch", true, "an end names the launch it ends"); err != nil {
		return err
	}
	if n.Login, n.Project, err = readKey(o); err != nil {
		return err
	}
	if n.PID, n.StartTime, err = readProcess(o); err != nil {
		return err
	}
	s, err := o.str("status", true, "an end says how the process ended: exited, signaled, unknown or sandbox-failed")
	if err != nil {
		return err
	}
	n.Status = EndStatus(s)
	code, present, err := o.uint("exit_code", false, 255, "")
	if err != nil {
		return err
	}
	if present {
		c := int(code)
		n.ExitCode = &c
	}
	if n.Signal, err = o.optStr("signal"); err != nil {
		return err
	}
	if n.Killed, err = o.boolean("killed", true, "an end says whether the daemon killed the process after the stop grace"); err != nil {
		return err
	}
	if n.Release, err = o.str("release", true, "an end names the release the process ran"); err != nil {
		return err
	}
	if n.Seen, err = readTime(o, "seen", "an end says when it was seen, in UTC"); err != nil {
		return err
	}
	if n.Checkin, err = o.optStr("checkin"); err != nil {
		return err
	}
	r, err := o.optStr("result")
	if err != nil {
		return err
	}
	n.Result = CIResult(r)
	n.Note, err = o.str("note", true, "an end says what happened in words")
	return err
}

// Encode renders the canonical block, with Seen in UTC.
func (n *EndNote) Encode() ([]byte, error) {
	c := *n
	c.Seen = c.Seen.UTC()
	return encodeChecked(&c)
}

// String renders the note on one line.
func (n *EndNote) String() string {
	l := newLine(KindEnd).version(n.Version).word(n.Login+"/"+n.Project).kv("launch", n.Launch).
		kv("pid", strconv.Itoa(n.PID)).num("start_time", n.StartTime).kv("status", string(n.Status))
	if n.ExitCode != nil {
		l.kv("exit_code", strconv.Itoa(*n.ExitCode))
	}
	l.optKV("signal", n.Signal).flag("killed", n.Killed).kv("release", n.Release).
		kv("seen", n.Seen.UTC().Format(time.RFC3339Nano)).optKV("checkin", n.Checkin).optKV("result", string(n.Result))
	return l.text("note", n.Note).String()
}

// StopNote asks the sessions on its record to stop: written by anyone but the
// agent, on the session's own record. A plain post whose text is "OCX stop" is
// the same request. Login, when set, stops only that login's session there.
type StopNote struct {
	Version int    `json:"-"`
	Login   string `json:"login,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// NoteKind is "stop".
func (*StopNote) NoteKind() NoteKind { return KindStop }

func (n *StopNote) version() int { return n.Version }

// Validate checks the login, when set, and the reason.
func (n *StopNote) Validate() error {
	if err := checkVersion(n.Version); err != nil {
		return err
	}
	if n.Login != "" {
		if err := checkLogin("login", n.Login); err != nil {
			return err
		}
	}
	return checkText("reason", n.Reason, false, MaxTextLen)
}

func (n *StopNote) decode(o jobj) (err error) {
	n.Version = versionOf(o)
	if n.Login, err = o.optStr("login"); err != nil {
		return err
	}
	n.Reason, err = o.optStr("reason")
	return err
}

// Encode renders the canonical block.
func (n *StopNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *StopNote) String() string {
	return newLine(KindStop).version(n.Version).optKV("login", n.Login).text("reason", n.Reason).String()
}

// StopCause says what stopped a session.
type StopCause string

// The causes (D4): a stop request on the record, or a signal (TERM from the daemon).
const (
	StopByRequest StopCause = "request"
	StopBySignal  StopCause = "signal"
)

// StoppedNote is what a session writes, as its agent login on its own record,
// when it stops on request or on TERM, before it exits 0.
type StoppedNote struct {
	Version int    `json:"-"`
	Login   string `json:"login"`
	Project string `json:"project"`
	// Launch is the launch the session served; a terminal session has none.
	Launch string    `json:"launch,omitempty"`
	Cause  StopCause `json:"cause"`
	// Request is the stop post it obeyed (cause request).
	Request string `json:"request,omitempty"`
	// Signal names the signal it obeyed (cause signal), as SIGTERM.
	Signal string `json:"signal,omitempty"`
}

// NoteKind is "stopped".
func (*StoppedNote) NoteKind() NoteKind { return KindStopped }

func (n *StoppedNote) version() int { return n.Version }

// Validate checks every field and that the cause has what it needs.
func (n *StoppedNote) Validate() error {
	if err := checkHeader(n.Version, n.Login, n.Project); err != nil {
		return err
	}
	if err := checkOptHash("launch", n.Launch); err != nil {
		return err
	}
	switch n.Cause {
	case StopByRequest:
		if err := checkHash("request", n.Request); err != nil {
			return err
		}
		if n.Signal != "" {
			return fieldErr("signal", ErrInvalid, "a session stopped by a request names the request, not a signal")
		}
	case StopBySignal:
		if n.Signal == "" {
			return fieldErr("signal", ErrMissing, "is missing; a session stopped by a signal names it, as SIGTERM")
		}
		if err := checkSignal("signal", n.Signal); err != nil {
			return err
		}
		if n.Request != "" {
			return fieldErr("request", ErrInvalid, "a session stopped by a signal names the signal, not a request")
		}
	case "":
		return fieldErr("cause", ErrMissing, "is empty; it is request or signal")
	default:
		return fieldErr("cause", ErrInvalid, fmt.Sprintf("%s is not a cause (request, signal)", quoteShort(string(n.Cause))))
	}
	return nil
}

func (n *StoppedNote) decode(o jobj) (err error) {
	n.Version = versionOf(o)
	if n.Login, n.Project, err = readKey(o); err != nil {
		return err
	}
	if n.Launch, err = o.optStr("launch"); err != nil {
		return err
	}
	c, err := o.str("cause", true, "a stopped note says what stopped the session: request or signal")
	if err != nil {
		return err
	}
	n.Cause = StopCause(c)
	if n.Request, err = o.optStr("request"); err != nil {
		return err
	}
	n.Signal, err = o.optStr("signal")
	return err
}

// Encode renders the canonical block.
func (n *StoppedNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *StoppedNote) String() string {
	return newLine(KindStopped).version(n.Version).word(n.Login+"/"+n.Project).optKV("launch", n.Launch).
		kv("cause", string(n.Cause)).optKV("request", n.Request).optKV("signal", n.Signal).String()
}

// TerminatedNote ends a workspace: written by the caller on the workspace's
// record; the workspace is then removed from the host.
type TerminatedNote struct {
	Version int    `json:"-"`
	Login   string `json:"login"`
	Project string `json:"project"`
	Reason  string `json:"reason,omitempty"`
}

// NoteKind is "terminated".
func (*TerminatedNote) NoteKind() NoteKind { return KindTerminated }

func (n *TerminatedNote) version() int { return n.Version }

// Key is the workspace it ends.
func (n *TerminatedNote) Key() WorkspaceKey { return WorkspaceKey{Login: n.Login, Project: n.Project} }

// Validate checks the names and the reason.
func (n *TerminatedNote) Validate() error {
	if err := checkHeader(n.Version, n.Login, n.Project); err != nil {
		return err
	}
	return checkText("reason", n.Reason, false, MaxTextLen)
}

func (n *TerminatedNote) decode(o jobj) (err error) {
	n.Version = versionOf(o)
	if n.Login, n.Project, err = readKey(o); err != nil {
		return err
	}
	n.Reason, err = o.optStr("reason")
	return err
}

// Encode renders the canonical block.
func (n *TerminatedNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *TerminatedNote) String() string {
	return newLine(KindTerminated).version(n.Version).word(n.Login+"/"+n.Project).text("reason", n.Reason).String()
}

// checkHeader checks what most notes carry: the version, the login, the project.
func checkHeader(version int, login, project string) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	if err := checkLogin("login", login); err != nil {
		return err
	}
	return checkProject("project", project)
}

func checkOptHash(field, s string) error {
	if s == "" {
		return nil
	}
	return checkHash(field, s)
}

// readKey reads the login and project of a note.
func readKey(o jobj) (login, project string, err error) {
	if login, err = o.str("login", true, "the note names the agent login of its workspace"); err != nil {
		return "", "", err
	}
	project, err = o.str("project", true, "the note names the project of its workspace")
	return login, project, err
}

// encodeChecked validates a note and renders it.
func encodeChecked(n Note) ([]byte, error) {
	if err := n.Validate(); err != nil {
		return nil, at(n.NoteKind().where(), err)
	}
	return encodeNote(n.NoteKind(), n.version(), n)
}
