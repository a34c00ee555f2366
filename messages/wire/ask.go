package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// The daemon's socket (AGENTS/ocxd.sock, D66) speaks in lines: a caller
// writes one Ask, a JSON object on one line, and reads one Reply on one
// line. The socket is the node user's alone (mode 0600, the peer's uid
// checked), so an Ask is trusted as far as its caller is: it names no
// user, and what it asks for is what that user may read or do anyway.

// askKind is what an Ask asks for.
type askKind string

const (
	// AskHook hands the daemon one after-receive of Fossil's: the daemon
	// runs the hook's work on its own open repository and live index (who
	// is woken, the unheard notes, the git export, the hook's mark) and
	// replies when it is done, as the hook's own process would have ended.
	AskHook askKind = "hook"
	// AskStatus asks for the node's status (the state document), derived
	// from the daemon's live index.
	AskStatus askKind = "status"
	// AskRuns asks for a project's runs (or the one named) as the record
	// and the node's care say, from the daemon's live run log.
	AskRuns askKind = "runs"
	// AskPage asks for one of the console's pages, a GET as Fossil's /ext
	// gave it to its CGI (D71): the daemon renders it from its kept status
	// and replies the whole CGI reply.
	AskPage askKind = "page"
	// AskPull asks a node on another host to pull a project served from
	// the server (D72) and to reply once a pull begun after the ask has
	// brought in, and the server vouched for, what the server held: a
	// tool that wrote to the server then reads its own write in the
	// node's clone.
	AskPull askKind = "pull"
	// AskMetrics asks for the daemon's metrics in Prometheus' text format
	// (MetricsContentType), which follow the reply's line as a page does.
	AskMetrics askKind = "metrics"
)

// MetricsContentType is the media type of the metrics' text format, as a
// scraper reads it: text/plain, the text format's own type. It is spelled
// "Text/Plain" because Fossil's /ext wraps exactly "text/plain" in its
// skin (an HTML page) and passes any other type through as it came, its
// parameters cut; a media type is the same in any case (RFC 9110 8.3.1),
// so a scraper reads it as text/plain, version 0.0.4 its default.
const MetricsContentType = "Text/Plain; version=0.0.4; charset=utf-8"

// askKinds are the kinds an Ask may have, in the order docs/daemon.md
// lists them.
var askKinds = []askKind{AskHook, AskStatus, AskRuns, AskPage, AskPull, AskMetrics}

// maxPageEnv bounds a page ask's environment: Fossil gives its CGI a few
// dozen variables.
const maxPageEnv = 256

// ConsolePath is a console request's path as the console routes it: the
// parts of its PATH_INFO between slashes, the slashes at either end
// trimmed, so that "//git/info/refs" is git's as "/git/info/refs" is
// (D81); nil for the console's index.
func ConsolePath(pathInfo string) []string {
	p := strings.Trim(pathInfo, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// NotByDaemon says why the daemon does not render a console request
// given Fossil's CGI environment, "" when it does (D71, D81): a page read
// by GET or HEAD, with at most maxPageEnv variables, that is not a fetch
// of the git mirror, decided on the path the console routes
// (ConsolePath). ocx-console asks the daemon only for such a page, and
// the daemon refuses any other ask: git's CGI never runs in the daemon.
func NotByDaemon(env []string) string {
	if len(env) > maxPageEnv {
		return fmt.Sprintf("holds %d variables; a page ask gives at most %d", len(env), maxPageEnv)
	}
	method, path := "", ""
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "REQUEST_METHOD":
			method = v
		case "PATH_INFO":
			path = v
		}
	}
	if method != "GET" && method != "HEAD" {
		return fmt.Sprintf("has REQUEST_METHOD %s; the daemon serves a page asked by GET or HEAD", strictjson.QuoteShort(method))
	}
	if parts := ConsolePath(path); len(parts) > 0 && parts[0] == "git" {
		return fmt.Sprintf("has PATH_INFO %s, a fetch of the git mirror: git's own CGI serves it, never in the daemon", strictjson.QuoteShort(path))
	}
	return ""
}

// MaxAskLen bounds one Ask's line: a sync of tens of thousands of
// artifacts names each hash once.
const MaxAskLen = 8 << 20

// MaxReplyLen bounds one Reply's line: a status at most.
const MaxReplyLen = strictjson.MaxStateLen + 4<<10

