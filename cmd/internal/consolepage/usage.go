package consolepage

import (
	"context"
	"fmt"
	"html/template"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
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

// tallyUsage sums the usage of project's sessions per UTC day over the
// ChartDays days up to now's: each end note's on the day it was seen to
// end (its whole usage: an end note says no more of when its tokens were
// spent), and each running session's so far on today. Ends of another
// project, or outside the days, are passed over.
func tallyUsage(ends []*messages.EndNote, running []messages.SessionStatus, project string, now time.Time) usageChart {
	first, _ := chartWindow(now)
	days := make([]usageDay, ChartDays)
	at := map[string]int{}
	for i := range days {
		days[i].Day = first.AddDate(0, 0, i).Format("2006-01-02")
		at[days[i].Day] = i
	}
	c := usageChart{Days: days}
	rows := map[messages.WorkspaceKey]*usageRow{}
	add := func(k messages.WorkspaceKey, i int, u *messages.SessionUsage, live bool) {
		r := rows[k]
		if r == nil {
			r = &usageRow{Key: k, Days: make([]usageDay, ChartDays)}
			for j := range r.Days {
				r.Days[j].Day = days[j].Day
			}
			rows[k] = r
		}
		r.Running = r.Running || live
		tokens, cost := usageSums(u)
		for _, d := range []*usageDay{&c.Days[i], &r.Days[i]} {
			d.Tokens += tokens
			d.Cost = d.Cost.Plus(cost)
			d.Sessions++
		}
		c.Tokens += tokens
		c.Cost = c.Cost.Plus(cost)
		c.Sessions++
		r.Tokens += tokens
		r.Cost = r.Cost.Plus(cost)
		r.Sessions++
	}
	for _, e := range ends {
		if e.Project != project {
			continue
		}
		if i, ok := at[e.Seen.UTC().Format("2006-01-02")]; ok {
			add(messages.WorkspaceKey{Login: e.Login, Project: e.Project}, i, e.Usage, false)
		}
	}
	for _, s := range running {
		if s.Project == project {
			add(messages.WorkspaceKey{Login: s.Login, Project: s.Project}, ChartDays-1, s.Usage, true)
		}
	}
	for _, r := range rows {
		c.Rows = append(c.Rows, *r)
	}
	sort.Slice(c.Rows, func(i, j int) bool { return c.Rows[i].Key.Login < c.Rows[j].Key.Login })
	return c
}

// usageSums are a usage's tokens (the node's count, read and written)
// and cost (its runner's word); none for a session with no usage read.
func usageSums(u *messages.SessionUsage) (uint64, messages.CostUSD) {
	if u == nil {
		return 0, ""
	}
	var tokens uint64
	if u.Model != nil {
		tokens = u.Model.Total()
	}
	var cost messages.CostUSD
	if u.Runner != nil {
		cost = u.Runner.Cost
	}
	return tokens, cost
}

// usage reads the chart: the ends of the last ChartDays days from the
// record index (record.Index.EndsSeen: those days' ends alone) and the
// running sessions from the status.
func (p *Page) usage(st *messages.NodeState) (*usageChart, error) {
	now := time.Now()
	first, last := chartWindow(now)
	r, err := p.Reads.Repo(p.Project)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	es, err := p.Reads.Index(r).EndsSeen(p.Ctx, first, last)
	if err != nil {
		return nil, err
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
	return &c, nil
}

// chartSize is an SVG chart's drawing: each bar's width and the gap
// after it, the bars' greatest height, and whether the days are named
// under the bars.
type chartSize struct {
	Bar, Gap, Height int
	Labels           bool
}

var (
	bigChart   = chartSize{Bar: 28, Gap: 6, Height: 120, Labels: true}
	smallChart = chartSize{Bar: 6, Gap: 2, Height: 24}
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

// chartSVG draws days as an inline SVG, one bar (a rect, its title the
// day's total) per day, heights proportional to the greatest day's
// tokens; label names the chart. Every text is escaped.
func chartSVG(days []usageDay, label string, size chartSize) template.HTML {
	var max uint64
	for _, d := range days {
		if d.Tokens > max {
			max = d.Tokens
		}
	}
	top, below := 0, 0
	if size.Labels {
		top, below = 14, 16
	}
	w := len(days) * (size.Bar + size.Gap)
	h := top + size.Height + below
	esc := template.HTMLEscapeString
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="ocx-chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, w, h, esc(label))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(label))
	base := top + size.Height
	fmt.Fprintf(&b, `<line x1="0" y1="%d" x2="%d" y2="%d" stroke="#888" stroke-width="1"/>`, base, w, base)
	for i, d := range days {
		x := i * (size.Bar + size.Gap)
		bh := barHeight(d.Tokens, max, size.Height)
		fmt.Fprintf(&b, `<rect class="ocx-bar" x="%d" y="%d" width="%d" height="%d" fill="#4a7ab5" data-ocx-day="%s" data-ocx-tokens="%d"><title>%s</title></rect>`,
			x, base-bh, size.Bar, bh, esc(d.Day), d.Tokens, esc(dayTitle(d)))
		if size.Labels && (i == 0 || i == len(days)-1 || i == len(days)/2) {
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" text-anchor="middle" fill="currentColor">%s</text>`, x+size.Bar/2, h-4, esc(shortDay(d.Day)))
		}
	}
	if size.Labels {
		fmt.Fprintf(&b, `<text x="0" y="10" font-size="10" fill="currentColor">%s tokens</text>`, esc(strconv.FormatUint(max, 10)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
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
	boot, err := unixhost.BootTime()
	if err != nil || len(sessions) == 0 {
		return nil
	}
	r, err := p.Reads.Repo(p.Project)
	if err != nil {
		return nil
	}
	defer r.Close()
	idx := p.Reads.Index(r)
	now := time.Now()
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
