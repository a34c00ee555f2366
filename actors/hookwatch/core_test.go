package hookwatch

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var update = flag.Bool("update", false, "rewrite testdata/hookwatch/*.txt with what the watch's core does now")

// testTimes are the core's times in the tests: the daemon's own, but no
// quick look (Quick 0) unless a transcript's first line says "quick"; the
// properties run with and without it.
var testTimes = func() Times { t := DefaultTimes(DefaultEvery); t.Quick = 0; return t }()

// TestWatchTranscripts runs every testdata/hookwatch/*.txt: a line "> MSG"
// is a message into the core (as its String() renders it), the lines after
// it the effects it returned. The first line "projects A B" names the
// repositories (default demo). Lines starting with # are comments. Run with
// -update to rewrite the expected lines, then read the diff.
func TestWatchTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "hookwatch", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata/hookwatch")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runWatchTranscript(t, f) })
	}
}

func runWatchTranscript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var core *Core
	var out, expected []string
	cmd, cmdLine := "", 0
	times := testTimes
	flush := func() {
		if cmd == "" {
			return
		}
		if core == nil {
			core = NewCore(times, []string{"demo"})
		}
		m, err := parseWatchMsg(cmd)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, cmdLine, err)
		}
		if m.String() != cmd {
			t.Errorf("%s:%d: %q renders as %q", path, cmdLine, cmd, m.String())
		}
		var got []string
		for _, e := range core.Step(m) {
			got = append(got, e.String())
		}
		out = append(out, got...)
		if !*update && strings.Join(got, "\n") != strings.Join(expected, "\n") {
			t.Errorf("%s:%d: > %s\n--- want\n%s\n--- got\n%s", path, cmdLine, cmd, strings.Join(expected, "\n"), strings.Join(got, "\n"))
		}
		cmd, expected = "", nil
	}
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		switch {
		case line == "quick":
			if core != nil {
				t.Fatalf("%s:%d: quick after the first message", path, i+1)
			}
			times.Quick = defaultQuick
			out = append(out, line)
		case strings.HasPrefix(line, "projects "):
			if core != nil {
				t.Fatalf("%s:%d: projects after the first message", path, i+1)
			}
			core = NewCore(times, strings.Fields(strings.TrimPrefix(line, "projects ")))
			out = append(out, line)
		case strings.HasPrefix(line, "> "):
			flush()
			cmd, cmdLine = strings.TrimPrefix(line, "> "), i+1
			out = append(out, line)
		case strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "":
			flush()
			out = append(out, line)
		default:
			if cmd == "" {
				t.Fatalf("%s:%d: an effect with no message before it: %q", path, i+1, line)
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

// parseWatchMsg reads a message back from its String().
func parseWatchMsg(s string) (WatchMsg, error) {
	rest, ok := strings.CutPrefix(s, "at ")
	if !ok {
		return nil, fmt.Errorf("%q: a message starts with \"at DURATION\"", s)
	}
	ds, rest, _ := strings.Cut(rest, " ")
	at, err := time.ParseDuration(ds)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", s, err)
	}
	f := strings.Fields(rest)
	switch {
	case rest == "started":
		return WatchStarted{At: at}, nil
	case rest == "tick":
		return Tick{At: at}, nil
	case rest == "paused":
		return WatchPaused{At: at}, nil
	case rest == "resumed":
		return WatchResumed{At: at}, nil
	case strings.HasPrefix(rest, "events lost: "):
		return EventsLost{At: at, Reason: strings.TrimPrefix(rest, "events lost: ")}, nil
	case len(f) == 2 && f[0] == "written":
		return RepoWritten{At: at, Project: f[1]}, nil
	case len(f) >= 3 && f[0] == "run" && f[1] == "ended":
		return HookRunEnded{At: at, Project: f[2], Failed: len(f) == 4 && f[3] == "failed"}, nil
	case len(f) >= 3 && f[0] == "looked":
		r := LookResult{At: at, Project: f[1], Installed: true, HasMark: true}
		for _, x := range f[2:] {
			k, v, _ := strings.Cut(x, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "unreadable":
				r.Unreadable, r.Installed, r.HasMark = true, false, false
			case "no-hook":
				r.Installed, r.HasMark = false, false
			case "no-mark":
				r.HasMark = false
			case "newest":
				r.Newest = n
			case "mark":
				r.Mark = n
			case "fossil":
				r.Fossil = n
			case "held":
				r.Held = true
			case "by-page":
				r.ByPage = true
			case "page-writing":
				r.PageWriting = true
			default:
				return nil, fmt.Errorf("%q: %q is no part of a look", s, x)
			}
		}
		return r, nil
	}
	return nil, fmt.Errorf("%q is no message of the watch", s)
}

// TestWatchLooks folds in the lag's table (before D29 the watch only
// looked, every 2 s): a look that finds the mark behind a receipt no write
// announced gives Fossil Settle, and runs the hook if the mark is still
// behind then; a hook that keeps up is never run. Each look is one the core
// asked for.
func TestWatchLooks(t *testing.T) {
	type look struct {
		at           time.Duration
		mark, newest int64
		run          bool
	}
	s, every := testTimes.Settle, testTimes.Every
	for _, c := range []struct {
		name  string
		looks []look
	}{
		{"a hook that keeps up", []look{{0, 5, 5, false}, {every, 5, 5, false}, {2 * every, 6, 6, false}}},
		{"a lag the hook clears within Settle", []look{{0, 5, 6, false}, {s, 6, 6, false}, {s + every, 6, 6, false}}},
		{"a lag that stays Settle", []look{{0, 5, 6, false}, {s, 5, 6, true}}},
		{"more receipts while behind: Settle again", []look{{0, 5, 6, false}, {s, 5, 9, false}, {2 * s, 5, 9, true}}},
		{"a new lag found by a look", []look{{0, 5, 5, false}, {every, 5, 6, false}, {every + s, 5, 6, true}}},
	} {
		core := NewCore(testTimes, []string{"demo"})
		effects := core.Step(WatchStarted{})
		for i, l := range c.looks {
			if i > 0 {
				effects = core.Step(Tick{At: l.at})
			}
			if len(effects) == 0 || effects[0] != (Look{Project: "demo"}) {
				t.Fatalf("%s: at %s the core does not look: %v", c.name, l.at, effects)
			}
			effects = core.Step(LookResult{At: l.at, Project: "demo", Installed: true, HasMark: true, Mark: l.mark, Newest: l.newest})
			ran := false
			for _, e := range effects {
				if _, ok := e.(RunHook); ok {
					ran = true
					effects = core.Step(HookRunEnded{At: l.at, Project: "demo"})
					core.Step(LookResult{At: l.at, Project: "demo", Installed: true, HasMark: true, Mark: l.newest, Newest: l.newest})
				}
			}
			if ran != l.run {
				t.Errorf("%s: look %d at %s (mark %d, newest %d): run %v; want %v (effects %v)", c.name, i, l.at, l.mark, l.newest, ran, l.run, effects)
			}
		}
	}
}

// TestWatchBackoff: a hook that never moves its mark is run at once, then
// after 2, 4, 8, 16, 32 and again 32 times Every, looks in between running
// nothing.
func TestWatchBackoff(t *testing.T) {
	d := newWatchDriver(t, []string{"demo"})
	d.work = func(*watchDriver) {} // a hook that does nothing
	d.newest = 6
	d.mark = 5
	d.step(WatchStarted{At: 0})
	var runs []time.Duration
	for d.now < 10*time.Minute {
		d.advance(d.next() - d.now)
	}
	runs = d.ranAt
	every := testTimes.Every
	want := []time.Duration{testTimes.Settle}
	for _, k := range []int{1, 2, 3, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5} {
		want = append(want, want[len(want)-1]+every<<k)
	}
	for len(want) > 0 && want[len(want)-1] >= 10*time.Minute {
		want = want[:len(want)-1]
	}
	if fmt.Sprint(runs) != fmt.Sprint(want) {
		t.Errorf("runs at %v\nwant    %v", runs, want)
	}
}

// watchModel is the node the driver stands for: the repository's receipts,
// the hook's mark and its lock, Fossil's runs of the hook, the file events.
type watchModel struct {
	newest, mark, fossil int64
	// own are the receipts the hook wrote itself (its unheard notes);
	// page, those a web page made (no backoffice comes for them).
	own, page map[int64]bool
	// fossilRun is a run Fossil launched that has not yet taken the lock;
	// holder is who holds it: "", "fossil" or "watch" (the run the watch
	// started); fossilCovers is what Fossil's run holding it read.
	fossilRun    bool
	holder       string
	fossilCovers int64
	// events says whether the file events reach the core.
	events bool
}

// fataler is what the driver needs of a *testing.T or a *rapid.T.
type fataler interface {
	Fatalf(format string, args ...any)
}

// watchDriver drives a core as the shell does: looks answered from the
// model at once, the core's timer kept, its runs ended runTakes later, when
// the hook's work (work) is done.
type watchDriver struct {
	t fataler
	watchModel
	core    *Core
	now     time.Duration
	timer   time.Duration
	paused  bool
	running string
	runEnds time.Duration
	// work is what a run the watch started does, at its end; the default
	// handles every receipt. runTakes is how long a run takes.
	work     func(d *watchDriver)
	runTakes func() time.Duration
	ranAt    []time.Duration
	looks    int
	// lastLook is the last LookResult for each project; heldSeen and
	// launchSeen are since when the looks have found, in a row, a run
	// holding the mark, or Fossil's launch for the newest receipt (of
	// launchOf) with nothing holding it.
	lastLook             map[string]LookResult
	heldSeen, launchSeen time.Duration
	launchOf             int64
	// trace is the last messages and effects, for a failure's message.
	trace []string
}

func newWatchDriver(t fataler, projects []string) *watchDriver {
	return newWatchDriverWith(t, projects, testTimes)
}

func newWatchDriverWith(t fataler, projects []string, times Times) *watchDriver {
	return &watchDriver{t: t, watchModel: watchModel{events: true, own: map[int64]bool{}, page: map[int64]bool{}}, core: NewCore(times, projects),
		timer: never, runEnds: never, heldSeen: never, launchSeen: never,
		work: func(d *watchDriver) { d.mark = d.newest }, runTakes: func() time.Duration { return 0 }, lastLook: map[string]LookResult{}}
}

func (d *watchDriver) fail(format string, args ...any) {
	d.t.Fatalf("at %s: %s\n%s", d.now, fmt.Sprintf(format, args...), strings.Join(d.trace, "\n"))
}

func (d *watchDriver) step(m WatchMsg) {
	queue := []WatchMsg{m}
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		effects := d.core.Step(m)
		d.trace = append(d.trace, "> "+m.String())
		for _, e := range effects {
			d.trace = append(d.trace, e.String())
		}
		if len(d.trace) > 60 {
			d.trace = d.trace[len(d.trace)-60:]
		}
		for _, e := range effects {
			switch e := e.(type) {
			case Look:
				if d.paused {
					d.fail("a look while paused")
				}
				d.looks++
				r := LookResult{At: d.now, Project: e.Project, Installed: true, HasMark: true,
					Newest: d.newest, Mark: d.mark, Fossil: d.fossil, Held: d.holder != "", ByPage: d.newest > d.mark}
				for n := d.mark + 1; n <= d.newest; n++ {
					r.ByPage = r.ByPage && d.page[n]
				}
				d.seen(r)
				queue = append(queue, r)
			case RunHook:
				d.ran(e)
			case SetTimer:
				d.timer = e.At
			}
		}
	}
}

