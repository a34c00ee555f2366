// Package hookwatch is the daemon's hook watch's core (D24, D29): when to
// look at a repository, and when a look calls for a run of the wake hook, from the repository's file events,
// the timer and what each look found. It is pure: no clock (each message
// says when it happened, in the watch's own time since it started), no
// files, no processes; the daemon's
// hookwatch.go does those and feeds the results back.
//
// A write to a repository (a file event) makes the watch look Settle later:
// a burst of writes (a post is a dozen) makes one look. A look that finds
// the hook's mark behind the newest receipt (the newest finished one: a
// receipt a web page is still writing is not there yet, fossilio.HookLook)
// runs the hook, unless
//
//   - a run of the hook holds the mark's lock (Fossil's backoffice, a tool's
//     `fossil backoffice`, or the hook by hand): it looks again every Retry
//     until the run ends, or takes the run for stuck after Busy;
//   - Fossil has launched the hooks for every receipt (its hook-last-rcvid)
//     and that run has not taken the lock yet: the same, for Launch;
//   - the newest receipt has been known for less than Settle (a look that
//     no write announced, such as a periodic one, found it): the tool that
//     wrote it runs `fossil backoffice` right after its write (D11), so the
//     watch gives it that long. Not so when every receipt the hook has yet
//     to handle was made by a web page (LookResult.ByPage): Fossil starts
//     no backoffice for those (D29), so nothing is waited for. To find
//     such a receipt early, a write makes the watch look Quick after it
//     too, up to maxQuicks looks a burst (none while a receipt a tool
//     made waits for its backoffice), and a look that finds a web page
//     still writing its receipt (LookResult.PageWriting) looks again
//     Quick later;
//   - the runs it made before did not move the mark on: it backs off,
//     doubling Every up to 32 times between runs;
//   - a run the watch started is under way, for any repository (never two
//     at once), or the watch is paused (a re-exec).
//
// Every repository is also looked at every Every, whatever the events: the
// fallback when the file events fail or miss a write.
package hookwatch

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The daemon's times. DefaultEvery is the longest time between two looks
// at a repository (ocxd --hook-watch): the fallback under the file events,
// which make the watch look Settle after each write. defaultBusy is the bound
// the hook itself waits for an overlapping run (hook.DefaultLockWait).
// defaultSettle is from a write to the look at it: a post's writes take a
// few milliseconds, and a tool's `fossil backoffice` has launched the hook
// within about 20 ms of its write (D29); defaultRetry how often a look is
// made again while a run holds the mark; defaultLaunch how long a run Fossil
// launched has to take the mark.
const (
	DefaultEvery  = 2 * time.Second
	defaultBusy   = 10 * time.Second
	defaultSettle = 50 * time.Millisecond
	defaultRetry  = 50 * time.Millisecond
	defaultLaunch = time.Second
	defaultQuick  = 5 * time.Millisecond
)

// DefaultTimes are the daemon's times, every being --hook-watch.
func DefaultTimes(every time.Duration) Times {
	return Times{Every: every, Settle: defaultSettle, Retry: defaultRetry, Busy: defaultBusy, Launch: defaultLaunch, Quick: defaultQuick}
}

// Times are the core's durations.
type Times struct {
	// Every is the longest time between two looks at a repository.
	Every time.Duration
	// Settle is the time from a write to the look at it, and the least
	// time a receipt is known before the watch runs the hook for it.
	Settle time.Duration
	// Retry is how soon to look again while a run holds the mark, or while
	// a run Fossil launched has yet to take it.
	Retry time.Duration
	// Busy is how long a run may hold the mark before the watch takes it
	// for stuck and runs another.
	Busy time.Duration
	// Launch is how long a run Fossil launched has to take the mark before
	// the watch takes it for lost (Fossil does not wait for its hooks, and
	// delivers at most once).
	Launch time.Duration
	// Quick is the time from a write to a look that runs the hook at once
	// for receipts made by web pages (D29's settle ended early); 0 makes
	// no such look.
	Quick time.Duration
}

// Never is a time that is not set: no look due, no write seen, no timer.
const Never time.Duration = -1

const never = Never

// maxBackoff caps the doubling of the time between runs that do not help.
const maxBackoff = 5

// maxQuicks bounds the quick looks a burst of writes makes: a web post's
// receipt is whole only some writes into its burst (its first writes
// are not its receipt), a tool's is found by the first look after its
// commit.
const maxQuicks = 4

// WatchMsg is what the shell tells the core; each says when it happened.
type WatchMsg interface {
	at() time.Duration
	String() string
}

