package pipe

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// pipeBuf is PIPE_BUF on Linux: a write of at most this many bytes to a pipe is
// atomic, so lines from concurrent writers never interleave. A pipe line,
// newline included, is at most pipeBuf bytes.
const pipeBuf = 4096

// The verbs of the daemon pipe's lines.
const (
	verbPost   = "post"
	verbStop   = "stop"
	verbReexec = "reexec"
	// verbRuns is `runs check`: check the node's runs (seed 004, section
	// 10's last paragraph).
	verbRuns = "runs"
	// verbRun is `run start REPOSITORY HASH USER`: a person holding admin
	// or setup starts a manual run with OCX's run tool (seed 004, section
	// 8), the tool having authenticated them.
	verbRun = "run"
	// verbBudget is `budget LOGIN PROJECT LAUNCH LIMIT USED`: a session's
	// model proxy says its budget is spent (D50).
	verbBudget = "budget"
)

// Line is one line the daemon reads from its pipe AGENTS/ocxd: a post to
// look at (from the hook and the console), a stop request (from the console), or
// a re-exec request (from the console after a release is accepted or rolled back).
type Line interface {
	// Validate checks every field.
	Validate() error
	// Encode validates and renders the line with its newline, at most pipeBuf bytes.
	Encode() ([]byte, error)
	// String renders the line without its newline, quoting any field that would
	// not survive as one token, so that it is one line even for invalid values.
	String() string
	pipeLine()
}

// PostLine is `post REPOSITORY HASH`: an artifact arrived in a repository (from
// the hook), or a launch note was written (from the console). The daemon reads
// the artifact and acts if it is a note of its concern.
type PostLine struct {
	Repository string // the repository file: absolute, clean, PROJECT.fossil
	Hash       string // the artifact's full hash
}

// StopLine is `stop LOGIN PROJECT`: stop the session of the workspace
// LOGIN/PROJECT (the seeds' `stop LOGIN KEY`; the key is the project, D1).
type StopLine struct {
	Login   string
	Project string
}

// ReexecLine is `reexec`: exec the current release's ocxd in place, keeping the
// daemon's PID and its children.
type ReexecLine struct{}

// RunsCheckLine is `runs check`: find the node's runs whose started counts,
// whose ended does not, and which it does not have in its care with a live
// process, and end each lost (seed 004, section 10).
type RunsCheckLine struct{}

func (RunsCheckLine) pipeLine() {}

// Validate has nothing to check.
func (RunsCheckLine) Validate() error { return nil }

// Encode renders "runs check\n".
func (RunsCheckLine) Encode() ([]byte, error) { return []byte(verbRuns + " check\n"), nil }

// String renders "runs check".
func (RunsCheckLine) String() string { return verbRuns + " check" }

// RunStartLine is `run start REPOSITORY HASH USER`: the run tool asks the
// daemon to start the manual run HASH of REPOSITORY for USER, a login it
// authenticated over sync. The daemon checks again that USER holds admin or
// setup, and section 11's refusals, before it starts anything. Only the
// node's own OS user can write the pipe, so the line is the tool's word
// that it checked the password; the standing is the record's.
type RunStartLine struct {
	Repository string // the repository file: absolute, clean, PROJECT.fossil
	Hash       string // the run's full hash
	By         string // the login that starts it
}

func (RunStartLine) pipeLine() {}

// Validate checks the repository path, the hash and the login.
func (l RunStartLine) Validate() error {
	if err := messages.CheckRepository("repository", l.Repository); err != nil {
		return strictjson.At("run start line", err)
	}
	if err := messages.CheckHash("hash", l.Hash); err != nil {
		return strictjson.At("run start line", err)
	}
	return strictjson.At("run start line", messages.CheckLogin("user", l.By))
}

// Encode renders "run start REPOSITORY HASH USER\n".
func (l RunStartLine) Encode() ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return finishLine("run start line", verbRun+" start "+l.Repository+" "+l.Hash+" "+l.By)
}

// String renders the line without its newline.
func (l RunStartLine) String() string {
	return verbRun + " start " + messages.Token(l.Repository) + " " + messages.Token(l.Hash) + " " + messages.Token(l.By)
}

