package itest

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

var updateDocs = flag.Bool("update-docs", false, "copy the screenshots docs/console.md shows into docs/")

// chartBar is a bar of the usage chart as the browser's DOM holds it.
type chartBar struct {
	Day    string `json:"day"`
	Tokens string `json:"tokens"`
	Height string `json:"height"`
	Title  string `json:"title"`
}

// chartBars reads the bars of the chart under sel from the page's DOM.
func chartBars(b *harness.Browser, sel string) []chartBar {
	var bars []chartBar
	b.Eval(`Array.from(document.querySelectorAll(`+jsString(sel+` svg rect.ocx-bar`)+`)).map(function (r) {
		var t = r.querySelector('title');
		return {day: r.getAttribute('data-ocx-day'), tokens: r.getAttribute('data-ocx-tokens'), height: r.getAttribute('height'), title: t ? t.textContent : ''};
	})`, &bars)
	return bars
}

// TestConsoleUsageInTheBrowser is issue 44 item 3 (D102) in Chromium:
// two llm sessions whose stand-in model says their usage (120 and 230
// tokens, the node's count at its proxy) run; while the first runs the
// Sessions page draws its tokens against its limits.tokens and its wall
// against its limits.wall; both end, and the Sessions page's SVG, and the
// index's, hold one bar per day, each day's the tokens of the end notes
// seen that day summed, in its title too.
func TestConsoleUsageInTheBrowser(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	n := consoleNodeOn(t, llmRoot)
	n.must("", "hook", "install")
	model := chatModelOn(n)
	console := n.srv.URL + "ext/console/"
	b := harness.StartBrowser(t)
	browserLogin(t, b, n, n.srv.AdminLogin)

	first := usageSessionOn(n, model, "native-c1", `{"wall": "1h", "tokens": 1000}`)
	first.ask("count me", chatUsage(chatText("counted"), 100, 20))
	first.usageAfter(1, 1)
	b.Navigate(console+"sessions", "#ocx-sessions")
	row := `[data-ocx-session="native-c1/demo"] [data-ocx-field="budget"]`
	var used, limit, walls string
	b.Eval(`document.querySelector(`+jsString(row+` svg.ocx-budget`)+`).getAttribute('data-ocx-used')`, &used)
	b.Eval(`document.querySelector(`+jsString(row+` svg.ocx-budget`)+`).getAttribute('data-ocx-limit')`, &limit)
	if used != "120" || limit != "1000" {
		t.Errorf("the running session's tokens bar: %s of %s, want 120 of 1000", used, limit)
	}
	b.Eval(`document.querySelector(`+jsString(row+` [data-ocx-field="wall"] svg`)+`).getAttribute('data-ocx-limit')`, &walls)
	if walls != "3600" {
		t.Errorf("the running session's wall bar's limit: %q, want 3600 seconds", walls)
	}
	docShot(t, b, "console-budget")
	n.must(n.srv.AdminLogin, "tool", "stop", "--record", first.record)
	endA := first.end()

	second := usageSessionOn(n, model, "native-c2", `{"wall": "1h"}`)
	second.ask("count me too", chatUsage(chatText("counted too"), 200, 30))
	second.usageAfter(1, 1)
	n.must(n.srv.AdminLogin, "tool", "stop", "--record", second.record)
	endB := second.end()

	// What each day's bar must say: the end notes' usage on the day each
	// was seen to end (two days when the test runs across midnight, UTC).
	want := map[string]uint64{}
	for _, e := range []struct {
		day    string
		tokens uint64
	}{{endA.Seen.UTC().Format("2006-01-02"), endA.Usage.Model.Total()}, {endB.Seen.UTC().Format("2006-01-02"), endB.Usage.Model.Total()}} {
		want[e.day] += e.tokens
	}
	if endA.Usage.Model.Total() != 120 || endB.Usage.Model.Total() != 230 {
		t.Fatalf("the end notes' counts: %d and %d, want 120 and 230", endA.Usage.Model.Total(), endB.Usage.Model.Total())
	}
	var most uint64
	for _, v := range want {
		most = max(most, v)
	}
	for _, page := range []string{"sessions", ""} {
		b.Navigate(console+page, "#ocx-usage-chart")
		bars := chartBars(b, "#ocx-usage-chart")
		if len(bars) != 14 {
			t.Fatalf("%s: %d bars, want one a day for 14 days", page, len(bars))
		}
		seen := map[string]bool{}
		for _, bar := range bars {
			if seen[bar.Day] {
				t.Errorf("%s: day %s drawn twice", page, bar.Day)
			}
			seen[bar.Day] = true
			w := want[bar.Day]
			if bar.Tokens != strconv.FormatUint(w, 10) || !strings.HasPrefix(bar.Title, bar.Day+": "+strconv.FormatUint(w, 10)+" tokens") {
				t.Errorf("%s: day %s's bar: %s tokens, title %q; want %d", page, bar.Day, bar.Tokens, bar.Title, w)
			}
			h, _ := strconv.Atoi(bar.Height)
			if wantH := int(float64(w)/float64(most)*120 + 0.5); h != wantH {
				t.Errorf("%s: day %s's bar is %d high, want %d", page, bar.Day, h, wantH)
			}
		}
		for day := range want {
			if !seen[day] {
				t.Errorf("%s: the day %s the sessions ended is not drawn", page, day)
			}
		}
		if total := b.Text("#ocx-usage-total"); !strings.HasPrefix(total, "350 tokens") {
			t.Errorf("%s: the total says %q", page, total)
		}
	}
	b.Navigate(console+"sessions", "#ocx-usage-sessions")
	for login, end := range map[string]*messages.EndNote{"native-c1": endA, "native-c2": endB} {
		tokens := strconv.FormatUint(end.Usage.Model.Total(), 10)
		if got := b.Text(`[data-ocx-usage="` + login + `/demo"] [data-ocx-field="tokens"]`); got != tokens {
			t.Errorf("%s's row: %s tokens, want %s", login, got, tokens)
		}
		var title string
		b.Eval(`document.querySelector(`+jsString(`[data-ocx-usage="`+login+`/demo"] svg.ocx-row-chart title`)+`).textContent`, &title)
		if want := "by day: " + end.Seen.UTC().Format("2006-01-02") + " " + tokens + ";"; !strings.HasSuffix(title, want) {
			t.Errorf("%s's row chart's title %q, want it to end %q", login, title, want)
		}
	}
	docShot(t, b, "console-usage")
	b.NoErrors()
}

// docShot takes a screenshot of the page as name, and with -update-docs
// copies it to docs/NAME.png, which docs/console.md shows.
func docShot(t *testing.T, b *harness.Browser, name string) {
	t.Helper()
	shot := b.Screenshot(name)
	if !*updateDocs {
		return
	}
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
