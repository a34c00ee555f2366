package fossilio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// Sentinel errors. Every error fossilio returns wraps one of these, or an
// *fs.PathError for a missing file, so callers can test with errors.Is.
var (
	// ErrNotFound: no artifact has this hash or prefix.
	ErrNotFound = errors.New("fossilio: no such artifact")
	// ErrNoPassword is a clone that remembers its server and login but no
	// password (restrict no_password, fossilio.Forget); it is ErrNotFound.
	ErrNoPassword = fmt.Errorf("%w: the clone remembers no password", ErrNotFound)
	// ErrAmbiguous: a hash prefix names more than one artifact.
	ErrAmbiguous = errors.New("fossilio: ambiguous hash prefix")
	// ErrBadHash: the text is not a hash or a prefix of at least 10 hex digits.
	ErrBadHash = errors.New("fossilio: not a hash")
	// ErrNotRepository: the file exists but is not a Fossil repository.
	ErrNotRepository = errors.New("fossilio: not a Fossil repository")
	// ErrBusy: the repository stayed locked by a writer past the busy timeout.
	ErrBusy = errors.New("fossilio: repository is busy")
	// ErrMalformed: an artifact does not parse as Fossil would parse it.
	ErrMalformed = errors.New("fossilio: malformed artifact")
	// ErrWrongKind: the artifact is of another kind than the caller asked for.
	ErrWrongKind = errors.New("fossilio: artifact of another kind")
	// errRefused: the server refused a write, a fetch or a login.
	errRefused = errors.New("fossilio: refused by the server")
	// ErrPrivileged: admin (a) and setup (s) are never granted by OCX.
	ErrPrivileged = errors.New("fossilio: admin and setup are never granted")
	// ErrBadInput: an argument is not acceptable (a name, a capability, a field).
	ErrBadInput = errors.New("fossilio: bad input")
	// ErrNoSuchUser: the repository has no user of that login.
	ErrNoSuchUser = errors.New("fossilio: no such user")
	// ErrNoSuchPage: the repository has no wiki page of that name, or
	// none that anyone but a moderator may see yet.
	ErrNoSuchPage = errors.New("fossilio: no such wiki page")
	// errCommand: a fossil command failed (its output says why).
	errCommand = errors.New("fossilio: fossil command failed")
)

// HashError reports a hash or prefix that resolves to nothing, to several
// artifacts, or is not a hash at all.
type HashError struct {
	Op      string   // the operation, e.g. "resolve"
	Repo    string   // the repository file
	Hash    string   // the text given
	Matches []string // for an ambiguous prefix, the full hashes it matches (at most a few)
	Err     error    // ErrNotFound, ErrAmbiguous or ErrBadHash
}

func (e *HashError) Error() string {
	msg := fmt.Sprintf("%s %q in %s: %v", e.Op, e.Hash, e.Repo, e.Err)
	if len(e.Matches) > 0 {
		msg += " (matches " + strings.Join(e.Matches, ", ") + ")"
	}
	return msg
}

func (e *HashError) Unwrap() error { return e.Err }

// ParseError reports an artifact that does not parse: which line and why.
type ParseError struct {
	Hash   string // the artifact's hash, when known
	Line   int    // 1-based card number, 0 when the whole artifact is at fault
	Reason string
}

func (e *ParseError) Error() string {
	where := "artifact"
	if e.Hash != "" {
		where = "artifact " + e.Hash
	}
	if e.Line > 0 {
		return fmt.Sprintf("fossilio: %s: card %d: %s", where, e.Line, e.Reason)
	}
	return fmt.Sprintf("fossilio: %s: %s", where, e.Reason)
}

func (e *ParseError) Unwrap() error { return ErrMalformed }

// RefusedError carries the reason a Fossil server gave for refusing a write
// or a fetch.
type RefusedError struct {
	Op     string // "push" or "fetch"
	URL    string // the server, without credentials
	Login  string
	Reason string // the server's own words, decoded
}

func (e *RefusedError) Error() string {
	prep := "to"
	if e.Op != "push" {
		prep = "from"
	}
	return fmt.Sprintf("fossilio: %s %s %s as %q: server refused: %s", e.Op, prep, e.URL, e.Login, e.Reason)
}

func (e *RefusedError) Unwrap() error { return errRefused }

// CommandError reports a fossil command that failed, with what it printed.
// Fossil's sync commands exit 0 on failure, so the output is what tells.
type CommandError struct {
	Args   []string // the arguments, passwords masked
	Output string   // what it printed (stdout and stderr), trimmed
	Err    error    // the exit error, or nil when only the output told
}

func (e *CommandError) Error() string {
	msg := "fossil " + strings.Join(e.Args, " ") + ": "
	if e.Err != nil {
		msg += e.Err.Error() + ": "
	}
	out := e.Output
	if len(out) > 2000 {
		out = out[:2000] + "..."
	}
	if out == "" {
		out = "(no output)"
	}
	return msg + out
}

func (e *CommandError) Unwrap() []error {
	if e.Err != nil {
		return []error{errCommand, e.Err}
	}
	return []error{errCommand}
}

// Unreachable says whether err is the server's absence rather than its
// refusal: the connection was refused or reset, the network or the
// server timed out, or the server (or a proxy before it) answered 5xx.
// A write that failed so may be made again once the server is back; one
// the server refused may not (D72).
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var re *RefusedError
	if errors.As(err, &re) {
		return strings.HasPrefix(re.Reason, "HTTP 5")
	}
	var ne net.Error
	var oe *net.OpError
	// A refused or reset connection is a *net.OpError (a dial's or a
	// read's); a server that went away mid-reply, an EOF.
	return errors.As(err, &oe) || errors.As(err, &ne) && ne.Timeout() ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, context.DeadlineExceeded)
}

// ResolveField resolves a hash or prefix a tool was given, naming the field
// in every refusal: no artifact, several (with their names), or not a hash.
func ResolveField(ctx context.Context, r *Repo, field, s string) (Info, error) {
	info, err := r.Info(ctx, s)
	if err != nil {
		return info, HashRefusal(field, s, r.ProjectName(), err)
	}
	return info, nil
}

// HashRefusal says why a hash a tool was given names no one artifact,
// naming the field: none, several (with their names), or not a hash.
func HashRefusal(field, s, project string, err error) error {
	var he *HashError
	switch {
	case errors.Is(err, ErrAmbiguous) && errors.As(err, &he):
		return fmt.Errorf("%s: %q names several artifacts (%s); give more of its digits", field, s, strings.Join(he.Matches, ", "))
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%s: %q names no artifact of %s", field, s, project)
	}
	return fmt.Errorf("%s: %w", field, err)
}
