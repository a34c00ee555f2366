package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages/protocol"
	"pgregory.net/rapid"
)

// TestTriggerTranscripts plays actors/testdata/trigger: the trigger core
// on a test clock (D101).
func TestTriggerTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "trigger", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in testdata/trigger: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			tt := &triggerTranscript{c: NewTriggerCore(), now: transcriptEpoch}
			playTranscript(t, f, data, func(cmd string, _ int) ([]string, error) { return tt.do(cmd) })
		})
	}
}

type triggerTranscript struct {
	c   *TriggerCore
	now time.Time
}

// do reads one command:
//
//	seen T PROJECT checkin B1,B2 at R.W [ended] [last-checkin R.W]
//	seen T PROJECT schedule "SPEC" at R.W received HH:MM:SS [ended] [last-at HH:MM]
//	checkins T HASH@R.W:BRANCH ...
//	clock HH:MM:SS (the day is the transcript's) then a tick
//	restart (a new core: the node started again)
func (tt *triggerTranscript) do(cmd string) ([]string, error) {
	var fires []protocol.TriggerFire
	clock := func(s string) (time.Time, error) {
		d, err := time.Parse("15:04:05", s)
		if err != nil {
			if d, err = time.Parse("15:04", s); err != nil {
				return time.Time{}, err
			}
		}
		y, mo, da := transcriptEpoch.Date()
		return time.Date(y, mo, da, d.Hour(), d.Minute(), d.Second(), 0, time.UTC), nil
	}
	switch f := fields(cmd); {
	case len(f) >= 6 && f[0] == "seen":
		m := protocol.TriggerSeen{Trigger: f[1], Project: f[2]}
		switch f[3] {
		case "checkin":
			m.Branches = strings.Split(f[4], ",")
		case "schedule":
			m.Schedule = f[4]
		default:
			return nil, fmt.Errorf("seen: checkin or schedule, not %q", f[3])
		}
		for i := 5; i < len(f); i++ {
			var err error
			switch f[i] {
			case "ended":
				m.Ended = true
				continue
			case "at":
				m.At, err = position(f[i+1])
			case "last-checkin":
				m.LastCheckin, err = position(f[i+1])
			case "received":
				m.Received, err = clock(f[i+1])
			case "last-at":
				m.LastAt, err = clock(f[i+1])
			default:
				return nil, fmt.Errorf("seen: %q", f[i])
			}
			if err != nil {
				return nil, err
			}
			i++
		}
		fires = tt.c.Step(tt.now, m)
	case len(f) >= 2 && f[0] == "checkins":
		m := protocol.TriggerCheckins{Trigger: f[1]}
		for _, s := range f[2:] {
			hash, rest, ok1 := strings.Cut(s, "@")
			pos, branch, ok2 := strings.Cut(rest, ":")
			at, err := position(pos)
			if !ok1 || !ok2 || err != nil {
				return nil, fmt.Errorf("checkins: HASH@R.W:BRANCH, not %q", s)
			}
			m.Checkins = append(m.Checkins, protocol.TriggerCheckin{Hash: hash, Branch: branch, At: at})
		}
		fires = tt.c.Step(tt.now, m)
	case len(f) == 2 && f[0] == "clock":
		now, err := clock(f[1])
		if err != nil {
			return nil, err
		}
		tt.now = now
		fires = tt.c.Step(tt.now, protocol.TriggerTick{})
	case len(f) == 1 && f[0] == "restart":
		tt.c = NewTriggerCore()
	default:
		return nil, fmt.Errorf("unknown command %q", cmd)
	}
	var out []string
	for _, e := range fires {
		out = append(out, e.String())
	}
	if n := tt.c.NextTick(); !n.IsZero() && len(fires) > 0 {
		out = append(out, "next "+n.Format(time.RFC3339))
	}
	return out, nil
}

// fields splits a command on spaces, a "quoted part" kept whole.
func fields(s string) []string {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return append(out, s[1:])
			}
			out = append(out, s[1:end+1])
			s = s[end+2:]
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		out = append(out, w)
		s = rest
	}
	return out
}

