package runmsg

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
	"pgregory.net/rapid"
)

// The generators below draw what the run engine's messages hold; the
// first ones are the same as messages' own tests draw names and text with.

func genName() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 9).Draw(t, "long") == 0 {
			return "a" + rapid.StringMatching(`[A-Za-z0-9._-]{63}`).Draw(t, "name64")
		}
		return rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9._-]{0,20}`).Draw(t, "name")
	})
}

func genLogin() *rapid.Generator[string] {
	return genName().Filter(func(s string) bool { return messages.ValidateLogin(s) == nil })
}

func genHash() *rapid.Generator[string] {
	return rapid.OneOf(rapid.StringMatching(`[0-9a-f]{40}`), rapid.StringMatching(`[0-9a-f]{64}`))
}

// printable draws a rune that is neither a control character nor invalid;
// multiline adds newlines and tabs.
func printable(multiline bool) *rapid.Generator[rune] {
	extra := []rune("abc /%.:-_'\"\\<>&`{}[]é日€😀\u00a0\u2028")
	if multiline {
		extra = append(extra, '\n', '\t')
	}
	return rapid.OneOf(rapid.SampledFrom(extra), rapid.Rune().Filter(func(r rune) bool { return !unicode.IsControl(r) && r != unicode.ReplacementChar }))
}

func genBranch() *rapid.Generator[string] {
	return rapid.StringOfN(printable(false), 1, 40, 255) // 255: messages' bound on a branch name
}

func genText(required bool) *rapid.Generator[string] {
	min := 0
	if required {
		min = 1
	}
	return rapid.StringOfN(printable(true), min, 60, messages.MaxTextLen)
}

func genLineText(required bool) *rapid.Generator[string] {
	min := 0
	if required {
		min = 1
	}
	return rapid.StringOfN(printable(false), min, 30, messages.MaxShortLen)
}

func genPath() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		segs := rapid.SliceOfN(rapid.OneOf(
			rapid.StringMatching(`[A-Za-z0-9_-][A-Za-z0-9._-]{0,12}`),
			rapid.SampledFrom([]string{"...", ".claude", "..a", "a b", "日本", "x:y", "100%"}),
		), 0, 6).Draw(t, "segs")
		return "/" + strings.Join(segs, "/")
	})
}

func genArg() *rapid.Generator[string] {
	return rapid.StringOfN(printable(true), 0, 30, messages.MaxTextLen)
}

func genCommand() *rapid.Generator[[]string] {
	return rapid.Custom(func(t *rapid.T) []string {
		first := rapid.StringOfN(printable(true), 1, 20, messages.MaxTextLen).Draw(t, "program")
		rest := rapid.SliceOfN(genArg(), 0, 4).Draw(t, "args")
		return append([]string{first}, rest...)
	})
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var fe *strictjson.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %T is not a *FieldError: %v", err, err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") || len(msg) > 4096 {
		t.Fatalf("error message is not one bounded line (%d bytes): %q", len(msg), msg)
	}
}

func unfence(t interface{ Fatalf(string, ...any) }, block []byte) []byte {
	body, ok := bytes.CutPrefix(block, []byte("```json\n"))
	body, ok2 := bytes.CutSuffix(body, []byte("\n```\n"))
	if !ok || !ok2 {
		t.Fatalf("not a canonical block: %q", block)
	}
	return body
}

// genUser draws a Fossil login as a receipt names it: any printable line
// without space at either end.
func genUser() *rapid.Generator[string] {
	return rapid.OneOf(genLogin(), rapid.Custom(func(t *rapid.T) string {
		s := rapid.StringOfN(printable(false), 1, 20, 200).Draw(t, "user")
		s = strings.Trim(s, " ")
		if s == "" || s == messages.HearsEveryone {
			return "u"
		}
		return s
	}))
}

// genHears draws a hears list: absent, empty, everyone, or some users.
// genBranches draws one to three distinct branch names.
func genBranches() *rapid.Generator[[]string] {
	return rapid.Custom(func(t *rapid.T) []string {
		return rapid.SliceOfNDistinct(genBranch(), 1, 3, func(b string) string { return b }).Draw(t, "branches")
	})
}

func genHears() *rapid.Generator[[]string] {
	return rapid.Custom(func(t *rapid.T) []string {
		switch rapid.IntRange(0, 3).Draw(t, "hears-kind") {
		case 0:
			return nil
		case 1:
			return []string{}
		case 2:
			return []string{messages.HearsEveryone}
		}
		return rapid.SliceOfNDistinct(genUser(), 1, 4, func(s string) string { return s }).Draw(t, "hears")
	})
}

// The run engine's messages (seed 004).

func genValueName() *rapid.Generator[string] {
	return rapid.OneOf(rapid.SampledFrom(append(slices.Clone(nodeValueNames), ValueWorkspace, ValueClone, valueTree, valueCheckout)),
		rapid.StringMatching(`[A-Za-z0-9_]{1,12}`))
}

