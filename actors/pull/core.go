// Package pull is the core of a node on another host's pull (D72): when
// to pull each project's clone from the server, from the timer, the
// server's pokes, the asks of tools that wrote to the server and want to
// read their write, and what each pull came to. It is pure: no clock
// (each message says when it happened, in the puller's own time since it
// started), no network, no files; the daemon's shell
// (fossilio/remote's Puller) does those and feeds the results back.
//
// Each project is pulled one pull at a time. A kick (a write of the
// node's, the start) pulls at once when no pull is under way, and once
// more after the one under way when one is: a burst of kicks makes at
// most one pull more. A poke of the server's is a kick at most once every
// pokeGap: one within pokeGap of the last is held until then, and others
// meanwhile join it, so that pokes, even a stranger's with the secret,
// make no pulls back to back (D81); the timer is not held. An ask is answered by the first pull that began
// after it, with that pull's outcome: a tool that wrote to the server and
// then asks reads its write once it is answered. The timer pulls every
// Every after the last pull ended; after a pull that failed (the server
// cannot be reached, or would not vouch) the next waits twice as long,
// up to maxBackoff times Every, and a kick or an ask still pulls at once:
// the node waits and asks again, it never guesses.
package pull

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// maxBackoff bounds the doubling of the timer after failed pulls.
const maxBackoff = 8

// pokeGap is the least time between two kicks by pokes of one project.
const pokeGap = time.Second

// Never is a time that is not set.
const Never time.Duration = -1

// Msg is what the shell tells the core; each says when it happened.
type Msg interface {
	at() time.Duration
	String() string
}

// Started: the puller starts, with its projects; each is pulled at once.
type Started struct {
	At       time.Duration
	Projects []string
}

// Tick: the timer the core set (SetTimer) went off.
type Tick struct{ At time.Duration }

// Kicked: pull the project now (a poke names none: every project).
type Kicked struct {
	At      time.Duration
	Project string // "" for every project
	Why     string
}

// Poked: the server poked this node: pull every project, at most once
// every pokeGap.
type Poked struct{ At time.Duration }

// Asked: a caller waits for a pull of the project begun after now.
type Asked struct {
	At      time.Duration
	Project string
	ID      int
}

// PullEnded: the pull PullProject started is over; Err is "" when it
// brought the clone up to date and the server vouched for what came.
type PullEnded struct {
	At      time.Duration
	Project string
	Err     string
}

func (m Started) at() time.Duration   { return m.At }
func (m Tick) at() time.Duration      { return m.At }
func (m Kicked) at() time.Duration    { return m.At }
func (m Poked) at() time.Duration     { return m.At }
func (m Asked) at() time.Duration     { return m.At }
func (m PullEnded) at() time.Duration { return m.At }

func (m Started) String() string {
	return fmt.Sprintf("at %s started %s", m.At, strings.Join(m.Projects, ","))
}
func (m Tick) String() string { return fmt.Sprintf("at %s tick", m.At) }
func (m Kicked) String() string {
	p := m.Project
	if p == "" {
		p = "*"
	}
	return fmt.Sprintf("at %s kicked %s (%s)", m.At, p, m.Why)
}
func (m Poked) String() string { return fmt.Sprintf("at %s poked", m.At) }
func (m Asked) String() string { return fmt.Sprintf("at %s asked %s #%d", m.At, m.Project, m.ID) }
func (m PullEnded) String() string {
	if m.Err != "" {
		return fmt.Sprintf("at %s pulled %s: failed: %s", m.At, m.Project, m.Err)
	}
	return fmt.Sprintf("at %s pulled %s", m.At, m.Project)
}

// Effect is what the core asks the shell to do.
type Effect interface{ String() string }

// PullProject: pull the project's clone and have the server vouch for
// what came; answer with PullEnded. Why says what asked for it (start,
// timer, poked, asked, or a kick's why), for the log.
type PullProject struct{ Project, Why string }

// Answer: tell the asks IDs how the pull they waited for ended.
type Answer struct {
	IDs []int
	Err string
}

// FirstPulled: the project's clone is fresh for the first time since the
// puller started: what the node decides only on a fresh record (the runs
// it finds lost, seed 004 section 10) may be decided now.
type FirstPulled struct{ Project string }

// SetTimer: send Tick at At (Never: no timer).
type SetTimer struct{ At time.Duration }

func (e PullProject) String() string { return "pull " + e.Project }
func (e Answer) String() string {
	ids := make([]string, len(e.IDs))
	for i, id := range e.IDs {
		ids[i] = fmt.Sprint(id)
	}
	s := "answer #" + strings.Join(ids, ",#")
	if e.Err != "" {
		s += ": " + e.Err
	}
	return s
}
func (e FirstPulled) String() string { return "first pulled " + e.Project }
func (e SetTimer) String() string {
	if e.At == Never {
		return "timer off"
	}
	return fmt.Sprintf("timer %s", e.At)
}