// BudgetLine is `budget LOGIN PROJECT LAUNCH tokens USED`: the model proxy
// of the session of workspace LOGIN/PROJECT serving launch LAUNCH says its
// tokens budget is spent, USED tokens counted (D50); the daemon ends that
// session as past its wall. Written by the session's MCP server, a process
// of the node outside every sandbox: only the node's own OS user can
// write the pipe, which is in no sandbox, so no agent can write this line.
// The launch names the session, so a line a server sends again after its
// session ended stops no later one.
type BudgetLine struct {
	Login   string
	Project string
	Launch  string // the launch note the session serves: a full hash
	Limit   string // LimitTokens, the one limit a proxy counts
	Used    uint64 // what the proxy counted
}

func (BudgetLine) pipeLine() {}

// Key is the workspace the line names.
func (l BudgetLine) Key() messages.WorkspaceKey {
	return messages.WorkspaceKey{Login: l.Login, Project: l.Project}
}

// Validate checks the names, the launch, the limit and the count.
func (l BudgetLine) Validate() error {
	if err := l.Key().Validate(); err != nil {
		return strictjson.At("budget line", err)
	}
	if err := messages.CheckHash("launch", l.Launch); err != nil {
		return strictjson.At("budget line", err)
	}
	if l.Limit != messages.LimitTokens {
		return strictjson.At("budget line", strictjson.FieldErr("limit", strictjson.ErrInvalid, fmt.Sprintf("%s is not a limit a model proxy counts (tokens)", strictjson.QuoteShort(l.Limit))))
	}
	if l.Used > modelapi.MaxTokens {
		return strictjson.At("budget line", strictjson.FieldErr("used", strictjson.ErrInvalid, "is past 2^53-1"))
	}
	return nil
}

// Encode renders "budget LOGIN PROJECT LAUNCH LIMIT USED\n".
func (l BudgetLine) Encode() ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return finishLine("budget line", l.String())
}

// String renders the line without its newline.
func (l BudgetLine) String() string {
	return verbBudget + " " + messages.Token(l.Login) + " " + messages.Token(l.Project) + " " + messages.Token(l.Launch) + " " + messages.Token(l.Limit) + " " + strconv.FormatUint(l.Used, 10)
}

func (PostLine) pipeLine()   {}
func (StopLine) pipeLine()   {}
func (ReexecLine) pipeLine() {}

// Validate checks the repository path and the hash.
func (l PostLine) Validate() error {
	if err := messages.CheckRepository("repository", l.Repository); err != nil {
		return strictjson.At("post line", err)
	}
	return strictjson.At("post line", messages.CheckHash("hash", l.Hash))
}

// Project is the project the repository holds.
func (l PostLine) Project() string { return messages.ProjectOf(l.Repository) }

// Encode renders "post REPOSITORY HASH\n".
func (l PostLine) Encode() ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return finishLine("post line", verbPost+" "+l.Repository+" "+l.Hash)
}

// String renders the line without its newline.
func (l PostLine) String() string {
	return verbPost + " " + messages.Token(l.Repository) + " " + messages.Token(l.Hash)
}

// Validate checks both names.
func (l StopLine) Validate() error {
	return strictjson.At("stop line", messages.WorkspaceKey{Login: l.Login, Project: l.Project}.Validate())
}

// Key is the workspace the line names.
func (l StopLine) Key() messages.WorkspaceKey {
	return messages.WorkspaceKey{Login: l.Login, Project: l.Project}
}

// Encode renders "stop LOGIN PROJECT\n".
func (l StopLine) Encode() ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return finishLine("stop line", verbStop+" "+l.Login+" "+l.Project)
}

// String renders the line without its newline.
func (l StopLine) String() string {
	return verbStop + " " + messages.Token(l.Login) + " " + messages.Token(l.Project)
}

// Validate has nothing to check: reexec has no arguments.
func (ReexecLine) Validate() error { return nil }

// Encode renders "reexec\n".
func (ReexecLine) Encode() ([]byte, error) { return []byte(verbReexec + "\n"), nil }

// String renders "reexec".
func (ReexecLine) String() string { return verbReexec }

func finishLine(where, s string) ([]byte, error) {
	if len(s)+1 > pipeBuf {
		return nil, &strictjson.FieldError{Where: where, Problem: fmt.Sprintf("is %d bytes with its newline; a pipe line is at most %d (PIPE_BUF)", len(s)+1, pipeBuf), Err: strictjson.ErrTooLong}
	}
	b := make([]byte, 0, len(s)+1)
	b = append(b, s...)
	return append(b, '\n'), nil
}

