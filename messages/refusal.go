package messages

import (
	"fmt"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// Origin (daemon, terminal, orphan) is declared in daemon_ids.go, which the
// daemon's vocabulary shares with the notes.

func checkOrigin(field string, o Origin) error {
	switch o {
	case OriginDaemon, OriginTerminal, OriginOrphan:
		return nil
	case "":
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; it is daemon, terminal or orphan")
	}
	return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not how a process was started (daemon, terminal, orphan)", strictjson.QuoteShort(string(o))))
}

// holder is the process a refusal note names as holding the workspace, as
// the note writes it: its PID and start time (field 22 of /proc/PID/stat,
// clock ticks since boot, D6), its command line, and how it was started. It
// is the note's form of a process; the daemon's is ProcInfo, the process
// table's host.Process.
type holder struct {
	PID       int      `json:"pid" max:"pid" why:"a process is named by its PID and start time"`
	StartTime uint64   `json:"start_time" why:"a process is named by its PID and start time (clock ticks since boot)"`
	Command   []string `json:"command" why:"the process's command line"`
	StartedBy Origin   `json:"started_by" why:"how the process was started: daemon, terminal or orphan"`
}

// Bounds on the command line NewHolder keeps.
const (
	maxHolderArgs  = 64
	maxHolderBytes = 16 << 10
)

// NewHolder builds a Holder from what the process table read, making
// the command line safe to carry in a note: each argument becomes valid UTF-8
// without control characters (CleanText), one longer than MaxTextLen is cut on
// a character boundary, and past 64 arguments or 16 KiB the rest is replaced by
// one argument saying how many were left out. A refusal note must be writable
// whatever a process's command line holds.
func NewHolder(pid int, start uint64, argv []string, by Origin) holder {
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
	return holder{PID: pid, StartTime: start, Command: cmd, StartedBy: by}
}

func (p *holder) validate(field string) error {
	if err := checkPID(strictjson.JoinField(field, "pid"), p.PID); err != nil {
		return err
	}
	if err := checkStartTime(strictjson.JoinField(field, "start_time"), p.StartTime); err != nil {
		return err
	}
	if len(p.Command) == 0 {
		return strictjson.FieldErr(strictjson.JoinField(field, "command"), strictjson.ErrMissing, "is empty; it is the process's command line, as /proc/PID/cmdline holds it")
	}
	for i, a := range p.Command {
		if err := CheckArg(strictjson.IndexField(strictjson.JoinField(field, "command"), i), a); err != nil {
			return err
		}
	}
	if p.Command[0] == "" {
		return strictjson.FieldErr(strictjson.IndexField(strictjson.JoinField(field, "command"), 0), strictjson.ErrInvalid, "is empty; it names the program")
	}
	return checkOrigin(strictjson.JoinField(field, "started_by"), p.StartedBy)
}

func (p *holder) String() string {
	return fmt.Sprintf("pid=%d start_time=%d started_by=%s command=%s", p.PID, p.StartTime, Token(string(p.StartedBy)), tokens(p.Command))
}

// RefusalNote says the daemon did not launch a session, in words a person reads:
// written by the node user on the session's own record, replying to the launch.
// Holder is the process that already names the workspace, when that is why.
// Login and Project name the workspace the launch was for; Login is absent
// when the launch note names none the daemon could read (the refusal then
// says what is wrong with it).
type RefusalNote struct {
	Version int     `json:"-" ocx:"version"`
	Launch  string  `json:"launch" why:"a refusal names the launch it refuses"`
	Login   string  `json:"login,omitempty" ocx:"empty"`
	Project string  `json:"project" why:"a refusal names the project of the launch it refuses"`
	Reason  string  `json:"reason" why:"a refusal says why, in words a person reads"`
	Holder  *holder `json:"holder,omitempty"`
}

// NoteKind is "refusal".
func (*RefusalNote) NoteKind() NoteKind { return kindRefusal }

func (n *RefusalNote) version() int { return n.Version }

// Validate checks every field.
func (n *RefusalNote) Validate() error {
	if err := checkVersion(n.Version); err != nil {
		return err
	}
	if n.Login != "" {
		if err := CheckLogin("login", n.Login); err != nil {
			return err
		}
	}
	if err := CheckProject("project", n.Project); err != nil {
		return err
	}
	if err := CheckHash("launch", n.Launch); err != nil {
		return err
	}
	if err := CheckText("reason", n.Reason, true, MaxTextLen); err != nil {
		return err
	}
	if n.Holder != nil {
		return n.Holder.validate("holder")
	}
	return nil
}

// Encode renders the canonical block.
func (n *RefusalNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *RefusalNote) String() string {
	l := Render(kindRefusal).version(n.Version).Word(n.Login + "/" + n.Project)
	if n.Login == "" {
		l = Render(kindRefusal).version(n.Version).KV("project", n.Project)
	}
	l.KV("launch", n.Launch).Text("reason", n.Reason)
	if n.Holder != nil {
		l.b.WriteString(" holder{")
		l.b.WriteString(n.Holder.String())
		l.b.WriteString("}")
	}
	return l.String()
}

// Decoded refuses an empty login in the words of a refusal.
func (n *RefusalNote) Decoded(o strictjson.Obj) error {
	if o.Has("login") && n.Login == "" {
		return strictjson.FieldErr("login", strictjson.ErrInvalid, "is empty; a refusal for no known login leaves it out")
	}
	return nil
}
