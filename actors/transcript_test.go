package actors

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/pipe"
	"github.com/ocx-go/ocx/messages/protocol"
)

var update = flag.Bool("update", false, "rewrite the transcripts in testdata with what the actors do now")

// TestTranscripts runs every testdata/*.txt: each line starting with "> " is
// a message into the tree or an answer to a pending effect; the lines after it
// are what the tree did (effects, numbered [N] until answered, and log lines at
// info and above). Hashes are written as names (L1, C1, R1) and printed back so.
// Lines starting with # are comments. Run with -update to rewrite the expected
// lines, then read the diff.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			runTranscript(t, f)
		})
	}
}

func runTranscript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTranscript()
	playTranscript(t, path, data, func(cmd string, line int) ([]string, error) { return tr.run(t, cmd, line), nil })
}

// playTranscript plays a transcript file's data: each "> command" given
// to do, with its line, its output compared with the lines after it (or,
// with -update, written in their place); "#" lines and blank ones kept.
// An error from do fails the test at the command's line.
func playTranscript(t *testing.T, path string, data []byte, do func(cmd string, line int) ([]string, error)) {
	t.Helper()
	var out, expected []string
	var cmd string
	cmdLine := 0
	flush := func() {
		if cmd == "" {
			return
		}
		got, err := do(cmd, cmdLine)
		if err != nil {
			t.Fatalf("%s:%d: > %s: %v", path, cmdLine, cmd, err)
		}
		out = append(out, got...)
		if !*update && strings.Join(got, "\n") != strings.Join(expected, "\n") {
			t.Errorf("%s:%d: > %s\n--- want\n%s\n--- got\n%s", path, cmdLine, cmd, strings.Join(expected, "\n"), strings.Join(got, "\n"))
		}
		cmd, expected = "", nil
	}
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "> "):
			flush()
			cmd, cmdLine = strings.TrimPrefix(line, "> "), i+1
			out = append(out, line)
		case strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "":
			flush()
			out = append(out, line)
		default:
			if cmd == "" {
				t.Fatalf("%s:%d: an output line with no command before it: %q", path, i+1, line)
			}
			expected = append(expected, line)
		}
	}
	flush()
	if *update {
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// transcript is the state of one transcript: its sim, its names for hashes,
// and the last hand-off seen.
type transcript struct {
	s       *sim
	names   map[string]string // hash -> name
	hashes  map[string]string // name -> hash
	handoff *protocol.Handoff
	snap    int
}

var transcriptEpoch = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func newTranscript() *transcript {
	tr := &transcript{names: map[string]string{}, hashes: map[string]string{}}
	tr.s = tr.newSim(transcriptEpoch)
	return tr
}

// newSim makes a sim that keeps the hand-off of an exec as soon as it is asked.
func (tr *transcript) newSim(now time.Time) *sim {
	s := newSim(Config{}, now)
	s.cgroups = newSimCgroups()
	s.onEffect = func(_ protocol.ActorAddr, e protocol.DaemonEffect) {
		if x, ok := e.(protocol.ExecRelease); ok {
			h := x.Handoff
			tr.handoff = &h
		}
	}
	return s
}

// hash names a hash: the same name gives the same 40-hex hash.
func (tr *transcript) hash(name string) string {
	if h, ok := tr.hashes[name]; ok {
		return h
	}
	sum := sha1.Sum([]byte("ocx transcript " + name))
	h := hex.EncodeToString(sum[:])
	tr.hashes[name], tr.names[h] = h, name
	return h
}

// render prints a line with every known hash (whole or in its 10-digit short
// form) replaced by its name.
func (tr *transcript) render(s string) string {
	var hs []string
	for h := range tr.names {
		hs = append(hs, h)
	}
	sort.Strings(hs)
	for _, h := range hs {
		s = strings.ReplaceAll(s, h, tr.names[h])
	}
	for _, h := range hs {
		s = strings.ReplaceAll(s, h[:10], tr.names[h])
	}
	return s
}

func (tr *transcript) run(t *testing.T, cmd string, line int) []string {
	t.Helper()
	if err := tr.do(cmd); err != nil {
		t.Fatalf("line %d: > %s: %v", line, cmd, err)
	}
	if len(tr.s.deadLetters) > 0 {
		t.Fatalf("line %d: > %s: dead letters: %v", line, cmd, tr.s.deadLetters)
	}
	var out []string
	for _, l := range tr.s.takeTrace() {
		out = append(out, tr.render(l))
	}
	return out
}

func (tr *transcript) do(cmd string) error {
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return errors.New("empty command")
	}
	s := tr.s
	if strings.HasPrefix(f[0], "[") && strings.HasSuffix(f[0], "]") {
		id, err := strconv.Atoi(strings.Trim(f[0], "[]"))
		if err != nil {
			return fmt.Errorf("effect number: %w", err)
		}
		p, err := s.find(id)
		if err != nil {
			return err
		}
		if len(f) < 2 {
			return errors.New("an answer needs a word: ok, error, launch, ...")
		}
		res, err := tr.result(p.eff, f[1], f[2:], strings.TrimSpace(strings.TrimPrefix(cmd, f[0])))
		if err != nil {
			return err
		}
		return s.answer(id, res)
	}
	switch f[0] {
	case "post":
		if len(f) != 3 {
			return errors.New("post REPOSITORY NAME")
		}
		s.input(protocol.LineRead{Line: pipe.PostLine{Repository: f[1], Hash: tr.hash(f[2])}})
	case "stop":
		if len(f) != 3 {
			return errors.New("stop LOGIN PROJECT")
		}
		s.input(protocol.LineRead{Line: pipe.StopLine{Login: f[1], Project: f[2]}})
	case "reexec":
		s.input(protocol.LineRead{Line: pipe.ReexecLine{}})
	case "budget":
		// budget LOGIN PROJECT LAUNCH LIMIT USED: a model proxy's line.
		if len(f) != 6 {
			return errors.New("budget LOGIN PROJECT LAUNCH LIMIT USED")
		}
		used, err := strconv.ParseUint(f[5], 10, 64)
		if err != nil {
			return err
		}
		s.input(protocol.LineRead{Line: pipe.BudgetLine{Login: f[1], Project: f[2], Launch: tr.hash(f[3]), Limit: f[4], Used: used}})
	case "spent":
		// spent LAUNCH NOTE...: the usage read at the end of the session
		// serving LAUNCH finds its tokens spent, as NOTE says.
		if len(f) < 3 {
			return errors.New("spent LAUNCH NOTE...")
		}
		s.cgroups.usage[tr.hash(f[1])] = protocol.UsageRead{Reached: strings.Join(f[2:], " "),
			Usage: &messages.SessionUsage{Model: &messages.ModelCount{Requests: 1, Tokens: modelapi.Tokens{Input: 10, Output: 2}}, Limit: 10, Turns: 1, WallMS: 900, CPUMS: 100}}
	case "exit":
		if len(f) != 4 {
			return errors.New("exit PID@START LOGIN/PROJECT code=N|signal=SIG|sandbox=N")
		}
		p, err := protocol.ParseProcID(f[1])
		if err != nil {
			return err
		}
		w, err := messages.ParseWorkspaceKey(f[2])
		if err != nil {
			return err
		}
		st, err := parseStatus(f[3])
		if err != nil {
			return err
		}
		s.input(protocol.ProcessExited{Proc: p, Workspace: w, Status: st, At: s.now})
	case "limit", "closes":
		// limit PID@START memory|processes NOTE...: the session's cgroup
		// went past it; closes PID@START LIMIT NOTE...: its close, to come,
		// finds it past it.
		if len(f) < 4 {
			return errors.New(f[0] + " PID@START memory|processes NOTE...")
		}
		p, err := protocol.ParseProcID(f[1])
		if err != nil {
			return err
		}
		note := strings.Join(f[3:], " ")
		if f[0] == "closes" {
			s.cgroups.closes[p] = protocol.LimitsClosed{Limit: f[2], Note: note}
			return nil
		}
		return s.cgroups.reach(s, p, f[2], note)
	case "boot":
		// boot W:PID@START:VERB[:LAUNCH]...: what the process table
		// holds; W:PID@START:spawned:LAUNCH is a spawned record (D76).
		var b protocol.Boot
		for _, a := range f[1:] {
			p, err := tr.procInfo(a)
			if err != nil {
				return err
			}
			if p.Verb == "spawned" {
				b.Spawned = append(b.Spawned, protocol.Spawned{Workspace: p.Workspace, Launch: p.Launch, Proc: p.Proc})
				continue
			}
			b.Found = append(b.Found, p)
		}
		s.input(b)
	case "snapshot":
		tr.snap++
		s.input(protocol.SnapshotRequest{Request: tr.snap})
		if h, ok := s.snapshots[tr.snap]; ok {
			tr.handoff = &h
		} else {
			s.trace = append(s.trace, "(the snapshot waits for the actors to settle)")
		}
	case "advance":
		if len(f) != 2 {
			return errors.New("advance DURATION")
		}
		d, err := time.ParseDuration(f[1])
		if err != nil {
			return err
		}
		s.now = s.now.Add(d)
	case "fire":
		if len(f) != 2 {
			return errors.New("fire N")
		}
		id, err := strconv.Atoi(strings.Trim(f[1], "[]"))
		if err != nil {
			return err
		}
		p, err := s.find(id)
		if err != nil {
			return err
		}
		tm, ok := p.eff.(protocol.StartTimer)
		if !ok {
			return fmt.Errorf("[%d] is not a timer: %s", id, p.eff)
		}
		return s.answer(id, protocol.TimerFired{Proc: tm.Proc, Purpose: tm.Purpose, Seq: tm.Seq})
	case "trace":
		s.showTells = len(f) > 1 && f[1] == "on"
	case "handoff":
		if tr.handoff == nil {
			return errors.New("no hand-off yet: reexec up to the exec, or snapshot")
		}
		s.trace = append(s.trace, tr.handoff.Summary())
		for _, w := range tr.handoff.Workspaces {
			s.trace = append(s.trace, "  "+w.Summary())
		}
		if len(tr.handoff.Pending) > 0 {
			s.trace = append(s.trace, "  pending: "+strings.Join(tr.handoff.Pending, "; "))
		}
	case "restore":
		if tr.handoff == nil {
			return errors.New("no hand-off to restore from")
		}
		b, err := protocol.EncodeHandoff(*tr.handoff)
		if err != nil {
			return err
		}
		h, err := protocol.DecodeHandoff(b)
		if err != nil {
			return err
		}
		next := tr.newSim(s.now)
		next.nextID = s.nextID
		next.showTells = s.showTells
		tr.s = next
		next.input(protocol.Restore{Handoff: h})
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	return nil
}

func parseStatus(s string) (messages.ExitStatus, error) {
	k, v, _ := strings.Cut(s, "=")
	switch k {
	case "code":
		n, err := strconv.Atoi(v)
		return messages.ExitStatus{State: messages.EndExited, Code: n}, err
	case "signal":
		return messages.ExitStatus{State: messages.EndSignaled, Signal: v}, nil
	case "sandbox":
		n, err := strconv.Atoi(v)
		return messages.ExitStatus{State: messages.EndSandboxFailed, Code: n}, err
	}
	return messages.ExitStatus{}, fmt.Errorf("exit status %q: code=N, signal=SIG or sandbox=N", s)
}

// procInfo reads W:PID@START:VERB[:LAUNCH][:ORIGIN].
func (tr *transcript) procInfo(s string) (protocol.ProcInfo, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 3 {
		return protocol.ProcInfo{}, fmt.Errorf("process %q: W:PID@START:VERB[:LAUNCH]", s)
	}
	w, err := messages.ParseWorkspaceKey(parts[0])
	if err != nil {
		return protocol.ProcInfo{}, err
	}
	p, err := protocol.ParseProcID(parts[1])
	if err != nil {
		return protocol.ProcInfo{}, err
	}
	info := protocol.ProcInfo{Proc: p, Workspace: w, Verb: parts[2], StartedBy: messages.OriginOrphan}
	if parts[2] == "run" {
		info.StartedBy = messages.OriginTerminal
	}
	if len(parts) > 3 && parts[3] != "" {
		info.Launch = tr.hash(parts[3])
	}
	return info, nil
}

// launch reads "NAME ws=W record=R [lifetime=L] [wall=D] [tokens=N] [ci=BRANCH@CHECKIN]".
func (tr *transcript) launch(args []string) (protocol.LaunchSpec, error) {
	if len(args) < 1 {
		return protocol.LaunchSpec{}, errors.New("launch NAME ws=W record=R [lifetime=L] [ci=BRANCH@CHECKIN]")
	}
	l := protocol.LaunchSpec{Hash: tr.hash(args[0]), Repository: "/srv/demo.fossil", Kind: messages.Mechanical, Lifetime: messages.Stays, Release: messages.ReleaseCurrent}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "ws":
			w, err := messages.ParseWorkspaceKey(v)
			if err != nil {
				return l, err
			}
			l.Workspace = w
		case "record":
			l.Record = tr.hash(v)
		case "lifetime":
			l.Lifetime = messages.Lifetime(v)
		case "wall":
			l.Wall = v
		case "tokens":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return l, err
			}
			l.Kind, l.Tokens = messages.LLM, n
		case "ci":
			b, c, ok := strings.Cut(v, "@")
			if !ok {
				return l, fmt.Errorf("ci=%s: BRANCH@CHECKIN", v)
			}
			l.Branch, l.Checkin, l.Lifetime = b, tr.hash(c), messages.Completes
		default:
			return l, fmt.Errorf("launch: unknown field %q", k)
		}
	}
	return l, l.Validate()
}