// project is one project's state.
type project struct {
	running bool
	// again: a kick or an ask came during the pull under way; againWhy
	// is the first one's why.
	again    bool
	againWhy string
	// answering are the asks the pull under way answers (asked before it
	// began); waiting those it does not (asked during it).
	answering, waiting []int
	// due is when the timer pulls next; why is what set it.
	due time.Duration
	why string
	// lastPoke is when a poke last kicked the project (Never: none yet);
	// pokeAt, when the poke held back kicks it (Never: none is held).
	lastPoke, pokeAt time.Duration
	// failures counts the pulls in a row that failed.
	failures int
	// fresh: a pull succeeded since the start.
	fresh bool
}

// core is the puller's decisions for every project.
type core struct {
	every    time.Duration
	projects map[string]*project
	names    []string
	timer    time.Duration
}

// New is the core of a puller whose timer is every.
func New(every time.Duration) *core {
	return &core{every: every, projects: map[string]*project{}, timer: Never}
}

// Step takes one message and returns what to do.
func (c *core) Step(m Msg) []Effect {
	var out []Effect
	now := m.at()
	switch m := m.(type) {
	case Started:
		for _, name := range m.Projects {
			if _, ok := c.projects[name]; ok {
				continue
			}
			c.projects[name] = &project{due: now, why: "start", lastPoke: Never, pokeAt: Never}
			c.names = append(c.names, name)
		}
		slices.Sort(c.names)
	case Tick:
		// The due pulls start below.
	case Kicked:
		for _, name := range c.named(m.Project) {
			c.kick(name, now, m.Why)
		}
	case Poked:
		for _, name := range c.names {
			c.poke(name, now)
		}
	case Asked:
		p, ok := c.projects[m.Project]
		if !ok {
			return append(out, Answer{IDs: []int{m.ID}, Err: fmt.Sprintf("project %q is not served from another host", m.Project)})
		}
		if p.running {
			p.waiting = append(p.waiting, m.ID)
			p.setAgain("asked")
		} else {
			p.answering = append(p.answering, m.ID)
			p.due, p.why = now, "asked"
		}
	case PullEnded:
		p, ok := c.projects[m.Project]
		if !ok || !p.running {
			break
		}
		p.running = false
		if len(p.answering) > 0 {
			out = append(out, Answer{IDs: p.answering, Err: m.Err})
		}
		p.answering, p.waiting = p.waiting, nil
		if m.Err == "" {
			p.failures = 0
			if !p.fresh {
				p.fresh = true
				out = append(out, FirstPulled{Project: m.Project})
			}
		} else {
			p.failures++
		}
		p.due, p.why = now+c.wait(p), "timer"
		if p.again {
			p.again, p.due, p.why = false, now, p.againWhy
		}
	}
	for _, name := range c.names {
		p := c.projects[name]
		if p.pokeAt != Never && p.pokeAt <= now {
			p.pokeAt = Never
			c.kick(name, now, "poked")
		}
		if !p.running && p.due != Never && p.due <= now {
			p.running = true
			p.due = Never
			out = append(out, PullProject{Project: name, Why: p.why})
		}
	}
	return append(out, c.setTimer()...)
}

// named is the project a kick names, or every project.
func (c *core) named(project string) []string {
	if project == "" {
		return c.names
	}
	if _, ok := c.projects[project]; ok {
		return []string{project}
	}
	return nil
}

// kick pulls a project now, or once more after the pull under way.
func (c *core) kick(name string, now time.Duration, why string) {
	p := c.projects[name]
	if p.running {
		p.setAgain(why)
		return
	}
	p.due, p.why = now, why
}

// setAgain asks one pull more after the one under way.
func (p *project) setAgain(why string) {
	if !p.again {
		p.again, p.againWhy = true, why
	}
}

// poke kicks a project for a poke, unless a poke kicked it less than
// pokeGap ago: then the kick is held until pokeGap after that one, and
// pokes meanwhile join the one held.
func (c *core) poke(name string, now time.Duration) {
	p := c.projects[name]
	switch {
	case p.pokeAt != Never:
		// Joins the poke held.
	case p.lastPoke != Never && now < p.lastPoke+pokeGap:
		p.pokeAt = p.lastPoke + pokeGap
		p.lastPoke = p.pokeAt
	default:
		p.lastPoke = now
		c.kick(name, now, "poked")
	}
}

// wait is how long after a pull the timer pulls again.
func (c *core) wait(p *project) time.Duration {
	return c.every * time.Duration(1<<min(p.failures, bitsOf(maxBackoff)))
}

// bitsOf is log2 of a power of two.
func bitsOf(n int) int {
	b := 0
	for n > 1 {
		n >>= 1
		b++
	}
	return b
}

// setTimer sets the timer to the earliest pull due, or poke held, when
// it moved.
func (c *core) setTimer() []Effect {
	next := Never
	for _, p := range c.projects {
		if !p.running && p.due != Never && (next == Never || p.due < next) {
			next = p.due
		}
		if p.pokeAt != Never && (next == Never || p.pokeAt < next) {
			next = p.pokeAt
		}
	}
	if next == c.timer {
		return nil
	}
	c.timer = next
	return []Effect{SetTimer{At: next}}
}

// Running says whether a pull of the project is under way.
func (c *core) Running(project string) bool {
	p, ok := c.projects[project]
	return ok && p.running
}

// Fresh says whether a pull of the project succeeded since the start.
func (c *core) Fresh(project string) bool {
	p, ok := c.projects[project]
	return ok && p.fresh
}