// seen keeps, apart from the core, what the looks found in a row.
func (d *watchDriver) seen(r LookResult) {
	d.lastLook[r.Project] = r
	switch {
	case r.Mark >= r.Newest:
		d.heldSeen, d.launchSeen = never, never
	case r.Held:
		d.launchSeen = never
		if d.heldSeen == never {
			d.heldSeen = d.now
		}
	case r.Fossil >= r.Newest:
		d.heldSeen = never
		if d.launchSeen == never || d.launchOf != r.Fossil {
			d.launchSeen, d.launchOf = d.now, r.Fossil
		}
	default:
		d.heldSeen, d.launchSeen = never, never
	}
}

// ran checks a run the core asks for, and starts it.
func (d *watchDriver) ran(e RunHook) {
	if d.running != "" {
		d.fail("a run of %s while %s's runs", e.Project, d.running)
	}
	if d.paused {
		d.fail("a run while paused")
	}
	l := d.lastLook[e.Project]
	switch {
	case l.At != d.now || l.Mark >= l.Newest:
		d.fail("a run after the look %v", l)
	case l.Held && d.now-d.heldSeen < testTimes.Busy:
		d.fail("a run while a run holds the mark, seen since %s: %v", d.heldSeen, e)
	case !l.Held && l.Fossil >= l.Newest && d.now-d.launchSeen < testTimes.Launch:
		d.fail("a run while Fossil's, launched (seen since %s), has yet to take the mark: %v", d.launchSeen, e)
	}
	d.running, d.runEnds = e.Project, d.now+d.runTakes()
	d.ranAt = append(d.ranAt, d.now)
	// The hook takes the lock if it is free; a stuck run's it waits for,
	// then goes on without.
	if d.holder == "" {
		d.holder = "watch"
	}
}