// WatchStarted: the watch starts; it looks at every repository at once (a
// receipt may have come while no daemon ran).
type WatchStarted struct{ At time.Duration }

// Tick: the timer the core set (SetTimer) went off.
type Tick struct{ At time.Duration }

// RepoWritten: the file events say the project's repository (or its -wal)
// was written.
type RepoWritten struct {
	At      time.Duration
	Project string
}

// EventsLost: the file events were lost (the kernel's queue overflowed) or
// stopped (the watcher failed): every repository is looked at now, and from
// then on at least every Every.
type EventsLost struct {
	At     time.Duration
	Reason string
}

// LookResult is what a Look found.
type LookResult struct {
	At      time.Duration
	Project string
	// Unreadable: the repository or its config could not be read.
	Unreadable bool
	// Installed: OCX's hook is installed in the repository.
	Installed bool
	// HasMark: the hook keeps a mark (a hook installed by hand handles
	// only Fossil's list, and is left alone).
	HasMark bool
	// Newest is the newest receipt; Mark the hook's mark; Fossil is the
	// newest receipt Fossil launched its hooks for (hook-last-rcvid).
	Newest, Mark, Fossil int64
	// Held: a run of the hook holds the mark's lock.
	Held bool
	// ByPage: every receipt after Mark up to Newest was made by a web
	// page, for which Fossil starts no backoffice (fossilio.HookLook);
	// PageWriting: a web page is still writing a receipt after Newest.
	ByPage, PageWriting bool
}

// HookRunEnded: the run RunHook started is over.
type HookRunEnded struct {
	At      time.Duration
	Project string
	Failed  bool
}

// WatchPaused: a re-exec holds the watch: no look, no run, until
// WatchResumed. (The shell waits for a run under way before it pauses.)
type WatchPaused struct{ At time.Duration }

// WatchResumed: the re-exec did not happen; the watch goes on.
type WatchResumed struct{ At time.Duration }

func (m WatchStarted) at() time.Duration { return m.At }
func (m Tick) at() time.Duration         { return m.At }
func (m RepoWritten) at() time.Duration  { return m.At }
func (m EventsLost) at() time.Duration   { return m.At }
func (m LookResult) at() time.Duration   { return m.At }
func (m HookRunEnded) at() time.Duration { return m.At }
func (m WatchPaused) at() time.Duration  { return m.At }
func (m WatchResumed) at() time.Duration { return m.At }

func (m WatchStarted) String() string { return fmt.Sprintf("at %s started", m.At) }
func (m Tick) String() string         { return fmt.Sprintf("at %s tick", m.At) }
func (m RepoWritten) String() string  { return fmt.Sprintf("at %s written %s", m.At, m.Project) }
func (m EventsLost) String() string   { return fmt.Sprintf("at %s events lost: %s", m.At, m.Reason) }
func (m WatchPaused) String() string  { return fmt.Sprintf("at %s paused", m.At) }
func (m WatchResumed) String() string { return fmt.Sprintf("at %s resumed", m.At) }

func (m LookResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "at %s looked %s", m.At, m.Project)
	switch {
	case m.Unreadable:
		b.WriteString(" unreadable")
	case !m.Installed:
		b.WriteString(" no-hook")
	case !m.HasMark:
		b.WriteString(" no-mark")
	default:
		fmt.Fprintf(&b, " newest=%d mark=%d fossil=%d", m.Newest, m.Mark, m.Fossil)
		if m.Held {
			b.WriteString(" held")
		}
		if m.ByPage {
			b.WriteString(" by-page")
		}
		if m.PageWriting {
			b.WriteString(" page-writing")
		}
	}
	return b.String()
}

func (m HookRunEnded) String() string {
	s := fmt.Sprintf("at %s run ended %s", m.At, m.Project)
	if m.Failed {
		s += " failed"
	}
	return s
}

// WatchEffect is what the core asks the shell to do.
type WatchEffect interface{ String() string }

// Look: read the project's newest receipt, Fossil's hook-last-rcvid, the
// hook's mark and whether a run holds it; answer with a LookResult.
type Look struct{ Project string }

// RunHook: run the project's installed hook command, as Fossil would; answer
// with HookRunEnded when it is over.
type RunHook struct {
	Project      string
	Mark, Newest int64
	// Why the watch runs it: "write" (a write announced the receipt),
	// "look" (a look found it), "stuck" (a run held the mark past Busy) or
	// "lost" (the run Fossil launched never took the mark).
	Why string
}

