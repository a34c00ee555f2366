package node

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Answer is the tools' one answer shape (seed 001 E8): the tool, whether it
// was a dry run, the steps it took, the hash of what it wrote (or null), and
// why it stopped (null when it did its work).
type Answer struct {
	Tool    string   `json:"tool"`
	DryRun  bool     `json:"dry_run"`
	Log     []string `json:"log"`
	Result  *string  `json:"result"`
	Stopped *string  `json:"stopped"`
	// Sessions is, for `session restart`, each session it restarted or
	// left alone and why; absent from every other answer.
	Sessions []SessionOutcome `json:"sessions,omitempty"`
}

// NewAnswer is an empty answer of tool, a dry run or not.
func NewAnswer(tool string, dry bool) *Answer {
	return &Answer{Tool: tool, DryRun: dry, Log: []string{}}
}

// Logf adds a step to the answer's log.
func (a *Answer) Logf(format string, args ...any) {
	a.Log = append(a.Log, fmt.Sprintf(format, args...))
}

// Would logs what a dry run would write, or what a real run writes.
func (a *Answer) Would(format string, args ...any) {
	if a.DryRun {
		a.Log = append(a.Log, "would "+fmt.Sprintf(format, args...))
		return
	}
	a.Log = append(a.Log, fmt.Sprintf(format, args...))
}

// SetResult records the hash of what the action wrote.
func (a *Answer) SetResult(hash string) { a.Result = &hash }

// Stop records why the action did not do its work and returns the answer.
func (a *Answer) Stop(err error) *Answer {
	if err != nil {
		msg := err.Error()
		a.Stopped = &msg
	}
	return a
}

// OK reports whether the action did its work.
func (a *Answer) OK() bool { return a.Stopped == nil }

// WriteJSON writes the answer as one JSON document.
func (a *Answer) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(a)
}

// WriteText writes the answer for a person: the log, then the result or
// why it stopped.
func (a *Answer) WriteText(w io.Writer) error {
	var b strings.Builder
	prefix := ""
	if a.DryRun {
		prefix = "(dry run) "
	}
	for _, l := range a.Log {
		fmt.Fprintf(&b, "%s%s\n", prefix, l)
	}
	if a.Result != nil {
		fmt.Fprintf(&b, "%sresult: %s\n", prefix, *a.Result)
	}
	if a.Stopped != nil {
		fmt.Fprintf(&b, "%sstopped: %s\n", prefix, *a.Stopped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