// next is when the next thing happens: the timer, or the run's end.
func (d *watchDriver) next() time.Duration {
	n := earliest(d.timer, d.runEnds)
	if n == never {
		d.fail("no timer and no run")
	}
	return n
}

// advance lets time pass, the core's timer going off and the run ending on
// the way.
func (d *watchDriver) advance(by time.Duration) {
	end := d.now + by
	for steps := 0; ; steps++ {
		if steps > 100000 {
			d.fail("the timer (%s) and the run's end (%s) do not move on", d.timer, d.runEnds)
		}
		n := earliest(d.timer, d.runEnds)
		if n == never || n > end {
			break
		}
		d.now = max(d.now, n)
		if n == d.runEnds {
			d.work(d)
			if d.holder == "watch" {
				d.holder = ""
			}
			p := d.running
			d.running, d.runEnds = "", never
			d.step(HookRunEnded{At: d.now, Project: p})
			continue
		}
		d.timer = never // it went off
		d.step(Tick{At: d.now})
	}
	d.now = end
}

// receive is a receipt arriving: its write, and, for a tool's write,
// Fossil's launch of its hooks (unless embargoed).
func (d *watchDriver) receive(launch bool) {
	d.newest++
	d.page[d.newest] = false
	if launch {
		d.fossil, d.fossilRun = d.newest, true
	}
	if d.events {
		d.step(RepoWritten{At: d.now, Project: "demo"})
	}
}