// SetTimer: send a Tick at At (replacing the timer set before); never: no
// timer.
type SetTimer struct{ At time.Duration }

func (e Look) String() string { return "look " + e.Project }
func (e RunHook) String() string {
	return fmt.Sprintf("run %s mark=%d newest=%d why=%s", e.Project, e.Mark, e.Newest, e.Why)
}
func (e SetTimer) String() string {
	if e.At == never {
		return "timer off"
	}
	return "timer " + e.At.String()
}

// watched is the core's state of one repository.
type watched struct {
	// due is when to look next; never while a look or a run is out.
	due time.Duration
	// written is when the first write came that no look was asked to see;
	// asked is the write the look out answers.
	written, asked time.Duration
	looking        bool
	// newest is the newest receipt the watch knows of, since newestAt,
	// announced by a write (byWrite) or found by a look.
	newest   int64
	newestAt time.Duration
	byWrite  bool
	// heldSince and launchedSince are when a look first found a run
	// holding the mark, or Fossil's run launched and not holding it, in
	// a row of looks.
	heldSince, launchedSince time.Duration
	// launchedFor is Fossil's hook-last-rcvid at launchedSince.
	launchedFor int64
	// ranFor is the newest receipt when the watch last ran the hook, and
	// failures counts its runs since the mark last passed ranFor that did
	// not pass it; no run before notBefore.
	ranFor    int64
	failures  int
	notBefore time.Duration
	// judge: the next look judges the run that just ended.
	judge bool
	// deferred: a look wanted a run while another repository's was under
	// way.
	deferred bool
	// toolSeen: a look found a receipt a tool made, which its backoffice
	// is given Settle for: no quick look until the mark catches up.
	toolSeen bool
	// quicks counts the quick looks of the burst of writes being settled.
	quicks int
}

// Core decides for every repository of the node.
type Core struct {
	t       Times
	names   []string
	repos   map[string]*watched
	running string // the project whose run is under way; "" none
	paused  bool
	timerAt time.Duration
}

// NewCore is the core over the given projects.
func NewCore(t Times, projects []string) *Core {
	c := &Core{t: t, names: slices.Sorted(slices.Values(projects)), repos: map[string]*watched{}, timerAt: never}
	c.names = slices.Compact(c.names)
	for _, p := range c.names {
		c.repos[p] = &watched{due: never, written: never, asked: never, heldSince: never, launchedSince: never}
	}
	return c
}

// Running is the project whose run is under way, "" when none.
func (c *Core) Running() string { return c.running }

// Step takes one message and returns what to do, in order.
func (c *Core) Step(m WatchMsg) []WatchEffect {
	now := m.at()
	var out []WatchEffect
	switch m := m.(type) {
	case WatchStarted:
		for _, p := range c.repos {
			p.due = now
		}
	case Tick:
		// The timer went off: none is set until the core sets one.
		c.timerAt = never
	case RepoWritten:
		if p := c.repos[m.Project]; p != nil {
			if p.written == never {
				p.written = now
			}
			if !p.looking && c.running != m.Project {
				p.due = earliest(p.due, p.written+c.t.Settle)
				if c.t.Quick > 0 && !p.toolSeen && p.quicks < maxQuicks {
					p.due = earliest(p.due, now+c.t.Quick)
				}
			}
		}
	case EventsLost:
		for name, p := range c.repos {
			if !p.looking && c.running != name {
				p.due = now
			}
		}
	case LookResult:
		out = c.looked(m, out)
	case HookRunEnded:
		if c.running == m.Project {
			c.running = ""
		}
		if p := c.repos[m.Project]; p != nil {
			p.due = now
		}
		for _, p := range c.repos {
			if p.deferred {
				p.deferred, p.due = false, now
			}
		}
	case WatchPaused:
		c.paused = true
	case WatchResumed:
		c.paused = false
	}
	if !c.paused {
		for _, name := range c.names {
			p := c.repos[name]
			if p.due != never && p.due <= now && !p.looking && c.running != name {
				p.looking, p.due = true, never
				p.asked = p.written
				if p.written == never || now >= p.written+c.t.Settle {
					p.written, p.quicks = never, 0
				} else {
					// A quick look leaves the write's look at Settle due.
					p.quicks++
				}
				out = append(out, Look{Project: name})
			}
		}
	}
	next := never
	if !c.paused {
		for _, p := range c.repos {
			next = earliest(next, p.due)
		}
	}
	if next != c.timerAt {
		c.timerAt = next
		out = append(out, SetTimer{At: next})
	}
	return out
}