// TestTriggerCoreProperties: whatever the check-ins and their batches
// (replays and overlaps included), the restarts (the core rebuilt from
// what the record says: the last check-in fired for) and where the stop
// falls, each check-in on the trigger's branches after it fires exactly
// once before the stop, in the server's order, and none after the stop;
// a schedule fires at most once per minute, in order, never after its
// stop, and never twice for one minute across a restart.
func TestTriggerCoreProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 40).Draw(rt, "checkins")
		var all []protocol.TriggerCheckin
		for i := range n {
			all = append(all, protocol.TriggerCheckin{Hash: fmt.Sprintf("C%d", i), Branch: rapid.SampledFrom([]string{"trunk", "dev", "other"}).Draw(rt, "branch"),
				At: protocol.RunPosition{Receipt: int64(10 + i/3), Row: int64(i)}})
		}
		trigger := protocol.TriggerSeen{Trigger: "T", Project: "p", Branches: []string{"trunk", "dev"}, At: protocol.RunPosition{Receipt: 10, Row: -1}}
		sched := protocol.TriggerSeen{Trigger: "S", Project: "p", Schedule: rapid.SampledFrom([]string{"* * * * *", "*/5 * * * *", "0 * * * *"}).Draw(rt, "spec"),
			At: protocol.RunPosition{Receipt: 9, Row: 1}, Received: transcriptEpoch}
		stopAt := rapid.IntRange(0, 60).Draw(rt, "stop")
		now := transcriptEpoch
		c := NewTriggerCore()
		var fired []string // check-ins, in the order fired
		var minutes []time.Time
		var lastCheckin protocol.RunPosition
		ended := false
		record := func(fs []protocol.TriggerFire) {
			for _, f := range fs {
				if ended {
					rt.Fatalf("%s after the stop", f)
				}
				if f.Checkin != "" {
					fired = append(fired, f.Checkin)
					i := slices.IndexFunc(all, func(ci protocol.TriggerCheckin) bool { return ci.Hash == f.Checkin })
					lastCheckin = all[i].At
				} else {
					if len(minutes) > 0 && !minutes[len(minutes)-1].Before(f.At) {
						rt.Fatalf("minute %s after %s", f.At, minutes[len(minutes)-1])
					}
					if f.At.After(now) {
						rt.Fatalf("minute %s fired at %s", f.At, now)
					}
					minutes = append(minutes, f.At)
				}
			}
		}
		seeAll := func() {
			tr, sc := trigger, sched
			tr.LastCheckin, tr.Ended, sc.Ended = lastCheckin, ended, ended
			if len(minutes) > 0 {
				sc.LastAt = minutes[len(minutes)-1]
			}
			record(c.Step(now, tr))
			record(c.Step(now, sc))
		}
		seeAll()
		for step := range 60 {
			if step == stopAt {
				ended = true
				seeAll()
			}
			switch rapid.IntRange(0, 3).Draw(rt, "event") {
			case 0:
				// The engine reads every check-in after the mark: a batch
				// begins at or before the first not fired yet.
				first := slices.IndexFunc(all, func(ci protocol.TriggerCheckin) bool { return lastCheckin.Before(ci.At) })
				if first < 0 {
					first = n
				}
				lo := rapid.IntRange(0, first).Draw(rt, "from")
				hi := rapid.IntRange(lo, n).Draw(rt, "to")
				record(c.Step(now, protocol.TriggerCheckins{Trigger: "T", Checkins: all[lo:hi]}))
			case 1:
				now = now.Add(time.Duration(rapid.IntRange(1, 400).Draw(rt, "seconds")) * time.Second)
				record(c.Step(now, protocol.TriggerTick{}))
			case 2:
				c = NewTriggerCore()
				seeAll()
			case 3:
				now = now.Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "hours")) * time.Hour)
				c = NewTriggerCore()
				seeAll()
			}
		}
		if !ended {
			record(c.Step(now, protocol.TriggerCheckins{Trigger: "T", Checkins: all}))
			var want []string
			for _, ci := range all {
				if ci.Branch != "other" {
					want = append(want, ci.Hash)
				}
			}
			if !slices.Equal(fired, want) {
				rt.Fatalf("fired %v, want %v", fired, want)
			}
		} else {
			// Before the stop: a prefix of the check-ins on its branches, in order.
			var want []string
			for _, ci := range all {
				if ci.Branch != "other" {
					want = append(want, ci.Hash)
				}
			}
			if len(fired) > len(want) || !slices.Equal(fired, want[:len(fired)]) {
				rt.Fatalf("fired %v, not a prefix of %v", fired, want)
			}
		}
	})
}