// result builds the result of effect e from an answer's words.
func (tr *transcript) result(e protocol.DaemonEffect, verb string, args []string, whole string) (protocol.DaemonMessage, error) {
	var err error
	if verb == "error" {
		err = errors.New(strings.TrimSpace(strings.TrimPrefix(whole, "error")))
	}
	switch e := e.(type) {
	case protocol.ClassifyArtifact:
		r := protocol.ArtifactClassified{Repository: e.Repository, Hash: e.Hash, Err: err}
		switch verb {
		case "error":
		case "launch":
			l, err := tr.launch(args)
			if err != nil {
				return nil, err
			}
			if l.Hash != e.Hash {
				return nil, fmt.Errorf("the launch's name %s is not the hash classified", args[0])
			}
			r.Launch = &l
		case "checkin":
			c := protocol.CheckinSpec{Hash: e.Hash, Repository: e.Repository}
			for _, a := range args[1:] {
				k, v, _ := strings.Cut(a, "=")
				switch k {
				case "branch":
					c.Branch = v
				case "listeners":
					for _, l := range strings.Split(v, ",") {
						p := strings.Split(l, "@")
						if len(p) != 4 {
							return nil, fmt.Errorf("listener %q: W@RECORD@LISTEN@LIFETIME", l)
						}
						w, err := messages.ParseWorkspaceKey(p[0])
						if err != nil {
							return nil, err
						}
						c.Listeners = append(c.Listeners, protocol.BranchListener{Workspace: w, Repository: e.Repository, Record: tr.hash(p[1]), ListenNote: tr.hash(p[2]), Lifetime: messages.Lifetime(p[3])})
					}
				default:
					return nil, fmt.Errorf("checkin: unknown field %q", k)
				}
			}
			if len(args) < 1 || tr.hash(args[0]) != e.Hash {
				return nil, errors.New("checkin NAME (the hash classified) branch=B [listeners=...]")
			}
			r.Checkin = &c
		case "nothing":
			r.Nothing = strings.Join(args, " ")
		case "refused":
			// refused ws=W REASON...
			if len(args) < 2 || !strings.HasPrefix(args[0], "ws=") {
				return nil, errors.New("refused ws=W REASON")
			}
			w, err := messages.ParseWorkspaceKey(strings.TrimPrefix(args[0], "ws="))
			if err != nil {
				return nil, err
			}
			r.Refused = &protocol.LaunchRefused{Hash: e.Hash, Repository: e.Repository, Workspace: w, Reason: strings.Join(args[1:], " ")}
		default:
			return nil, fmt.Errorf("classify: answer launch, checkin, refused, nothing or error, not %q", verb)
		}
		return r, nil
	case protocol.ResolveLaunch:
		if verb == "error" {
			return protocol.LaunchResolved{Proc: e.Proc, Gone: e.Gone, Err: err}, nil
		}
		l, err := tr.launch(args)
		if err != nil {
			return nil, err
		}
		return protocol.LaunchResolved{Proc: e.Proc, Launch: &l, Gone: e.Gone}, nil
	case protocol.ScanWorkspace:
		r := protocol.WorkspaceScanned{Workspace: e.Workspace, Purpose: e.Purpose, For: e.For, Err: err}
		switch verb {
		case "error", "none":
		case "procs":
			for _, a := range args {
				ps, origin, _ := strings.Cut(a, ":")
				p, err := protocol.ParseProcID(ps)
				if err != nil {
					return nil, err
				}
				verb := "run"
				if origin == string(messages.OriginDaemon) || origin == string(messages.OriginOrphan) {
					verb = "serve"
				}
				r.Procs = append(r.Procs, protocol.ProcInfo{Proc: p, Workspace: e.Workspace, Verb: verb, StartedBy: messages.Origin(origin), Command: "workspace " + verb + " " + e.Workspace.String() + " --root /agents"})
			}
		default:
			return nil, fmt.Errorf("scan: answer none, procs or error, not %q", verb)
		}
		return r, nil
	case protocol.SpawnSession:
		r := protocol.SessionSpawned{Launch: e.Launch.Hash, At: tr.s.now, Err: err}
		if verb == "spawned" {
			if len(args) != 1 {
				return nil, errors.New("spawned PID@START")
			}
			p, err := protocol.ParseProcID(args[0])
			if err != nil {
				return nil, err
			}
			r.Proc = p
		} else if verb != "error" {
			return nil, fmt.Errorf("spawn: answer spawned or error, not %q", verb)
		}
		return r, nil
	case protocol.SignalProcess:
		return protocol.ProcessSignaled{Proc: e.Proc, Signal: e.Signal, Err: err}, nil
	case protocol.WriteRefusal:
		return protocol.RefusalWritten{Launch: e.Launch.Hash, Err: err}, nil
	case protocol.WriteEnd:
		return protocol.EndWritten{Proc: e.Proc, Err: err}, nil
	case protocol.ReadResult:
		r := protocol.ResultRead{Proc: e.Proc, Err: err}
		switch verb {
		case "result":
			r.Found, r.Result = true, strings.Join(args, " ")
		case "none", "error":
		default:
			return nil, fmt.Errorf("read result: answer result, none or error, not %q", verb)
		}
		return r, nil
	case protocol.FindUntested:
		r := protocol.UntestedFound{Branch: e.Branch, Err: err}
		switch verb {
		case "untested":
			if len(args) != 1 {
				return nil, errors.New("untested NAME")
			}
			r.Newest = tr.hash(args[0])
		case "none", "error":
		default:
			return nil, fmt.Errorf("find untested: answer untested, none or error, not %q", verb)
		}
		return r, nil
	case protocol.WriteLaunch:
		r := protocol.LaunchWritten{Branch: e.Branch, Checkin: e.Checkin, Err: err}
		switch verb {
		case "written":
			if len(args) != 1 {
				return nil, errors.New("written NAME")
			}
			l := protocol.LaunchSpec{Hash: tr.hash(args[0]), Repository: e.Listener.Repository, Workspace: e.Listener.Workspace, Record: e.Listener.Record,
				Kind: messages.Mechanical, Lifetime: messages.Completes, Release: messages.ReleaseCurrent, Checkin: e.Checkin, Branch: e.Branch}
			r.Launch = &l
		case "error":
		default:
			return nil, fmt.Errorf("write launch: answer written or error, not %q", verb)
		}
		return r, nil
	case protocol.WatchProcess:
		if verb == "gone" {
			return protocol.ProcessGone{Proc: e.Proc, Seq: e.Seq, At: tr.s.now}, nil
		}
		return protocol.ProcessGone{Proc: e.Proc, Seq: e.Seq, Err: err}, nil
	case protocol.PauseInputs:
		if verb == "paused" {
			return protocol.InputsPaused{Remainder: []byte(strings.Join(args, " "))}, nil
		}
		return protocol.InputsPaused{Err: err}, nil
	case protocol.ResumeInputs:
		return protocol.InputsResumed{Err: err}, nil
	case protocol.ExecRelease:
		if verb == "error" {
			return protocol.ExecFailed{Err: err}, nil
		}
		return nil, nil // the exec happened: nothing comes back
	case protocol.StartTimer:
		return nil, errors.New("a timer is answered with fire N")
	}
	return nil, fmt.Errorf("no answer for %s", e)
}
