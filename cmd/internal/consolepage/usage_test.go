package consolepage

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

// svgRect is a bar as the SVG holds it.
type svgRect struct {
	Class, Day, Title string
	Y, Height, Tokens int
}

// svgRects parses an SVG strictly as XML and returns its rects: a chart
// that does not parse fails the test.
func svgRects(t *testing.T, svg string) (rects []svgRect, title string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	var cur *svgRect
	var inTitle bool
	var depth int
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG does not parse: %v\n%s", err, svg)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			depth++
			switch e.Name.Local {
			case "rect":
				r := svgRect{}
				for _, a := range e.Attr {
					n, _ := strconv.Atoi(a.Value)
					switch a.Name.Local {
					case "class":
						r.Class = a.Value
					case "data-ocx-day":
						r.Day = a.Value
					case "y":
						r.Y = n
					case "height":
						r.Height = n
					case "data-ocx-tokens":
						r.Tokens = n
					}
				}
				rects = append(rects, r)
				cur = &rects[len(rects)-1]
			case "title":
				inTitle = true
			}
		case xml.EndElement:
			depth--
			switch e.Name.Local {
			case "rect":
				cur = nil
			case "title":
				inTitle = false
			}
		case xml.CharData:
			if inTitle {
				if cur != nil {
					cur.Title += string(e)
				} else if depth == 2 {
					title += string(e)
				}
			}
		}
	}
	return rects, title
}

// TestChartSVG: one rect per day, its height proportional to the day's
// tokens against the greatest day's (at least a pixel for a day that
// used any, none for a day that used none), its title the day's total
// and cost, its data the day and the tokens; every text escaped.
func TestChartSVG(t *testing.T) {
	days := []usageDay{
		{Day: "2026-12-01", Tokens: 400, Cost: "1.5", Sessions: 2},
		{Day: "2026-12-02"},
		{Day: "2026-12-03", Tokens: 100, Sessions: 1},
		{Day: "2026-12-04", Tokens: 200, Sessions: 1},
		{Day: "2026-12-05", Tokens: 1, Sessions: 1},
	}
	svg := string(chartSVG(days, evil))
	if strings.Contains(svg, evil) || strings.Contains(svg, "<script") {
		t.Errorf("the label is not escaped:\n%s", svg)
	}
	rects, title := svgRects(t, svg)
	if title != evil {
		t.Errorf("the chart's title %q, want the label", title)
	}
	var bars []svgRect
	for _, r := range rects {
		if r.Class == "ocx-bar" {
			bars = append(bars, r)
		}
	}
	if len(bars) != len(days) {
		t.Fatalf("%d bars, want one per day (%d)", len(bars), len(days))
	}
	wantH := []int{120, 0, 30, 60, 1} // 1/400 of 120 rounds to none: a day that used any shows a pixel
	for i, b := range bars {
		if b.Day != days[i].Day || b.Tokens != int(days[i].Tokens) {
			t.Errorf("bar %d: day %s tokens %d, want %s %d", i, b.Day, b.Tokens, days[i].Day, days[i].Tokens)
		}
		if b.Height != wantH[i] || b.Y+b.Height != chartTop+chartHeight {
			t.Errorf("bar %d: height %d from %d, want %d standing on the base line", i, b.Height, b.Y, wantH[i])
		}
		if !strings.HasPrefix(b.Title, days[i].Day+": "+strconv.FormatUint(days[i].Tokens, 10)+" tokens") {
			t.Errorf("bar %d's title %q does not say the day's total", i, b.Title)
		}
	}
	if bars[0].Title != "2026-12-01: 400 tokens, $1.5, 2 sessions" {
		t.Errorf("a day with a cost: %q", bars[0].Title)
	}
	// No day used any: every bar is flat, none divides by zero.
	rects, _ = svgRects(t, string(chartSVG([]usageDay{{Day: "2026-12-01"}, {Day: "2026-12-02"}}, "none")))
	for _, r := range rects {
		if r.Height != 0 {
			t.Errorf("a day with no tokens has a bar of %d", r.Height)
		}
	}
}