// genValueText draws text that may name values and holds the near misses
// that must reach the process as written: a lone $, ${HOME}, $$ alone.
func genValueText(min int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		parts := rapid.SliceOfN(rapid.OneOf(
			rapid.StringOfN(printable(false), 0, 8, 64),
			rapid.SampledFrom([]string{"$", "$$", "${HOME}", "$$$", "$a$", "$$-$$", "/"}),
			rapid.Map(genValueName(), func(n string) string { return "$$" + n + "$$" }),
		), min, 5).Draw(t, "parts")
		s := strings.Join(parts, "")
		if len(s) < min {
			s = "x"
		}
		return s
	})
}

func genRunPath() *rapid.Generator[string] {
	return rapid.OneOf(genPath(), rapid.Custom(func(t *rapid.T) string {
		return "$$" + genValueName().Draw(t, "value") + "$$" + rapid.SampledFrom([]string{"", "/tree", "/a/b"}).Draw(t, "rest")
	}))
}

func genRunPaths() *rapid.Generator[[]string] { return rapid.SliceOfN(genRunPath(), 0, 4) }

func genRunSize() *rapid.Generator[messages.RunSize] {
	return rapid.OneOf(
		rapid.Map(rapid.Uint64Range(0, 1<<40), func(n uint64) messages.RunSize { return messages.RunSize(strconv.FormatUint(n, 10)) }),
		rapid.Custom(func(t *rapid.T) messages.RunSize {
			n := rapid.Uint64Range(0, 1<<20).Draw(t, "n")
			return messages.RunSize(strconv.FormatUint(n, 10) + rapid.SampledFrom([]string{"K", "M", "G"}).Draw(t, "unit"))
		}))
}

func genRunStep() *rapid.Generator[RunStep] {
	return rapid.Custom(func(t *rapid.T) RunStep {
		switch rapid.SampledFrom(stepKinds).Draw(t, "step") {
		case StepDirectory:
			return RunStep{Step: StepDirectory, At: genRunPath().Draw(t, "at")}
		case StepPassword:
			return RunStep{Step: StepPassword}
		case StepClone:
			return RunStep{Step: StepClone, Into: genRunPath().Draw(t, "into")}
		case StepCommand:
			return RunStep{Step: StepCommand, Run: genCommand().Draw(t, "run"), In: genRunPath().Draw(t, "in")}
		}
		return RunStep{Step: StepCheckout, Of: genLineText(true).Draw(t, "of"), Into: genRunPath().Draw(t, "into")}
	})
}

func genRunSandbox() *rapid.Generator[*runSandbox] {
	return rapid.Custom(func(t *rapid.T) *runSandbox {
		files := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) runFile {
			return runFile{At: genRunPath().Draw(t, "at"), Text: genArg().Draw(t, "text")}
		}), 0, 3).Draw(t, "files")
		return &runSandbox{
			UID: rapid.Uint32Range(0, maxID).Draw(t, "uid"), GID: rapid.Uint32Range(0, maxID).Draw(t, "gid"),
			Capabilities: rapid.SliceOfN(rapid.SampledFrom([]string{"CAP_NET_BIND_SERVICE", "CAP_CHOWN", "$$x$$"}), 0, 2).Draw(t, "caps"),
			Network:      rapid.Bool().Draw(t, "network"), OwnSession: rapid.Bool().Draw(t, "own_session"),
			EndsWithNode: rapid.Bool().Draw(t, "ends_with_node"),
			ReadOnly:     genRunPaths().Draw(t, "read_only"), ReadWrite: genRunPaths().Draw(t, "read_write"),
			Homes: genRunPaths().Draw(t, "homes"), Files: files,
			Proc: genRunPath().Draw(t, "proc"), Dev: genRunPath().Draw(t, "dev"), Tmp: genRunPath().Draw(t, "tmp"),
		}
	})
}

func genRunLimits() *rapid.Generator[RunLimits] {
	return rapid.Custom(func(t *rapid.T) RunLimits {
		var l RunLimits
		if rapid.Bool().Draw(t, "has-wall") {
			l.Wall = strconv.Itoa(rapid.IntRange(1, 1000).Draw(t, "wall")) + rapid.SampledFrom([]string{"s", "m", "h", "d"}).Draw(t, "unit")
		}
		if rapid.Bool().Draw(t, "has-cpu") {
			n := rapid.Uint64Range(1, messages.MaxLimit).Draw(t, "cpu")
			l.CPU = &n
		}
		if rapid.Bool().Draw(t, "has-processes") {
			n := rapid.Uint64Range(1, messages.MaxLimit).Draw(t, "processes")
			l.Processes = &n
		}
		if rapid.Bool().Draw(t, "has-memory") {
			l.Memory = genRunSize().Draw(t, "memory")
		}
		if rapid.Bool().Draw(t, "has-disk") {
			l.Disk = rapid.SampledFrom([]messages.RunSize{"16M", "2G", "16777216", "16384G"}).Draw(t, "disk")
		}
		return l
	})
}

