// Package runs is what ocxd's run engine (seed 004) needs beside the actors:
// the node's values of a run's placeholders, the preparation of its layers
// 2 to 4 (Preparer), and the pure parts of its process's streams (the first
// line of STDIN, the kept ends of STDOUT and STDERR, the kept logs' reply).
package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/keptlog"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// NodeValues are the values of seed 004's table 2 the node sets before any
// step, from itself: root, project, node, server and release. user and run
// come from the run itself (Prepare sets them).
type NodeValues struct {
	Root    string // the directory under which the node makes its runs' workspaces
	Project string // the server's repository's name
	Node    string // the node user
	Server  string // the server's URL
	Release string // the directory of the OCX release the node runs
}

// Values are the node's values with the run's own (user, run), as section 2
// sets them before the workspace.
func (n NodeValues) Values(run *runmsg.Run, hash string) runmsg.RunValues {
	return runmsg.RunValues{
		runmsg.ValueRoot: n.Root, runmsg.ValueProject: n.Project, runmsg.ValueNode: n.Node,
		runmsg.ValueServer: n.Server, runmsg.ValueRelease: n.Release,
		runmsg.ValueUser: run.Process.User, runmsg.ValueRun: hash,
	}
}

// Prepared is a run ready to launch: every value set (started lists them),
// the process as the host starts it (its streams left nil: the engine gives
// them), and what of its streams the node keeps.
type Prepared struct {
	Values runmsg.RunValues
	Spec   host.RunSpec
	// Workspace is $$workspace$$, "" for a run without one: where the kept
	// logs' files are written.
	Workspace string
	Keep      Keep
	// Limits are the limits applied, as written: what started lists.
	Limits runmsg.RunLimits
	// Filter is the kept logs' filter (D98), which the holder applies to
	// each stream before its kept end: process.keep's mask and match, and
	// the run's own secrets. It holds secrets: never a note, never a value.
	Filter keptlog.Spec
	// Steps are what the run's command steps printed (D99), which the
	// node posts as it posts kept logs; Prepare returns them, and
	// Workspace, with its refusal too.
	Steps []StepLog
}

// FilterOf is the filter of a run's process, its values in place
// (runmsg.Run.Expand), with the run's own secrets: keep.mask and the
// secrets, each once, an empty one left out, and keep.match.
func FilterOf(p runmsg.RunProcess, secrets []string) keptlog.Spec {
	var f keptlog.Spec
	seen := map[string]bool{}
	var mask []string
	if p.Keep != nil {
		mask = p.Keep.Mask
		f.Match = p.Keep.Match
	}
	for _, m := range append(slices.Clone(mask), secrets...) {
		if m != "" && !seen[m] {
			seen[m] = true
			f.Mask = append(f.Mask, m)
		}
	}
	return f
}

// Keep is process.keep in bytes (table 8).
type Keep struct {
	Stderr, Stdout int
	// StdoutAlways: STDOUT is kept whatever the exit; otherwise on failure
	// alone (an exit but 0, or a signal).
	StdoutAlways bool
}

// Preparer makes a run's layers 2 to 4 (seed 004, sections 5 to 7): the
// workspace's steps in order, then the sandbox and limits mapped onto the
// host's terms, every value in place. run is the decoded message as it
// arrived (its values not yet in place), hash its hash. An error is the
// refusal of section 11, row 10 (or 9, a sandbox path reaching the node's
// own files): its text is ended's note, naming the step or the path and
// why. A Preparer may block (a clone); the engine calls it off the actors.
type Preparer interface {
	Prepare(ctx context.Context, run *runmsg.Run, hash string, node NodeValues) (Prepared, error)
}

// KeepOf reads process.keep, its defaults filled in (WithDefaults), in
// bytes.
func KeepOf(p runmsg.RunProcess) (Keep, error) {
	k := p.WithDefaults(false).Keep
	e, err := k.Stderr.Bytes()
	if err != nil {
		return Keep{}, fmt.Errorf("process.keep.stderr: %w", err)
	}
	o, err := k.Stdout.Bytes()
	if err != nil {
		return Keep{}, fmt.Errorf("process.keep.stdout: %w", err)
	}
	const most = 1 << 30
	return Keep{Stderr: int(min(e, most)), Stdout: int(min(o, most)), StdoutAlways: k.StdoutWhen == runmsg.KeepAlways}, nil
}