// TestRowSVG: a workspace's row draws each day that used any as one
// subpath of its path, proportional to its greatest day's, and names
// those days and their tokens in its title; its login is escaped.
func TestRowSVG(t *testing.T) {
	r := usageRow{Key: messages.WorkspaceKey{Login: evil, Project: "demo"}, Days: []usageDay{
		{Day: "2026-12-01", Tokens: 50}, {Day: "2026-12-02"}, {Day: "2026-12-03", Tokens: 200}}}
	svg := string(rowSVG(r))
	if strings.Contains(svg, evil) {
		t.Errorf("the login is not escaped: %s", svg)
	}
	svgRects(t, svg)
	if !strings.Contains(svg, "by day: 2026-12-01 50; 2026-12-03 200;</title>") {
		t.Errorf("the title does not name the days and their tokens: %s", svg)
	}
	if !strings.Contains(svg, `d="M0 24v-6h6v6zM16 24v-24h6v24z"`) {
		t.Errorf("the bars: %s", svg)
	}
}

// TestBudgetSVG: the used part of the bar is proportional to the limit,
// full (and red) past it; no limit, no bar; the title says both counts.
func TestBudgetSVG(t *testing.T) {
	for _, c := range []struct {
		used, limit uint64
		width       int
	}{{0, 100, 0}, {25, 100, budgetWidth / 4}, {100, 100, budgetWidth}, {300, 100, budgetWidth}} {
		svg := string(budgetSVG(c.used, c.limit, "tokens", evil))
		if strings.Contains(svg, evil) {
			t.Errorf("the label is not escaped: %s", svg)
		}
		if !strings.Contains(svg, `class="ocx-used" x="0" y="0" width="`+strconv.Itoa(c.width)+`"`) {
			t.Errorf("%d of %d: the used bar is not %d wide: %s", c.used, c.limit, c.width, svg)
		}
		if want := strconv.FormatUint(c.used, 10) + " of " + strconv.FormatUint(c.limit, 10) + " tokens"; !strings.Contains(svg, want) {
			t.Errorf("%d of %d: the title lacks %q: %s", c.used, c.limit, want, svg)
		}
		svgRects(t, svg)
	}
	if budgetSVG(5, 0, "tokens", "x") != "" {
		t.Error("a bar drawn with no limit")
	}
	u := &messages.SessionUsage{Model: &messages.ModelCount{Tokens: modelapi.Tokens{Input: 30, Output: 20}}, Limit: 200}
	if svg := string(tokensBudget(u)); !strings.Contains(svg, "50 of 200 tokens") {
		t.Errorf("a session's tokens against its limit: %s", svg)
	}
	if tokensBudget(&messages.SessionUsage{Model: u.Model}) != "" || tokensBudget(nil) != "" {
		t.Error("a budget bar for a session with no limit")
	}
}