// webPost is a person's post on Fossil's web form: a page's receipt, for
// which Fossil launches nothing.
func (d *watchDriver) webPost() {
	d.newest++
	d.page[d.newest] = true
	if d.events {
		d.step(RepoWritten{At: d.now, Project: "demo"})
	}
}

// TestWatchProperties drives the core through random arrivals (a person's
// on the web, a tool's with its backoffice, embargoed or not), Fossil's runs
// and their timing, hooks that fail or note what nobody heard, lost events
// and pauses. Never two runs at once, none while paused, none after a look
// that found the mark caught up, none while a run holds the mark (short of
// Busy) or while the run Fossil launched has yet to take it (short of
// Launch); the core always has a look due within Every while nothing runs.
// Once the arrivals stop, the mark catches up within the longest back-off,
// and then nothing runs again (the hook's own notes do not loop).
func TestWatchProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		times := testTimes
		if rapid.Bool().Draw(rt, "quick") {
			times.Quick = defaultQuick
		}
		d := newWatchDriverWith(rt, []string{"demo"}, times)
		d.newest, d.mark, d.fossil = 3, 3, 3
		failing := rapid.Bool().Draw(rt, "failing")
		noting := rapid.Bool().Draw(rt, "noting")
		d.work = func(d *watchDriver) {
			if failing && rapid.IntRange(0, 3).Draw(rt, "fails") == 0 {
				return
			}
			heard := false
			for r := d.mark + 1; r <= d.newest; r++ {
				heard = heard || !d.own[r]
			}
			d.mark = d.newest
			if noting && heard {
				// The hook's unheard note: a receipt of its own,
				// followed by its backoffice (D11).
				d.own[d.newest+1] = true
				d.receive(rapid.IntRange(0, 3).Draw(rt, "note embargoed") != 0)
			}
		}
		d.runTakes = func() time.Duration {
			return time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(rt, "run takes"))
		}
		d.step(WatchStarted{})
		rt.Repeat(map[string]func(*rapid.T){
			"web post": func(rt *rapid.T) { d.webPost() },
			"tool post": func(rt *rapid.T) {
				d.receive(rapid.IntRange(0, 3).Draw(rt, "embargo") != 0)
			},
			"time": func(rt *rapid.T) {
				d.advance(time.Duration(rapid.Int64Range(1, int64(5*time.Second)).Draw(rt, "by")))
			},
			"a little time": func(rt *rapid.T) {
				d.advance(time.Duration(rapid.Int64Range(1, int64(200*time.Millisecond)).Draw(rt, "by")))
			},
			"fossil takes the lock": func(rt *rapid.T) {
				if d.fossilRun && d.holder == "" {
					d.fossilRun, d.holder, d.fossilCovers = false, "fossil", d.newest
				}
			},
			"fossil's run ends": func(rt *rapid.T) {
				if d.holder == "fossil" {
					d.holder = ""
					if rapid.IntRange(0, 5).Draw(rt, "dies") != 0 {
						d.mark = max(d.mark, d.fossilCovers)
					}
				}
			},
			"fossil's run is lost": func(rt *rapid.T) { d.fossilRun = false },
			"events lost": func(rt *rapid.T) {
				d.events = rapid.Bool().Draw(rt, "still")
				d.step(EventsLost{At: d.now, Reason: "test"})
			},
			"pause": func(rt *rapid.T) {
				// The shell pauses once no run is under way.
				if !d.paused && d.running == "" {
					d.paused = true
					d.step(WatchPaused{At: d.now})
				}
			},
			"resume": func(rt *rapid.T) {
				if d.paused {
					d.paused = false
					d.step(WatchResumed{At: d.now})
				}
			},
			"": func(rt *rapid.T) {
				if !d.paused && d.core.Running() == "" && (d.timer == never || d.timer > d.now+testTimes.Every) {
					d.fail("the next look is at %s", d.timer)
				}
			},
		})
		// The arrivals stop, the hook works, Fossil's runs end.
		if d.paused {
			d.paused = false
			d.step(WatchResumed{At: d.now})
		}
		failing = false
		if d.holder == "fossil" {
			d.holder = ""
		}
		d.fossilRun = false
		d.runTakes = func() time.Duration { return 0 }
		deadline := d.now + testTimes.Every<<maxBackoff + testTimes.Busy + testTimes.Launch + time.Second
		for d.mark < d.newest && d.now < deadline {
			d.advance(d.next() - d.now)
		}
		if d.mark < d.newest {
			d.fail("the mark %d stayed behind %d", d.mark, d.newest)
		}
		runs := len(d.ranAt)
		d.advance(10 * time.Minute)
		if len(d.ranAt) != runs {
			d.fail("%d runs after the mark caught up: %v", len(d.ranAt)-runs, d.ranAt[runs:])
		}
	})
}

