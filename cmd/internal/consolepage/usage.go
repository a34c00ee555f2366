package consolepage

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// Usage drawn (issue 44 item 3, D102): the tokens and cost of this
// project's sessions per UTC day, as an SVG the server draws, and a
// session's budget as a bar against its limit. No script draws them.

// ChartDays is how many days the usage chart draws: today (UTC) and the
// days before it.
const ChartDays = 14

// usageDay is one day of the chart: what the sessions that ended on it
// used (their end notes' usage), and on today what the running ones used
// so far (the status).
type usageDay struct {
	Day string // 2006-01-02, UTC
	// Tokens are the node's count of the sessions' models, read and
	// written (ModelCount.Total): what limits.tokens decides by.
	Tokens uint64
	// Cost sums what the runners reported, their own word; "" when none
	// reported one.
	Cost messages.CostUSD
	// Sessions counts the ends, and on today the running sessions, summed.
	Sessions int
}

// usageRow is one workspace's sessions over the chart's days.
type usageRow struct {
	Key      messages.WorkspaceKey
	Days     []usageDay
	Tokens   uint64
	Cost     messages.CostUSD
	Sessions int
	Running  bool
}

// usageChart is the chart of this project's usage, and each workspace's.
type usageChart struct {
	Days     []usageDay
	Tokens   uint64
	Cost     messages.CostUSD
	Sessions int
	Rows     []usageRow
}

// chartWindow is the first and last day the chart draws when it is now.
func chartWindow(now time.Time) (first, last time.Time) {
	last = now.UTC()
	return last.AddDate(0, 0, -(ChartDays - 1)), last
}

// unixDay is the UTC day t falls on, counted from 1970-01-01.
func unixDay(t time.Time) int64 {
	s := t.Unix()
	d := s / 86400
	if s%86400 < 0 {
		d--
	}
	return d
}

// cell sums one workspace's sessions on one day as tallyUsage adds them:
// the cost in millionths of a dollar, made a CostUSD once at the end.
type cell struct {
	tokens, micros uint64
	costed         bool
	sessions       int
}

func (c *cell) add(d cell) {
	c.tokens = strictjson.AddCapped(c.tokens, d.tokens)
	c.micros = addMicros(c.micros, d.micros)
	c.costed = c.costed || d.costed
	c.sessions += d.sessions
}

func (c cell) cost() messages.CostUSD {
	if !c.costed {
		return ""
	}
	return messages.CostOfMicros(c.micros)
}