func genRunProcess() *rapid.Generator[RunProcess] {
	return rapid.Custom(func(t *rapid.T) RunProcess {
		p := RunProcess{User: genUser().Draw(t, "user"), Command: genCommand().Draw(t, "command")}
		env := rapid.MapOfN(rapid.OneOf(rapid.StringMatching(`[A-Z_][A-Z0-9_]{0,8}`), rapid.Just("$$user$$")), genValueText(0), 0, 4).Draw(t, "env")
		if len(env) > 0 {
			p.Env = env
		}
		if rapid.Bool().Draw(t, "has-cwd") {
			p.Cwd = genRunPath().Draw(t, "cwd")
		}
		p.Manual, p.Session, p.Terminal = rapid.Bool().Draw(t, "manual"), rapid.Bool().Draw(t, "session"), rapid.Bool().Draw(t, "terminal")
		if h := genHears().Draw(t, "hears"); len(h) > 0 {
			p.Hears = h
		}
		if rapid.Bool().Draw(t, "has-checkins") {
			p.Checkins = genBranches().Draw(t, "checkins")
		}
		p.Deliveries = rapid.SampledFrom([]string{"", deliveriesFeed, DeliveriesStart}).Draw(t, "deliveries")
		if !p.Manual && !p.Session && rapid.Bool().Draw(t, "has-on") {
			if rapid.Bool().Draw(t, "on-checkin") {
				p.On = &RunOn{Checkin: genBranches().Filter(func(b []string) bool { return len(b) > 0 }).Draw(t, "on-checkin-branches")}
			} else {
				p.On = &RunOn{Schedule: rapid.SampledFrom([]string{"* * * * *", "*/5 * * * *", "0 3 * * 1-5", "@hourly"}).Draw(t, "on-schedule")}
			}
		}
		if rapid.Bool().Draw(t, "has-keep") {
			k := RunKeep{StdoutWhen: rapid.SampledFrom([]string{"", keepOnFailure, KeepAlways}).Draw(t, "when")}
			if rapid.Bool().Draw(t, "has-stderr") {
				k.Stderr = genRunSize().Draw(t, "stderr")
			}
			if rapid.Bool().Draw(t, "has-stdout") {
				k.Stdout = genRunSize().Draw(t, "stdout")
			}
			if rapid.Bool().Draw(t, "has-mask") {
				k.Mask = rapid.SliceOfN(rapid.SampledFrom([]string{"secret", "$$user$$", "tok-$$run$$", "a*b", "p@ss w0rd"}), 1, 3).Draw(t, "mask")
			}
			k.Match = rapid.SampledFrom([]string{"", "error", `^E\d+: `, `(?i)warn|fail$`}).Draw(t, "match")
			if !k.empty() {
				p.Keep = &k
			}
		}
		return p
	})
}

func genRun() *rapid.Generator[*Run] {
	return rapid.Custom(func(t *rapid.T) *Run {
		r := &Run{Node: genUser().Draw(t, "node"), Process: genRunProcess().Draw(t, "process"),
			Objective: genText(true).Filter(func(s string) bool { return strings.TrimSpace(s) != "" }).Draw(t, "objective")}
		if steps := rapid.SliceOfN(genRunStep(), 0, 5).Draw(t, "workspace"); len(steps) > 0 {
			r.Workspace = steps
		}
		if rapid.Bool().Draw(t, "has-sandbox") {
			r.Sandbox = genRunSandbox().Draw(t, "sandbox")
		}
		if rapid.Bool().Draw(t, "has-limits") {
			l := genRunLimits().Draw(t, "limits")
			r.Limits = &l
		}
		return r
	})
}

// genMessage draws a valid message of a run engine kind.
func genMessage(kind MessageKind) *rapid.Generator[Message] {
	return rapid.Custom(func(t *rapid.T) Message {
		node, run := genUser().Draw(t, "node"), genHash().Draw(t, "run")
		switch kind {
		case MsgRun:
			return genRun().Draw(t, "run")
		case MsgStop:
			return &RunStop{Node: node, Run: run}
		case MsgStarted:
			vals := rapid.MapOfN(genValueName(), genValueText(0), 0, 6).Draw(t, "values")
			return &RunStarted{Node: node, Run: run, Values: vals, Limits: genRunLimits().Draw(t, "limits")}
		case MsgFired:
			if rapid.Bool().Draw(t, "fired-checkin") {
				return &RunFired{Node: node, Run: run, Checkin: genHash().Draw(t, "checkin")}
			}
			minute := rapid.Int64Range(0, 1<<26).Draw(t, "minute")
			return &RunFired{Node: node, Run: run, At: time.Unix(minute*60, 0).UTC()}
		}
		e := &RunEnded{Node: node, Run: run, Outcome: rapid.SampledFrom(runOutcomes).Draw(t, "outcome")}
		exit, note := endedFields(e.Outcome)
		if exit == fieldRequired {
			x := rapid.IntRange(0, 255).Draw(t, "exit")
			e.Exit = &x
		}
		if note == fieldRequired {
			e.Note = genText(true).Filter(func(s string) bool { return strings.TrimSpace(s) != "" }).Draw(t, "note")
		}
		return e
	})
}