// Parse reads one pipe line. The line may end in one '\n', which is
// not part of it; it must hold no other control character. Fields are separated
// by exactly one space. Every field is validated, and the error names the field.
func Parse(line []byte) (Line, error) {
	const where = "pipe line"
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	} else {
		n++ // as written, it will carry its newline
	}
	if n > pipeBuf {
		return nil, &strictjson.FieldError{Where: where, Problem: fmt.Sprintf("is %d bytes with its newline; a pipe line is at most %d (PIPE_BUF)", n, pipeBuf), Err: strictjson.ErrTooLong}
	}
	if len(line) == 0 {
		return nil, &strictjson.FieldError{Where: where, Problem: "is empty", Err: strictjson.ErrSyntax}
	}
	if !utf8.Valid(line) {
		return nil, &strictjson.FieldError{Where: where, Problem: "is not valid UTF-8", Err: strictjson.ErrSyntax}
	}
	for i, r := range string(line) {
		if unicode.IsControl(r) {
			return nil, &strictjson.FieldError{Where: where, Problem: fmt.Sprintf("holds the control character %s at byte %d", strconv.QuoteRune(r), i), Err: strictjson.ErrSyntax}
		}
	}
	fields := bytes.Split(line, []byte{' '})
	for i, f := range fields {
		if len(f) == 0 {
			return nil, &strictjson.FieldError{Where: where, Problem: fmt.Sprintf("field %d is empty: fields are separated by exactly one space, with none before or after", i+1), Err: strictjson.ErrSyntax}
		}
	}
	verb := string(fields[0])
	args := fields[1:]
	switch verb {
	case verbPost:
		if len(args) != 2 {
			return nil, arity(where, "post REPOSITORY HASH", len(args))
		}
		l := PostLine{Repository: string(args[0]), Hash: string(args[1])}
		if err := l.Validate(); err != nil {
			return nil, err
		}
		return l, nil
	case verbStop:
		if len(args) != 2 {
			return nil, arity(where, "stop LOGIN PROJECT", len(args))
		}
		l := StopLine{Login: string(args[0]), Project: string(args[1])}
		if err := l.Validate(); err != nil {
			return nil, err
		}
		return l, nil
	case verbReexec:
		if len(args) != 0 {
			return nil, arity(where, "reexec", len(args))
		}
		return ReexecLine{}, nil
	case verbRuns:
		if len(args) != 1 || string(args[0]) != "check" {
			return nil, arity(where, "runs check", len(args))
		}
		return RunsCheckLine{}, nil
	case verbRun:
		if len(args) != 4 || string(args[0]) != "start" {
			return nil, arity(where, "run start REPOSITORY HASH USER", len(args))
		}
		l := RunStartLine{Repository: string(args[1]), Hash: string(args[2]), By: string(args[3])}
		if err := l.Validate(); err != nil {
			return nil, err
		}
		return l, nil
	case verbBudget:
		if len(args) != 5 {
			return nil, arity(where, "budget LOGIN PROJECT LAUNCH LIMIT USED", len(args))
		}
		used, err := strconv.ParseUint(string(args[4]), 10, 64)
		if err != nil || args[4][0] == '+' || (len(args[4]) > 1 && args[4][0] == '0') {
			return nil, &strictjson.FieldError{Where: "budget line", Field: "used", Problem: fmt.Sprintf("%s is not a whole number", strictjson.QuoteShort(string(args[4]))), Err: strictjson.ErrInvalid}
		}
		l := BudgetLine{Login: string(args[0]), Project: string(args[1]), Launch: string(args[2]), Limit: string(args[3]), Used: used}
		if err := l.Validate(); err != nil {
			return nil, err
		}
		return l, nil
	default:
		return nil, &strictjson.FieldError{Where: where, Field: "verb", Problem: fmt.Sprintf("%s is not a verb the daemon reads (post, stop, reexec, runs, run, budget)", strictjson.QuoteShort(verb)), Err: strictjson.ErrInvalid}
	}
}

func arity(where, shape string, got int) error {
	verb, _, _ := strings.Cut(shape, " ")
	return &strictjson.FieldError{Where: where, Problem: fmt.Sprintf("%s takes %d argument(s), as in %q; found %d", verb, strings.Count(shape, " "), shape, got), Err: strictjson.ErrSyntax}
}