// addMicros is a+b, capped where a uint64 ends.
func addMicros(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// tallyUsage sums the usage of project's sessions per UTC day over the
// ChartDays days up to now's: each end note's on the day it was seen to
// end (its whole usage: an end note says no more of when its tokens were
// spent), and each running session's so far on today. Ends of another
// project, or outside the days, are passed over.
func tallyUsage(ends []*messages.EndNote, running []messages.SessionStatus, project string, now time.Time) usageChart {
	first, _ := chartWindow(now)
	names := make([]string, ChartDays)
	for i := range names {
		names[i] = first.AddDate(0, 0, i).Format("2006-01-02")
	}
	firstDay := unixDay(first)
	cells := map[messages.WorkspaceKey]*[ChartDays]cell{}
	live := map[messages.WorkspaceKey]bool{}
	add := func(k messages.WorkspaceKey, i int, u *messages.SessionUsage) {
		row := cells[k]
		if row == nil {
			row = &[ChartDays]cell{}
			cells[k] = row
		}
		row[i].add(usageCell(u))
	}
	for _, e := range ends {
		if e.Project != project {
			continue
		}
		if i := unixDay(e.Seen) - firstDay; i >= 0 && i < ChartDays {
			add(messages.WorkspaceKey{Login: e.Login, Project: e.Project}, int(i), e.Usage)
		}
	}
	for _, s := range running {
		if s.Project == project {
			k := messages.WorkspaceKey{Login: s.Login, Project: s.Project}
			add(k, ChartDays-1, s.Usage)
			live[k] = true
		}
	}
	var days [ChartDays]cell
	var total cell
	c := usageChart{Days: make([]usageDay, ChartDays)}
	for k, row := range cells {
		r := usageRow{Key: k, Days: make([]usageDay, ChartDays), Running: live[k]}
		var sum cell
		for i, x := range row {
			r.Days[i] = usageDay{Day: names[i], Tokens: x.tokens, Cost: x.cost(), Sessions: x.sessions}
			days[i].add(x)
			sum.add(x)
		}
		r.Tokens, r.Cost, r.Sessions = sum.tokens, sum.cost(), sum.sessions
		total.add(sum)
		c.Rows = append(c.Rows, r)
	}
	for i, x := range days {
		c.Days[i] = usageDay{Day: names[i], Tokens: x.tokens, Cost: x.cost(), Sessions: x.sessions}
	}
	c.Tokens, c.Cost, c.Sessions = total.tokens, total.cost(), total.sessions
	sort.Slice(c.Rows, func(i, j int) bool { return c.Rows[i].Key.Login < c.Rows[j].Key.Login })
	return c
}

// usageCell is one session's usage: its tokens (the node's count, read
// and written) and cost (its runner's word); none for a session with no
// usage read.
func usageCell(u *messages.SessionUsage) cell {
	c := cell{sessions: 1}
	if u == nil {
		return c
	}
	if u.Model != nil {
		c.tokens = u.Model.Total()
	}
	if u.Runner != nil {
		c.micros, c.costed = u.Runner.Cost.Micros()
	}
	return c
}

// usage reads the chart: the ends of the last ChartDays days from the
// record index (record.Index.EndsSeen: those days' ends alone) and the
// running sessions from the status; with walls, the running sessions'
// wall bars too (wallBudget), from the same index: a page opens the
// index once (in ocx console, where no index is kept, each open reads
// the record).
func (p *Page) usage(st *messages.NodeState, walls bool) (*usageChart, map[string]template.HTML, error) {
	now := time.Now()
	first, last := chartWindow(now)
	r, err := p.Reads.Repo(p.Project)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	idx := p.Reads.Index(r)
	es, err := idx.EndsSeen(p.Ctx, first, last)
	if err != nil {
		return nil, nil, err
	}
	ends := make([]*messages.EndNote, 0, len(es))
	for _, e := range es {
		ends = append(ends, e.Note.(*messages.EndNote))
	}
	var running []messages.SessionStatus
	if st != nil {
		running = st.Sessions
	}
	c := tallyUsage(ends, running, p.Project, now)
	var bars map[string]template.HTML
	if walls {
		bars = p.wallsOf(idx, running, now)
	}
	return &c, bars, nil
}

// chartSize is the chart's drawing: each bar's width and the gap after
// it, the bars' greatest height, the room above for the greatest day's
// figure and below for the days' names.
const (
	chartBar, chartGap, chartHeight = 28, 6, 120
	chartTop, chartBelow            = 14, 16
)

// barHeight is tokens' bar when max is the greatest day's: proportional,
// rounded, and at least a pixel for a day that used any.
func barHeight(tokens, max uint64, height int) int {
	if tokens == 0 || max == 0 {
		return 0
	}
	h := int(float64(tokens)/float64(max)*float64(height) + 0.5)
	if h < 1 {
		h = 1
	}
	return h
}

// dayTitle says a day's usage in words, as its bar's title.
func dayTitle(d usageDay) string {
	s := d.Day + ": " + strconv.FormatUint(d.Tokens, 10) + " tokens"
	if d.Cost != "" {
		s += ", $" + string(d.Cost)
	}
	return s + ", " + plural(d.Sessions, "session")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// svgBuf builds an SVG: numbers appended as they are, text escaped.
type svgBuf struct{ b []byte }

func (s *svgBuf) raw(t string) *svgBuf { s.b = append(s.b, t...); return s }
func (s *svgBuf) num(n int) *svgBuf    { s.b = strconv.AppendInt(s.b, int64(n), 10); return s }
func (s *svgBuf) unum(n uint64) *svgBuf {
	s.b = strconv.AppendUint(s.b, n, 10)
	return s
}
func (s *svgBuf) text(t string) *svgBuf { return s.raw(template.HTMLEscapeString(t)) }

// chartSVG draws days as an inline SVG, one bar (a rect, its title the
// day's total, its data the day and the tokens) per day, heights
// proportional to the greatest day's tokens; label names the chart.
// Every text is escaped.
func chartSVG(days []usageDay, label string) template.HTML {
	var max uint64
	for _, d := range days {
		if d.Tokens > max {
			max = d.Tokens
		}
	}
	w := len(days) * (chartBar + chartGap)
	h := chartTop + chartHeight + chartBelow
	base := chartTop + chartHeight
	s := &svgBuf{b: make([]byte, 0, 256+len(days)*200)}
	s.raw(`<svg xmlns="http://www.w3.org/2000/svg" class="ocx-chart" width="`).num(w).raw(`" height="`).num(h).
		raw(`" viewBox="0 0 `).num(w).raw(" ").num(h).raw(`" role="img" aria-label="`).text(label).raw(`"><title>`).text(label).raw(`</title>`)
	s.raw(`<line x1="0" y1="`).num(base).raw(`" x2="`).num(w).raw(`" y2="`).num(base).raw(`" stroke="#888" stroke-width="1"/>`)
	for i, d := range days {
		x := i * (chartBar + chartGap)
		bh := barHeight(d.Tokens, max, chartHeight)
		s.raw(`<rect class="ocx-bar" x="`).num(x).raw(`" y="`).num(base - bh).raw(`" width="`).num(chartBar).raw(`" height="`).num(bh).
			raw(`" fill="#4a7ab5" data-ocx-day="`).text(d.Day).raw(`" data-ocx-tokens="`).unum(d.Tokens).raw(`"><title>`).text(dayTitle(d)).raw(`</title></rect>`)
		if i == 0 || i == len(days)-1 || i == len(days)/2 {
			s.raw(`<text x="`).num(x + chartBar/2).raw(`" y="`).num(h - 4).raw(`" font-size="10" text-anchor="middle" fill="currentColor">`).text(shortDay(d.Day)).raw(`</text>`)
		}
	}
	s.raw(`<text x="0" y="10" font-size="10" fill="currentColor">`).unum(max).raw(` tokens</text></svg>`)
	return template.HTML(s.b)
}

// The small chart of a workspace's row: each day's bar this wide, with
// this gap, at most this high.
const rowBar, rowGap, rowHeight = 6, 2, 24

// rowSVG draws a workspace's days small: its bars one path, its title
// the days it used any with their tokens. A few hundred bytes a row,
// whatever its days hold.
func rowSVG(r usageRow) template.HTML {
	var max uint64
	for _, d := range r.Days {
		if d.Tokens > max {
			max = d.Tokens
		}
	}
	w := len(r.Days) * (rowBar + rowGap)
	s := &svgBuf{b: make([]byte, 0, 512)}
	s.raw(`<svg xmlns="http://www.w3.org/2000/svg" class="ocx-row-chart" width="`).num(w).raw(`" height="`).num(rowHeight).
		raw(`" viewBox="0 0 `).num(w).raw(" ").num(rowHeight).raw(`" role="img"><title>`).text("tokens of " + r.Key.Login + " by day:")
	for _, d := range r.Days {
		if d.Tokens > 0 {
			s.raw(" ").text(d.Day).raw(" ").unum(d.Tokens).raw(";")
		}
	}
	s.raw(`</title><line x1="0" y1="`).num(rowHeight).raw(`" x2="`).num(w).raw(`" y2="`).num(rowHeight).raw(`" stroke="#888" stroke-width="1"/><path fill="#4a7ab5" d="`)
	for i, d := range r.Days {
		if bh := barHeight(d.Tokens, max, rowHeight); bh > 0 {
			s.raw("M").num(i * (rowBar + rowGap)).raw(" ").num(rowHeight).raw("v-").num(bh).raw("h").num(rowBar).raw("v").num(bh).raw("z")
		}
	}
	s.raw(`"/></svg>`)
	return template.HTML(s.b)
}

// shortDay is a day as its label under a bar: "12-08".
func shortDay(day string) string {
	if len(day) == len("2006-01-02") {
		return day[5:]
	}
	return day
}

// budgetWidth is how wide a budget's bar is drawn.
const budgetWidth = 160

// budgetSVG draws used against limit as a bar: the limit the whole
// width, what is used over it (past the limit, the whole width, in red);
// its title says both in words. Empty when limit is 0 (no limit).
func budgetSVG(used, limit uint64, unit, label string) template.HTML {
	if limit == 0 {
		return ""
	}
	fill := used
	if fill > limit {
		fill = limit
	}
	wu := int(float64(fill)/float64(limit)*budgetWidth + 0.5)
	color := "#4a7ab5"
	if used*10 >= limit*9 {
		color = "#c33"
	}
	pct := float64(used) / float64(limit) * 100
	title := fmt.Sprintf("%s: %d of %d %s (%.0f%%)", label, used, limit, unit, pct)
	esc := template.HTMLEscapeString
	return template.HTML(fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" class="ocx-budget" width="%d" height="12" viewBox="0 0 %d 12" role="img" aria-label="%s" data-ocx-used="%d" data-ocx-limit="%d"><title>%s</title>`+
		`<rect x="0" y="0" width="%d" height="12" fill="#ddd"/><rect class="ocx-used" x="0" y="0" width="%d" height="12" fill="%s"/></svg>`,
		budgetWidth, budgetWidth, esc(title), used, limit, esc(title), budgetWidth, wu, color))
}

// tokensBudget draws a session's tokens against its limits.tokens (the
// node's count against the limit its proxy held); empty without one.
func tokensBudget(u *messages.SessionUsage) template.HTML {
	if u == nil || u.Limit == 0 {
		return ""
	}
	var used uint64
	if u.Model != nil {
		used = u.Model.Total()
	}
	return budgetSVG(used, u.Limit, "tokens", "tokens against limits.tokens")
}

// wallBudget draws a running session's wall time, from its process's
// start to now, against its definition's limits.wall: the definition its
// launch note names, read from the record index (in memory in the
// daemon). Empty when it has no such limit, serves no launch (a session
// at a terminal) or its start is unknown.
func wallBudget(idx wallReads, ctx context.Context, s messages.SessionStatus, boot, now time.Time) template.HTML {
	if s.Launch == "" || boot.IsZero() || s.StartTime == 0 {
		return ""
	}
	e, ok, err := idx.Launch(ctx, messages.WorkspaceKey{Login: s.Login, Project: s.Project}, s.Launch)
	if err != nil || !ok {
		return ""
	}
	ln, ok := e.Note.(*messages.LaunchNote)
	if !ok {
		return ""
	}
	d, ok := idx.Definition(ln.Session)
	if !ok {
		return ""
	}
	def, ok := d.Note.(*messages.SessionDefinition)
	if !ok || def.Wall() == "" {
		return ""
	}
	limit, err := messages.ParseWall("limits.wall", def.Wall())
	if err != nil {
		return ""
	}
	started := boot.Add(time.Duration(s.StartTime) * (time.Second / clockTicks))
	used := now.Sub(started)
	if used < 0 {
		used = 0
	}
	bar := budgetSVG(uint64(used/time.Second), uint64(limit/time.Second), "seconds", "wall time against limits.wall ("+def.Wall()+")")
	return template.HTML(template.HTMLEscapeString(used.Truncate(time.Second).String()+" of "+def.Wall())+" ") + bar
}

// clockTicks is the kernel's USER_HZ, the unit of a process's start
// time (host/procs).
const clockTicks = 100

// wallReads are what wallBudget reads of the record index.
type wallReads interface {
	Launch(ctx context.Context, key messages.WorkspaceKey, hash string) (record.Entry, bool, error)
	Definition(hash string) (record.Entry, bool)
}

// wallBudgets are the running sessions' wall bars, by login; nil when
// the record or the boot time does not read (the bars are then not
// drawn).
func (p *Page) wallBudgets(sessions []messages.SessionStatus) map[string]template.HTML {
	if len(sessions) == 0 {
		return nil
	}
	r, err := p.Reads.Repo(p.Project)
	if err != nil {
		return nil
	}
	defer r.Close()
	return p.wallsOf(p.Reads.Index(r), sessions, time.Now())
}

// wallsOf are the wall bars of this project's sessions among sessions,
// read from idx, by login.
func (p *Page) wallsOf(idx wallReads, sessions []messages.SessionStatus, now time.Time) map[string]template.HTML {
	boot, err := unixhost.BootTime()
	if err != nil {
		return nil
	}
	out := map[string]template.HTML{}
	for _, s := range sessions {
		if s.Project == p.Project {
			if b := wallBudget(idx, p.Ctx, s, boot, now); b != "" {
				out[s.Login] = b
			}
		}
	}
	return out
}