// Ask is one request on the daemon's socket.
type Ask struct {
	Ocx  string  `json:"ocx" why:"an ask says \"ocx\": \"ask\""`
	V    int     `json:"v" why:"an ask says its protocol version"`
	Kind askKind `json:"ask" why:"an ask says what it asks for"`
	// Repo is, for a hook, the repository Fossil received into (%R),
	// absolute.
	Repo string `json:"repo,omitempty"`
	// Hashes are, for a hook, what Fossil wrote on the hook's standard
	// input: the artifacts received, in its order.
	Hashes []string `json:"hashes,omitempty"`
	// Project is, for runs, the project whose runs are asked for.
	Project string `json:"project,omitempty"`
	// Run is, for runs, the one run asked for: a hash or its prefix, as
	// `ocx run status RUN` takes it; empty asks for every run.
	Run string `json:"run,omitempty"`
	// Env is, for a page, the environment Fossil gave its CGI, each
	// NAME=VALUE as a process sees it.
	Env []string `json:"env,omitempty"`
}

// HookFallbackEnv names, in the environment of an `ocx hook` that
// ocx-hook runs when the daemon did not do the hook's work, why it did
// not: the hook logs it.
const HookFallbackEnv = "OCX_HOOK_FALLBACK"

// ConsoleFallbackEnv names, in the environment of an `ocx console` that
// ocx-console runs when the daemon took no ask for its page in time
// (nodesock.ErrNotTaken, D75), why: the console then reads the status
// itself at once, rather than wait for the same daemon again, and the page
// says why.
const ConsoleFallbackEnv = "OCX_CONSOLE_FALLBACK"

// askVersion is the socket protocol's version.
const askVersion = 1

// NewAsk is an Ask of kind k in this version.
func NewAsk(k askKind) *Ask { return &Ask{Ocx: "ask", V: askVersion, Kind: k} }

// Validate checks an Ask as the daemon takes it.
func (a *Ask) Validate() error {
	if a.Ocx != "ask" {
		return strictjson.FieldErr("ocx", strictjson.ErrWrongKind, fmt.Sprintf("is %s; an ask says \"ask\"", strictjson.QuoteShort(a.Ocx)))
	}
	if a.V != askVersion {
		return strictjson.FieldErr("v", strictjson.ErrInvalid, fmt.Sprintf("is %d; this daemon speaks version %d", a.V, askVersion))
	}
	if a.Env != nil && a.Kind != AskPage {
		return strictjson.FieldErr("env", strictjson.ErrInvalid, "is given; only a page ask gives an environment")
	}
	switch a.Kind {
	case AskHook:
		if a.Repo == "" {
			return strictjson.FieldErr("repo", strictjson.ErrMissing, "is missing; a hook names the repository Fossil received into")
		}
		if !filepath.IsAbs(a.Repo) {
			return strictjson.FieldErr("repo", strictjson.ErrInvalid, fmt.Sprintf("is %s; a hook's repository is an absolute path", strictjson.QuoteShort(a.Repo)))
		}
		for i, h := range a.Hashes {
			if err := messages.CheckHash(fmt.Sprintf("hashes[%d]", i), h); err != nil {
				return err
			}
		}
	case AskPage:
		if a.Repo != "" || len(a.Hashes) > 0 || a.Project != "" || a.Run != "" {
			return strictjson.FieldErr("repo", strictjson.ErrInvalid, "is given; a page ask names no repository, hash, project or run")
		}
		if len(a.Env) == 0 || len(a.Env) > maxPageEnv {
			return strictjson.FieldErr("env", strictjson.ErrInvalid, fmt.Sprintf("holds %d variables; a page ask gives 1 to %d", len(a.Env), maxPageEnv))
		}
		for i, kv := range a.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return strictjson.FieldErr(fmt.Sprintf("env[%d]", i), strictjson.ErrInvalid, fmt.Sprintf("is %s; a variable is NAME=VALUE", strictjson.QuoteShort(kv)))
			}
		}
		if why := NotByDaemon(a.Env); why != "" {
			return strictjson.FieldErr("env", strictjson.ErrInvalid, why)
		}
	case AskStatus, AskMetrics:
		if a.Repo != "" || len(a.Hashes) > 0 || a.Project != "" || a.Run != "" {
			return strictjson.FieldErr("repo", strictjson.ErrInvalid, fmt.Sprintf("is given; a %s ask names no repository, hash, project or run", a.Kind))
		}
	case AskPull:
		if a.Repo != "" || len(a.Hashes) > 0 || a.Run != "" {
			return strictjson.FieldErr("repo", strictjson.ErrInvalid, "is given; a pull ask names a project alone")
		}
		if err := messages.CheckProject("project", a.Project); err != nil {
			return err
		}
	case AskRuns:
		if a.Repo != "" || len(a.Hashes) > 0 {
			return strictjson.FieldErr("repo", strictjson.ErrInvalid, "is given; a runs ask names a project, not a repository or hashes")
		}
		if err := messages.CheckProject("project", a.Project); err != nil {
			return err
		}
		if a.Run != "" {
			if err := messages.CheckHashPrefix("run", a.Run); err != nil {
				return err
			}
		}
	default:
		return strictjson.FieldErr("ask", strictjson.ErrInvalid, fmt.Sprintf("is %s; an ask is one of %s", strictjson.QuoteShort(string(a.Kind)), askWords()))
	}
	return nil
}

