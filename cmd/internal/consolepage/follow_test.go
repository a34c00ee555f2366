package consolepage

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// followPage is a page of a node whose agent-1 session's log is at the
// path returned.
func followPage(t *testing.T) (*Page, string) {
	t.Helper()
	layout, err := host.NewLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := layout.Workspace(messages.WorkspaceKey{Login: "agent-1", Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(ws.Log), 0o700); err != nil {
		t.Fatal(err)
	}
	p := &Page{Ctx: context.Background(), Layout: layout, Config: &messages.NodeConfig{}, Project: "demo",
		Refusals: unixhost.NewRefusalLog(slog.New(slog.DiscardHandler))}
	return p, ws.Log
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestFollowLogResumes: each answer begins where the viewer left off and
// ends at a whole character, so a viewer that asks again from each
// answer's end (a reconnect too) sees every byte once; a log replaced by a
// shorter one starts again from its beginning, said so.
func TestFollowLogResumes(t *testing.T) {
	p, path := followPage(t)
	appendTo(t, path, "one\ntwo\n")
	c, err := p.followLog(path, 0)
	if err != nil || c.Text != "one\ntwo\n" || c.From != 0 || c.To != 8 || c.Reset {
		t.Fatalf("from 0: %+v %v", c, err)
	}
	appendTo(t, path, "three\n\xc3") // é's first byte: not whole yet
	c, err = p.followLog(path, c.To)
	if err != nil || c.Text != "three\n" || c.From != 8 || c.To != 14 {
		t.Fatalf("from 8: %+v %v", c, err)
	}
	appendTo(t, path, "\xa9!\n")
	c, err = p.followLog(path, c.To)
	if err != nil || c.Text != "é!\n" || c.To != 18 {
		t.Fatalf("from 14: %+v %v", c, err)
	}
	// Replaced by a shorter log: from its start.
	if err := os.WriteFile(path, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = p.followLog(path, 18)
	if err != nil || !c.Reset || c.Text != "new\n" || c.From != 0 || c.To != 4 {
		t.Fatalf("replaced: %+v %v", c, err)
	}
	// A long log comes in chunks, whole again when joined.
	long := strings.Repeat("0123456789abcdef\n", 2*followChunk/17+5)
	appendTo(t, path, long)
	var got strings.Builder
	for from := int64(4); from < int64(4+len(long)); {
		c, err := p.followLog(path, from)
		if err != nil || c.From != from || int64(len(c.Text)) > followChunk {
			t.Fatalf("from %d: %d bytes %v", from, len(c.Text), err)
		}
		got.WriteString(c.Text)
		from = c.To
	}
	if got.String() != long {
		t.Errorf("the long log joined from its chunks differs (%d bytes, want %d)", got.Len(), len(long))
	}
}

// TestFollowLogWaitsForWhatComes: an ask with nothing new waits, and is
// answered as soon as the log grows; no log yet is an empty one.
func TestFollowLogWaitsForWhatComes(t *testing.T) {
	p, path := followPage(t)
	written := make(chan time.Time, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // the ask is waiting by then, or finds it at once
		if err := os.WriteFile(path, []byte("late\n"), 0o600); err != nil {
			t.Error(err)
		}
		written <- time.Now()
	}()
	c, err := p.followLog(path, 0)
	at := <-written
	if err != nil || c.Text != "late\n" || c.To != 5 {
		t.Fatalf("%+v %v", c, err)
	}
	if d := time.Since(at); d > FollowWait/2 {
		t.Errorf("answered %s after the write", d)
	}
}

// TestSessionLogAsk: the page's route reads `from`, refusing one that is
// no byte of the log by name, and answers JSON that is not cached.
func TestSessionLogAsk(t *testing.T) {
	p, path := followPage(t)
	appendTo(t, path, "hello\n")
	for _, c := range []struct {
		query string
		code  int
		text  string
	}{
		{"from=0", 200, "hello\n"},
		{"from=2", 200, "llo\n"},
		{"from=-1", 400, ""},
		{"from=x", 400, ""},
		{"", 400, ""},
	} {
		w := httptest.NewRecorder()
		p.W, p.R = w, httptest.NewRequest(http.MethodGet, "/session/agent-1/log?"+c.query, nil)
		p.sessionLog("agent-1")
		if w.Code != c.code {
			t.Errorf("%q: %d, want %d: %s", c.query, w.Code, c.code, w.Body)
			continue
		}
		if c.code != 200 {
			if !strings.Contains(w.Body.String(), "from:") {
				t.Errorf("%q: the refusal names no field: %s", c.query, w.Body)
			}
			continue
		}
		var got LogChunk
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Text != c.text || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%q: %+v %v %q", c.query, got, err, w.Header().Get("Cache-Control"))
		}
	}
}