// TestWatchBurstOneLook: writes within Settle of the first make one look,
// Settle after the first.
func TestWatchBurstOneLook(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := newWatchDriver(rt, []string{"demo"})
		d.runTakes = func() time.Duration { return time.Hour }
		d.step(WatchStarted{})
		d.advance(time.Second)
		start, looks := d.now, d.looks
		for _, at := range append([]int64{0}, rapid.SliceOfN(rapid.Int64Range(0, int64(testTimes.Settle)-1), 0, 50).Draw(rt, "writes")...) {
			if t := start + time.Duration(at); t > d.now {
				d.advance(t - d.now)
			}
			d.receive(false)
		}
		if d.looks != looks {
			rt.Fatalf("%d looks before Settle", d.looks-looks)
		}
		d.advance(start + testTimes.Settle - d.now)
		if d.looks != looks+1 || len(d.ranAt) != 1 {
			rt.Fatalf("after Settle: %d looks and %d runs; want one of each", d.looks-looks, len(d.ranAt))
		}
	})
}

// TestWatchOneRunAtATime: with several repositories written at random, the
// watch never runs two hooks at once; a repository whose look found a lag
// while another's run was under way is looked at again when that run ends,
// and once the writes stop, every mark catches up.
func TestWatchOneRunAtATime(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		names := []string{"a", "b", "c"}
		core := NewCore(testTimes, names)
		newest, mark := map[string]int64{}, map[string]int64{}
		now, timer, runEnds := time.Duration(0), never, never
		running := ""
		var step func(WatchMsg)
		step = func(m WatchMsg) {
			queue := []WatchMsg{m}
			for len(queue) > 0 {
				m := queue[0]
				queue = queue[1:]
				for _, e := range core.Step(m) {
					switch e := e.(type) {
					case Look:
						queue = append(queue, LookResult{At: now, Project: e.Project, Installed: true, HasMark: true, Newest: newest[e.Project], Mark: mark[e.Project]})
					case RunHook:
						if running != "" {
							rt.Fatalf("at %s: a run of %s while %s's runs", now, e.Project, running)
						}
						running = e.Project
						runEnds = now + time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(rt, "run takes"))
					case SetTimer:
						timer = e.At
					}
				}
			}
		}
		advance := func(by time.Duration) {
			end := now + by
			for {
				n := earliest(timer, runEnds)
				if n == never || n > end {
					break
				}
				now = max(now, n)
				if n == runEnds {
					p := running
					mark[p] = newest[p]
					running, runEnds = "", never
					step(HookRunEnded{At: now, Project: p})
					continue
				}
				timer = never
				step(Tick{At: now})
			}
			now = end
		}
		step(WatchStarted{})
		rt.Repeat(map[string]func(*rapid.T){
			"post": func(rt *rapid.T) {
				p := rapid.SampledFrom(names).Draw(rt, "repository")
				newest[p]++
				step(RepoWritten{At: now, Project: p})
			},
			"time": func(rt *rapid.T) {
				advance(time.Duration(rapid.Int64Range(1, int64(time.Second)).Draw(rt, "by")))
			},
		})
		deadline := now + testTimes.Every + time.Duration(len(names))*(testTimes.Settle+time.Second)
		for now < deadline {
			advance(earliest(timer, runEnds) - now)
			caught := true
			for _, p := range names {
				caught = caught && mark[p] >= newest[p]
			}
			if caught {
				return
			}
		}
		rt.Fatalf("at %s: marks %v stayed behind %v", now, mark, newest)
	})
}