func askWords() string {
	w := make([]string, len(askKinds))
	for i, k := range askKinds {
		w[i] = string(k)
	}
	return strictjson.ListWords(w)
}

// DecodeAsk reads one Ask's line (without its newline) as strictly as a
// note: one JSON object, no key twice, valid UTF-8, bounded.
func DecodeAsk(line []byte) (*Ask, error) {
	a := &Ask{}
	if err := decodeLine("ask", line, MaxAskLen, a); err != nil {
		return nil, err
	}
	if err := a.Validate(); err != nil {
		return nil, strictjson.At("ask", err)
	}
	return a, nil
}

// Reply is the daemon's answer to one Ask.
type Reply struct {
	Ocx string `json:"ocx" why:"a reply says \"ocx\": \"reply\""`
	V   int    `json:"v" why:"a reply says its protocol version"`
	// Error, when set, says why the daemon did not do what was asked; the
	// caller then does it itself, as without a daemon.
	Error string `json:"error,omitempty"`
	// Receipts are, for each project read, the newest receipt of its
	// repository the answer is current to.
	Receipts map[string]Receipt `json:"receipts,omitempty"`
	// State is a status ask's answer, in the line.
	State *messages.NodeState `json:"state,omitempty"`
	// Doc is the length of the state document that follows the reply's
	// line, a status ask's answer as `ocx status --json` prints it (D70):
	// a caller that prints it copies it, one that reads it decodes it
	// (DecodeState). Never with State.
	Doc int `json:"doc,omitempty"`
	// StateDoc is the document Doc counts, as the caller read it; never
	// in a line.
	StateDoc []byte `json:"-"`
	// Page is the length of the CGI reply that follows the reply's line,
	// a page ask's answer (D71), which the caller writes as it is.
	Page int `json:"page,omitempty"`
	// CGIPage is the reply Page counts, as the caller read it; never in
	// a line.
	CGIPage []byte `json:"-"`
	// Metrics is the length of the metrics' text (Prometheus' format) that
	// follows the reply's line, a metrics ask's answer.
	Metrics int `json:"metrics,omitempty"`
	// MetricsText is the text Metrics counts, as the caller read it;
	// never in a line.
	MetricsText []byte `json:"-"`
	// Hook is a hook ask's answer.
	Hook *HookDone `json:"hook,omitempty"`
	// Runs are a runs ask's answer, in the server's order; an answer with
	// no run says so with an empty list, never by leaving it out.
	Runs *[]runmsg.RunState `json:"runs,omitempty"`
	// Passed are what the answer passed over (an artifact that does not
	// read, an entry the status cannot carry), for the caller's log.
	Passed []PassedOver `json:"passed,omitempty"`
	// Line is the reply as encoded, with its newline and the document
	// that follows it: the socket's server writes it as it is. It is
	// never read from a line.
	Line []byte `json:"-"`
	// KeepMemory: the memory the reply holds is not handed back to the
	// system once it is written: a status kept between asks (D70), or a
	// page made of its copies (D71), for which a forced collection would
	// cost more than the answer.
	KeepMemory bool `json:"-"`
}

// PassedOver is one thing an answer passed over, and why.
type PassedOver struct {
	What string `json:"what" why:"a thing passed over is named"`
	Why  string `json:"why" why:"a thing passed over says why"`
}

// Receipt is the newest receipt of a repository (Fossil's rcvid) an
// answer is current to.
type Receipt struct {
	Rcvid uint64 `json:"rcvid" why:"a receipt says its number"`
}

// HookDone is what one hook run handled.
type HookDone struct {
	Artifacts int    `json:"artifacts" why:"a hook's answer counts the artifacts it handled"`
	Mark      uint64 `json:"mark" why:"a hook's answer says the hook's mark after it"`
}