// looked decides on what a look found.
func (c *Core) looked(m LookResult, out []WatchEffect) []WatchEffect {
	p := c.repos[m.Project]
	if p == nil || !p.looking {
		return out
	}
	now := m.At
	p.looking = false
	announced := p.asked
	p.asked = never
	p.due = now + c.t.Every
	if p.written != never {
		// A write came while the look was out, or the look was a quick
		// one.
		p.due = earliest(p.due, p.written+c.t.Settle)
	}
	if m.Unreadable || !m.Installed || !m.HasMark {
		p.reset()
		return out
	}
	if m.PageWriting && c.t.Quick > 0 && !p.toolSeen && p.quicks < maxQuicks {
		// A page's receipt is a moment from whole: look again then.
		p.due = earliest(p.due, now+c.t.Quick)
	}
	c.judged(p, m, announced)
	if m.Mark >= m.Newest {
		p.reset()
		return out
	}
	p.toolSeen = p.toolSeen || !m.ByPage
	if p.ranFor != 0 && m.Mark >= p.ranFor {
		// The mark passed what the last run was for: a fresh lag.
		p.ranFor, p.failures, p.notBefore = 0, 0, 0
	}
	why := "look"
	if p.byWrite {
		why = "write"
	}
	why, wait := c.otherRun(p, m, why)
	if wait || c.holdsBack(p, now, m.ByPage) {
		return out
	}
	c.running = m.Project
	p.due = never
	p.ranFor, p.judge = m.Newest, true
	p.heldSince, p.launchedSince = never, never
	return append(out, RunHook{Project: m.Project, Mark: m.Mark, Newest: m.Newest, Why: why})
}

// judged notes the newest receipt a look found (known since the write that
// announced it, if one did), and whether the run before moved the mark on:
// a run that did not backs the watch off.
func (c *Core) judged(p *watched, m LookResult, announced time.Duration) {
	now := m.At
	if m.Newest != p.newest {
		p.newest, p.newestAt, p.byWrite = m.Newest, now, false
		if announced != never {
			p.newestAt, p.byWrite = announced, true
		}
	}
	if p.judge {
		p.judge = false
		if m.Mark < p.ranFor {
			p.failures++
			p.notBefore = now + c.t.Every<<min(p.failures, maxBackoff)
		}
	}
}

// otherRun says whether another run of the hook (one holding the mark, or
// one Fossil launched) is waited for, looking again Retry later; once it
// has been waited for too long, why says so (stuck, lost).
func (c *Core) otherRun(p *watched, m LookResult, why string) (string, bool) {
	now := m.At
	if m.Held {
		p.launchedSince = never
		if p.heldSince == never {
			p.heldSince = now
		}
		if now-p.heldSince < c.t.Busy {
			p.due = earliest(p.due, now+c.t.Retry)
			return why, true
		}
		return "stuck", false
	}
	p.heldSince = never
	if m.Fossil < m.Newest {
		p.launchedSince = never
		return why, false
	}
	if p.launchedSince == never || m.Fossil != p.launchedFor {
		// Fossil launched its hooks again: a new run to wait for.
		p.launchedSince, p.launchedFor = now, m.Fossil
	}
	if now-p.launchedSince < c.t.Launch {
		p.due = earliest(p.due, now+c.t.Retry)
		return why, true
	}
	return "lost", false
}

// holdsBack says whether a run the look calls for waits: for the receipt
// to settle (unless every receipt is a web page's, byPage), for the
// back-off, for the watch's pause, or for the run under way for another
// repository; the look is due again then.
func (c *Core) holdsBack(p *watched, now time.Duration, byPage bool) bool {
	switch {
	case now-p.newestAt < c.t.Settle && !byPage:
		p.due = earliest(p.due, p.newestAt+c.t.Settle)
	case now < p.notBefore:
		p.due = earliest(p.due, p.notBefore)
	case c.paused:
		p.due = now
	case c.running != "":
		p.deferred, p.due = true, never
	default:
		return false
	}
	return true
}

// reset forgets a lag: the mark caught up, or there is no hook to run.
func (p *watched) reset() {
	p.heldSince, p.launchedSince, p.toolSeen = never, never, false
	p.ranFor, p.failures, p.notBefore, p.judge = 0, 0, 0, false
}

// earliest is the earlier of two times, never being later than any.
func earliest(a, b time.Duration) time.Duration {
	switch {
	case a == never:
		return b
	case b == never:
		return a
	}
	return min(a, b)
}
