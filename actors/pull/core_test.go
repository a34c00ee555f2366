package pull

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const every = 2 * time.Second

// run steps the core through msgs and returns each step's effects, one
// line a message, as a transcript.
func run(c *core, msgs ...Msg) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s ->", m)
		for _, e := range c.Step(m) {
			fmt.Fprintf(&b, " [%s]", e)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestPullTranscripts: the core's decisions in the cases a reader asks
// about, as transcripts.
func TestPullTranscripts(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	for _, c := range []struct {
		name string
		msgs []Msg
		want string
	}{
		{"start pulls every project at once, then every Every", []Msg{
			Started{At: 0, Projects: []string{"b", "a"}},
			PullEnded{At: s, Project: "a"},
			PullEnded{At: s, Project: "b"},
			Tick{At: 3 * s},
		}, `at 0s started b,a -> [pull a] [pull b]
at 1s pulled a -> [first pulled a] [timer 3s]
at 1s pulled b -> [first pulled b]
at 3s tick -> [pull a] [pull b] [timer off]
`},
		{"a burst of kicks during a pull makes one pull more", []Msg{
			Started{At: 0, Projects: []string{"a"}},
			Kicked{At: 1, Project: "a", Why: "poke"},
			Kicked{At: 2, Project: "", Why: "poke"},
			Kicked{At: 3, Project: "a", Why: "write"},
			PullEnded{At: s, Project: "a"},
			PullEnded{At: 2 * s, Project: "a"},
		}, `at 0s started a -> [pull a]
at 1ns kicked a (poke) ->
at 2ns kicked * (poke) ->
at 3ns kicked a (write) ->
at 1s pulled a -> [first pulled a] [pull a]
at 2s pulled a -> [timer 4s]
`},
		{"an ask during a pull is answered by the next", []Msg{
			Started{At: 0, Projects: []string{"a"}},
			Asked{At: 1, Project: "a", ID: 7},
			PullEnded{At: s, Project: "a", Err: "connection refused"},
			PullEnded{At: 2 * s, Project: "a"},
		}, `at 0s started a -> [pull a]
at 1ns asked a #7 ->
at 1s pulled a: failed: connection refused -> [pull a]
at 2s pulled a -> [answer #7] [first pulled a] [timer 4s]
`},
		{"failures back off, a kick still pulls at once", []Msg{
			Started{At: 0, Projects: []string{"a"}},
			PullEnded{At: s, Project: "a", Err: "down"},
			Tick{At: 5 * s},
			PullEnded{At: 5 * s, Project: "a", Err: "down"},
			Kicked{At: 6 * s, Project: "a", Why: "poke"},
			PullEnded{At: 6 * s, Project: "a"},
		}, `at 0s started a -> [pull a]
at 1s pulled a: failed: down -> [timer 5s]
at 5s tick -> [pull a] [timer off]
at 5s pulled a: failed: down -> [timer 13s]
at 6s kicked a (poke) -> [pull a] [timer off]
at 6s pulled a -> [first pulled a] [timer 8s]
`},
		{"pokes kick at most once a PokeGap; those between join one held; the timer is not held", []Msg{
			Started{At: 0, Projects: []string{"a", "b"}},
			PullEnded{At: 100 * ms, Project: "a"},
			PullEnded{At: 100 * ms, Project: "b"},
			Poked{At: 200 * ms},
			PullEnded{At: 300 * ms, Project: "a"},
			PullEnded{At: 300 * ms, Project: "b"},
			Poked{At: 400 * ms},
			Poked{At: 500 * ms},
			Poked{At: 900 * ms},
			Tick{At: 1200 * ms},
			PullEnded{At: 1300 * ms, Project: "a"},
			PullEnded{At: 1300 * ms, Project: "b"},
			Poked{At: 1400 * ms},
			Tick{At: 2200 * ms},
			PullEnded{At: 2300 * ms, Project: "a"},
			PullEnded{At: 2300 * ms, Project: "b"},
			Poked{At: 3300 * ms},
		}, `at 0s started a,b -> [pull a] [pull b]
at 100ms pulled a -> [first pulled a] [timer 2.1s]
at 100ms pulled b -> [first pulled b]
at 200ms poked -> [pull a] [pull b] [timer off]
at 300ms pulled a -> [timer 2.3s]
at 300ms pulled b ->
at 400ms poked -> [timer 1.2s]
at 500ms poked ->
at 900ms poked ->
at 1.2s tick -> [pull a] [pull b] [timer off]
at 1.3s pulled a -> [timer 3.3s]
at 1.3s pulled b ->
at 1.4s poked -> [timer 2.2s]
at 2.2s tick -> [pull a] [pull b] [timer off]
at 2.3s pulled a -> [timer 4.3s]
at 2.3s pulled b ->
at 3.3s poked -> [pull a] [pull b] [timer off]
`},
		{"an ask for a project served here is answered at once", []Msg{
			Started{At: 0, Projects: []string{"a"}},
			Asked{At: 1, Project: "z", ID: 1},
		}, `at 0s started a -> [pull a]
at 1ns asked z #1 -> [answer #1: project "z" is not served from another host]
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := run(New(every), c.msgs...); got != c.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

// TestPullProperties drives the core through random sequences of kicks,
// asks, ticks and pulls ending, against what it promises:
//   - a project is pulled one pull at a time;
//   - every ask is answered, once, by a pull that began after it;
//   - a kick or an ask while no pull is under way pulls at once;
//   - kicks during a pull make at most one pull more after it;
//   - the first successful pull of a project says so, once;
//   - the timer is set to when the next pull is due: Every after a
//     success, doubling after failures up to maxBackoff times, or to a
//     poke held back, if sooner;
//   - pokes begin at most two pulls more than one a pokeGap (D81).
func TestPullProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "c"}), 1, 3, rapid.ID[string]).Draw(t, "projects")
		c := New(every)
		now := time.Duration(0)
		type pstate struct {
			running    bool
			began      time.Duration // the pull under way began then
			seq        int           // message number the pull under way began at
			kicksSince int           // kicks or asks during the pull under way
			failures   int
			successes  int
			firsts     int
			why        string        // why the pull under way began
			poked      int           // pulls begun by pokes
			firstPoke  time.Duration // the first poke (Never: none yet)
		}
		ps := map[string]*pstate{}
		for _, n := range names {
			ps[n] = &pstate{firstPoke: Never}
		}
		askedAt := map[int]int{} // ask id -> message number
		askProject := map[int]string{}
		answered := map[int]bool{}
		timer := Never
		seq := 0
		nextID := 1
		step := func(m Msg) []Effect {
			seq++
			effs := c.Step(m)
			for _, e := range effs {
				switch e := e.(type) {
				case PullProject:
					p := ps[e.Project]
					if p.running {
						t.Fatalf("%s: a second pull of %s while one is under way", m, e.Project)
					}
					p.running, p.began, p.seq, p.kicksSince, p.why = true, now, seq, 0, e.Why
					if e.Why == "poked" {
						p.poked++
					}
				case Answer:
					for _, id := range e.IDs {
						if answered[id] {
							t.Fatalf("%s: ask #%d answered twice", m, id)
						}
						answered[id] = true
						end, ok := m.(PullEnded)
						if !ok {
							if _, bad := askProject[id]; bad {
								t.Fatalf("%s: ask #%d for a project pulled here answered by no pull", m, id)
							}
							continue
						}
						if end.Project != askProject[id] {
							t.Fatalf("%s: ask #%d for %s answered by a pull of %s", m, id, askProject[id], end.Project)
						}
						if askedAt[id] > ps[end.Project].seq {
							t.Fatalf("%s: ask #%d answered by a pull that began before it", m, id)
						}
						if end.Err != e.Err {
							t.Fatalf("%s: answer %q, the pull ended %q", m, e.Err, end.Err)
						}
					}
				case FirstPulled:
					ps[e.Project].firsts++
				case SetTimer:
					timer = e.At
				}
			}
			return effs
		}
		step(Started{At: now, Projects: names})
		for _, n := range names {
			if !ps[n].running {
				t.Fatalf("project %s not pulled at start", n)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"kick": func(t *rapid.T) {
				n := rapid.SampledFrom(append([]string{""}, names...)).Draw(t, "project")
				now += time.Duration(rapid.IntRange(0, 3000).Draw(t, "ms")) * time.Millisecond
				idle := map[string]bool{}
				for name, p := range ps {
					idle[name] = !p.running
					if p.running && (n == "" || n == name) {
						p.kicksSince++
					}
				}
				step(Kicked{At: now, Project: n, Why: "test"})
				for name, p := range ps {
					if (n == "" || n == name) && idle[name] && !p.running {
						t.Fatalf("a kick of idle %s did not pull it", name)
					}
				}
			},
			"ask": func(t *rapid.T) {
				n := rapid.SampledFrom(append([]string{"z"}, names...)).Draw(t, "project")
				id := nextID
				nextID++
				if n != "z" {
					askProject[id] = n
				}
				now += time.Duration(rapid.IntRange(0, 3000).Draw(t, "ms")) * time.Millisecond
				askedAt[id] = seq + 1
				p := ps[n]
				wasIdle := p != nil && !p.running
				if p != nil && p.running {
					p.kicksSince++
				}
				step(Asked{At: now, Project: n, ID: id})
				if wasIdle && !p.running {
					t.Fatalf("an ask of idle %s did not pull it", n)
				}
				if n == "z" && !answered[id] {
					t.Fatalf("an ask for a project pulled nowhere was not answered at once")
				}
			},
			"poke": func(t *rapid.T) {
				now += time.Duration(rapid.IntRange(0, 1500).Draw(t, "ms")) * time.Millisecond
				for _, p := range ps {
					if p.firstPoke == Never {
						p.firstPoke = now
					}
				}
				step(Poked{At: now})
			},
			"tick": func(t *rapid.T) {
				if timer == Never {
					return // no timer set: nothing to fire
				}
				now = max(now, timer)
				step(Tick{At: now})
			},
			"end": func(t *rapid.T) {
				var running []string
				for _, n := range names {
					if ps[n].running {
						running = append(running, n)
					}
				}
				if len(running) == 0 {
					return // no pull under way to end
				}
				n := rapid.SampledFrom(running).Draw(t, "project")
				ok := rapid.Bool().Draw(t, "ok")
				now += time.Duration(rapid.IntRange(1, 5000).Draw(t, "ms")) * time.Millisecond
				p := ps[n]
				kicked := p.kicksSince > 0
				p.running = false
				msg := PullEnded{At: now, Project: n}
				if ok {
					p.failures = 0
					p.successes++
				} else {
					msg.Err = "down"
					p.failures++
				}
				step(msg)
				if kicked && !p.running || !kicked && p.running && p.why != "poked" {
					t.Fatalf("%s: %d kicks during the pull, pulled again: %v (%s)", msg, p.kicksSince, p.running, p.why)
				}
				if !p.running && c.projects[n].due != now+every*time.Duration(1<<min(p.failures, 3)) && c.projects[n].pokeAt == Never {
					t.Fatalf("%s: next pull due at %s, after %d failures", msg, c.projects[n].due, p.failures)
				}
			},
			"": func(t *rapid.T) {
				for n, p := range ps {
					want := 0
					if p.successes > 0 {
						want = 1
					}
					if p.firsts != want {
						t.Fatalf("%s: first pulled said %d times after %d successes", n, p.firsts, p.successes)
					}
				}
				// The timer is the earliest pull due, or poke held.
				want := Never
				for _, n := range names {
					if d := c.projects[n].due; !ps[n].running && d != Never && (want == Never || d < want) {
						want = d
					}
					if d := c.projects[n].pokeAt; d != Never && (want == Never || d < want) {
						want = d
					}
				}
				for n, p := range ps {
					if p.firstPoke != Never && p.poked > 2+int((now-p.firstPoke)/pokeGap) {
						t.Fatalf("%s: %d pulls begun by pokes in %s since the first", n, p.poked, now-p.firstPoke)
					}
				}
				if timer != want {
					t.Fatalf("timer %s, the earliest pull due %s", timer, want)
				}
			},
		})
		// Every pull ends, at once (so that no timer pulls again): every
		// ask is then answered.
		for {
			var running []string
			for _, n := range names {
				if ps[n].running {
					running = append(running, n)
				}
			}
			if len(running) == 0 {
				break
			}
			slices.Sort(running)
			ps[running[0]].running = false
			step(PullEnded{At: now, Project: running[0]})
		}
		for id := range askProject {
			if !answered[id] {
				t.Fatalf("ask #%d never answered", id)
			}
		}
	})
}