// NewReply is a Reply in this version.
func NewReply() *Reply { return &Reply{Ocx: "reply", V: askVersion} }

// Validate checks a Reply as a caller takes it.
func (r *Reply) Validate() error {
	if r.Ocx != "reply" {
		return strictjson.FieldErr("ocx", strictjson.ErrWrongKind, fmt.Sprintf("is %s; a reply says \"reply\"", strictjson.QuoteShort(r.Ocx)))
	}
	if r.V != askVersion {
		return strictjson.FieldErr("v", strictjson.ErrInvalid, fmt.Sprintf("is %d; this caller speaks version %d", r.V, askVersion))
	}
	if r.Doc < 0 || r.Doc > strictjson.MaxStateLen {
		return strictjson.FieldErr("doc", strictjson.ErrInvalid, fmt.Sprintf("is %d; a state document is 1 to %d bytes", r.Doc, strictjson.MaxStateLen))
	}
	if r.Page < 0 || r.Page > strictjson.MaxStateLen || (r.Page > 0 && (r.Doc > 0 || r.State != nil)) {
		return strictjson.FieldErr("page", strictjson.ErrInvalid, fmt.Sprintf("is %d; a page is 1 to %d bytes, in a reply of its own", r.Page, strictjson.MaxStateLen))
	}
	if r.Metrics < 0 || r.Metrics > strictjson.MaxStateLen || (r.Metrics > 0 && (r.Doc > 0 || r.Page > 0 || r.State != nil)) {
		return strictjson.FieldErr("metrics", strictjson.ErrInvalid, fmt.Sprintf("is %d; the metrics are 1 to %d bytes, in a reply of their own", r.Metrics, strictjson.MaxStateLen))
	}
	if r.Doc > 0 && r.State != nil {
		return strictjson.FieldErr("doc", strictjson.ErrInvalid, "is given with a state in the line; a reply carries one of them")
	}
	if r.State != nil {
		if err := r.State.Validate(); err != nil {
			return strictjson.At("state", err)
		}
	}
	if r.Runs != nil {
		for i := range *r.Runs {
			if err := (*r.Runs)[i].Validate(); err != nil {
				return strictjson.At(fmt.Sprintf("runs[%d]", i), err)
			}
		}
	}
	if r.Hook != nil && r.Hook.Artifacts < 0 {
		return strictjson.FieldErr("hook.artifacts", strictjson.ErrInvalid, fmt.Sprintf("is %d; a count is not negative", r.Hook.Artifacts))
	}
	return nil
}

// DecodeReply reads one Reply's line (without its newline).
func DecodeReply(line []byte) (*Reply, error) {
	r := &Reply{}
	if err := decodeLine("reply", line, MaxReplyLen, r); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, strictjson.At("reply", err)
	}
	return r, nil
}

// decodeLine reads one line's JSON object into v by its tags.
func decodeLine(where string, line []byte, max int, v any) error {
	t, err := strictjson.Parse(line, max)
	if err != nil {
		return strictjson.At(where, err)
	}
	m, ok := t.(map[string]any)
	if !ok {
		return &strictjson.FieldError{Where: where, Problem: "is " + strictjson.JSONType(t) + "; a line of the daemon's socket is a JSON object", Err: strictjson.ErrInvalid}
	}
	if err := messages.Fill(strictjson.Obj{Map: m}, v); err != nil {
		return strictjson.At(where, err)
	}
	return nil
}

// errLineTooLong: a line of the daemon's socket past its bound.
var errLineTooLong = errors.New("the line is longer than its bound")

// ReadLine reads one line, without its newline, of at most max bytes.
func ReadLine(r *bufio.Reader, max int) ([]byte, error) {
	var buf bytes.Buffer
	for {
		chunk, err := r.ReadSlice('\n')
		buf.Write(chunk)
		if buf.Len() > max+1 {
			return nil, fmt.Errorf("%w (%d bytes)", errLineTooLong, max)
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, errors.New("the connection ended before its newline")
		default:
			return nil, err
		}
	}
}

// HookHashes reads what Fossil writes on an after-receive hook's standard
// input: one artifact per line, its full hash first and a description
// after. A line that does not begin with a full hash is passed over, and
// so is a line past 1 MiB.
func HookHashes(in io.Reader) []string {
	if in == nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f, _, _ := strings.Cut(sc.Text(), " ")
		if messages.CheckHash("", f) == nil {
			out = append(out, f)
		}
	}
	return out
}