// TestTallyUsage: each end note of the project on the day it was seen
// to end, the running sessions on today, another project's ends and
// those before the days passed over; per workspace too.
func TestTallyUsage(t *testing.T) {
	now := time.Date(2026, 12, 8, 0, 30, 0, 0, time.UTC)
	usage := func(in, out uint64, cost messages.CostUSD) *messages.SessionUsage {
		u := &messages.SessionUsage{Model: &messages.ModelCount{Tokens: modelapi.Tokens{Input: in, Output: out}}}
		if cost != "" {
			u.Runner = &messages.RunnerReport{Cost: cost}
		}
		return u
	}
	end := func(login, project string, seen time.Time, u *messages.SessionUsage) *messages.EndNote {
		return &messages.EndNote{Login: login, Project: project, Seen: seen, Usage: u}
	}
	ends := []*messages.EndNote{
		end("a", "demo", now.Add(-time.Hour), usage(100, 10, "0.5")),                        // yesterday, UTC
		end("b", "demo", now.Add(-2*time.Hour), usage(200, 20, "")),                         // yesterday
		end("a", "demo", now.AddDate(0, 0, -13), usage(7, 0, "")),                           // the first day drawn
		end("a", "demo", now.AddDate(0, 0, -14), usage(1000, 0, "")),                        // before it
		end("a", "other", now.Add(-time.Hour), usage(5000, 0, "")),                          // another project
		end("c", "demo", now.In(time.FixedZone("west", -10*3600)), nil),                     // a mechanical session: no usage, on today
		end("b", "demo", time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC), usage(1, 2, "0.25")), // today
	}
	running := []messages.SessionStatus{
		{Login: "d", Project: "demo", Usage: usage(40, 2, "0.001")},
		{Login: "e", Project: "other", Usage: usage(9, 9, "")},
	}
	c := tallyUsage(ends, running, "demo", now)
	if len(c.Days) != ChartDays || c.Days[0].Day != "2026-11-25" || c.Days[ChartDays-1].Day != "2026-12-08" {
		t.Fatalf("the days drawn: %d, %s to %s", len(c.Days), c.Days[0].Day, c.Days[len(c.Days)-1].Day)
	}
	want := map[string]usageDay{
		"2026-11-25": {Tokens: 7, Sessions: 1},
		"2026-12-07": {Tokens: 330, Cost: "0.5", Sessions: 2},
		"2026-12-08": {Tokens: 3 + 42, Cost: "0.251", Sessions: 3},
	}
	for _, d := range c.Days {
		w := want[d.Day]
		w.Day = d.Day
		if d != w {
			t.Errorf("day %s: %+v, want %+v", d.Day, d, w)
		}
	}
	if c.Tokens != 7+330+45 || c.Sessions != 6 || c.Cost != "0.751" {
		t.Errorf("the total: %d tokens, %s, %d sessions", c.Tokens, c.Cost, c.Sessions)
	}
	var logins []string
	for _, r := range c.Rows {
		logins = append(logins, r.Key.Login+":"+strconv.FormatUint(r.Tokens, 10)+":"+strconv.FormatBool(r.Running))
	}
	if got := strings.Join(logins, " "); got != "a:117:false b:223:false c:0:false d:42:true" {
		t.Errorf("the rows: %s", got)
	}
	for _, r := range c.Rows {
		if len(r.Days) != ChartDays {
			t.Errorf("%s: %d days", r.Key, len(r.Days))
		}
	}
}