// FirstLine is the line a process reads first on STDIN (table 8.1):
// {"run": HASH, "objective": TEXT}, with its newline.
func FirstLine(hash, objective string) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Run       string `json:"run"`
		Objective string `json:"objective"`
	}{hash, objective}) // strings always encode
	return []byte(b.String())
}

// Tail keeps the last Max bytes written to it and counts them all: the
// kept end of a stream (section 8.2). It is safe for concurrent use.
type Tail struct {
	Max int

	mu    sync.Mutex
	buf   []byte
	total int64
}

// Write keeps the end of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	if t.Max <= 0 {
		return len(p), nil
	}
	if len(p) >= t.Max {
		t.buf = append(t.buf[:0], p[len(p)-t.Max:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.Max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Counted says the stream printed total bytes in all, when that is more
// than was written to the tail (a holder's log holds only the end).
func (t *Tail) Counted(total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total = max(t.total, total)
}

// Bytes is the end kept, and how many bytes the stream printed in all.
func (t *Tail) Bytes() ([]byte, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...), t.total
}

// KeptStream is one stream's kept end: its name (stderr or stdout), the
// end kept and how many bytes it printed in all.
type KeptStream struct {
	Name  string
	End   []byte
	Total int64
}

// Kept says which streams' ends are kept after a process's exit (section
// 8.2 and table 8's keep): STDERR whenever it printed a byte, STDOUT when
// it did and it is kept always or the process failed (an exit but 0, or a
// signal). STDERR comes first.
func Kept(keep Keep, exit int, stderr, stdout KeptStream) []KeptStream {
	var out []KeptStream
	if stderr.Total > 0 && keep.Stderr > 0 {
		out = append(out, stderr)
	}
	if stdout.Total > 0 && keep.Stdout > 0 && (keep.StdoutAlways || exit != 0) {
		out = append(out, stdout)
	}
	return out
}

// KeptLogsText is the reply holding the kept logs (section 8.2): a plain
// post, no OCX message, each stream's end in a fenced block headed by its
// name, then the exit.
func KeptLogsText(hash string, proc int, exit string, streams []KeptStream) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The kept logs of run %s, process %d.\n", fossilio.Short(hash), proc)
	for _, s := range streams {
		writeFenced(&b, s.Name, s.End, s.Total)
	}
	fmt.Fprintf(&b, "\nIts exit: %s.\n", exit)
	return b.String()
}

// writeFenced writes a stream's end, of total bytes, in a fenced block
// headed by name, its fence longer than any run of backticks in it, and
// says first when it is only the end.
func writeFenced(b *strings.Builder, name string, end []byte, total int64) {
	text := string(end)
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	b.WriteString("\n")
	if total > int64(len(end)) {
		fmt.Fprintf(b, "The last %d of %d bytes:\n\n", len(end), total)
	}
	b.WriteString(fence + name + "\n" + text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
	b.WriteString(fence + "\n")
}

// StepLogText is the reply holding what a command step printed (D99), as
// the kept logs' reply is (section 8.2): a plain post, no OCX message, the
// step and its command, its output's end in a fenced block headed output,
// then its exit.
func StepLogText(hash string, s StepLog) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The output of run %s's workspace[%d], a command step.\n\nIts command: ", fossilio.Short(hash), s.Step)
	for i, w := range s.Run {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(strconv.Quote(w))
	}
	b.WriteString("\n")
	if s.Total == 0 {
		b.WriteString("\nIt printed nothing.\n")
	} else {
		writeFenced(&b, "output", s.End, s.Total)
	}
	fmt.Fprintf(&b, "\nIts end: %s.\n", s.Exit)
	return b.String()
}