// TestUsageOnThePages: the index and the Sessions page draw the chart,
// the Sessions page each workspace's row and a running session's budget.
func TestUsageOnThePages(t *testing.T) {
	now := time.Now()
	u := &messages.SessionUsage{Model: &messages.ModelCount{Tokens: modelapi.Tokens{Input: 60, Output: 20}}, Limit: 100}
	sess := messages.SessionStatus{Login: "agent-1", Project: "demo", Record: strings.Repeat("a", 64), Listening: true, Usage: u}
	c := tallyUsage([]*messages.EndNote{{Login: "agent-2", Project: "demo", Seen: now, Usage: u}}, []messages.SessionStatus{sess}, "demo", now)
	for name, d := range map[string]any{"index": indexData{Usage: &c}, "sessions": sessionsData{Sessions: []messages.SessionStatus{sess}, Usage: &c}} {
		var b bytes.Buffer
		if err := Pages().ExecuteTemplate(&b, name, View{Script: "/ext/console", Data: d}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if n := strings.Count(out, `class="ocx-bar"`); n != ChartDays {
			t.Errorf("%s: %d bars", name, n)
		}
		if n := strings.Count(out, `class="ocx-row-chart"`); name == "sessions" && n != 2 {
			t.Errorf("sessions: %d rows' charts, want 2", n)
		}
		if !strings.Contains(out, `<p id="ocx-usage-total">160 tokens, 2 sessions.</p>`) {
			t.Errorf("%s: no total:\n%s", name, out)
		}
		if name == "sessions" && (!strings.Contains(out, "80 tokens of 100") || !strings.Contains(out, `data-ocx-used="80" data-ocx-limit="100"`)) {
			t.Errorf("sessions: the running session's budget is not drawn:\n%s", out)
		}
	}
}

// fakeWallReads are a record index holding one launch and its session
// definition.
type fakeWallReads struct {
	launch, def record.Entry
}

func (f fakeWallReads) Launch(_ context.Context, _ messages.WorkspaceKey, hash string) (record.Entry, bool, error) {
	return f.launch, hash == f.launch.Hash, nil
}

func (f fakeWallReads) Definition(hash string) (record.Entry, bool) { return f.def, hash == f.def.Hash }

// TestWallBudget: a running session's wall, from its process's start
// (boot plus its start ticks) to now, against the limits.wall of the
// definition its launch names; none without a launch, a limit or a
// start.
func TestWallBudget(t *testing.T) {
	launch, defHash := strings.Repeat("1", 64), strings.Repeat("2", 64)
	def := &messages.SessionDefinition{Limits: &messages.SessionLimits{Wall: "1h"}}
	f := fakeWallReads{launch: record.Entry{Hash: launch, Note: &messages.LaunchNote{Session: defHash}}, def: record.Entry{Hash: defHash, Note: def}}
	boot := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	s := messages.SessionStatus{Login: "a", Project: "demo", Launch: launch, StartTime: 100 * 60} // a minute after boot
	now := boot.Add(16 * time.Minute)
	if got := string(wallBudget(f, context.Background(), s, boot, now)); !strings.Contains(got, "900 of 3600 seconds (25%)") || !strings.Contains(got, `width="40" height="12"`) {
		t.Errorf("a quarter of its wall: %s", got)
	}
	for name, c := range map[string]struct {
		s    messages.SessionStatus
		boot time.Time
		f    fakeWallReads
	}{
		"at a terminal":   {messages.SessionStatus{Login: "a", Project: "demo", StartTime: 6000}, boot, f},
		"boot unknown":    {s, time.Time{}, f},
		"another launch":  {messages.SessionStatus{Login: "a", Project: "demo", Launch: defHash, StartTime: 6000}, boot, f},
		"no wall limit":   {s, boot, fakeWallReads{launch: f.launch, def: record.Entry{Hash: defHash, Note: &messages.SessionDefinition{Limits: &messages.SessionLimits{Tokens: 5}}}}},
		"definition gone": {s, boot, fakeWallReads{launch: f.launch}},
	} {
		if got := wallBudget(c.f, context.Background(), c.s, c.boot, now); got != "" {
			t.Errorf("%s: a bar drawn: %s", name, got)
		}
	}
}

// BenchmarkSessionsPage renders the Sessions page of 10 running sessions
// with and without the usage chart: the chart's tally of 1,000 end notes
// over its 14 days and the SVGs of the chart and of each workspace's row
// (40 workspaces) against the page alone. The ends' read is the record
// index's (EndsSeen), not timed here.
func BenchmarkSessionsPage(b *testing.B) {
	now := time.Now()
	var running []messages.SessionStatus
	for i := range 10 {
		running = append(running, messages.SessionStatus{Login: "agent-" + strconv.Itoa(i), Project: "demo", Record: strings.Repeat("a", 64), Listening: true,
			Usage: &messages.SessionUsage{Model: &messages.ModelCount{Tokens: modelapi.Tokens{Input: 900, Output: 100}}, Limit: 5000}})
	}
	var ends []*messages.EndNote
	for i := range 1000 {
		ends = append(ends, &messages.EndNote{Login: "agent-" + strconv.Itoa(i%40), Project: "demo", Seen: now.Add(-time.Duration(i) * 20 * time.Minute),
			Usage: &messages.SessionUsage{Model: &messages.ModelCount{Tokens: modelapi.Tokens{Input: uint64(i), Output: 10}}, Runner: &messages.RunnerReport{Cost: "0.01"}}})
	}
	for _, with := range []bool{false, true} {
		name := "without-chart"
		if with {
			name = "with-chart"
		}
		b.Run(name, func(b *testing.B) {
			var size int
			for b.Loop() {
				d := sessionsData{Sessions: running}
				if with {
					c := tallyUsage(ends, running, "demo", now)
					d.Usage = &c
				}
				var buf bytes.Buffer
				if err := Pages().ExecuteTemplate(&buf, "sessions", View{Script: "/ext/console", Data: d}); err != nil {
					b.Fatal(err)
				}
				size = buf.Len()
			}
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
}
