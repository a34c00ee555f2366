package record_test

import (
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host/listening"
	"github.com/ocx-go/ocx/messages"
)

// TestLiveIndexIsAFreshRead is the live record's property (issue 24, D66):
// an index kept for as long as the repository is open, refreshed by
// receipt after each write, answers what an index read afresh from the
// same repository answers, after every step of a random sequence of
// workspace and session definitions, launches, ends, terminations,
// listens and unlistens, each written by the admin, the node user, the
// agent or alice (who may not write most of them), on one real server.
func TestLiveIndexIsAFreshRead(t *testing.T) {
	f := newFix(t)
	logins := []string{"agent-1", "agent-2"}
	// The repository grows over the runs and each step reads it afresh, so
	// the runs are fewer than rapid's default unless the caller asks more.
	if fl := flag.Lookup("rapid.checks"); fl != nil && fl.Value.String() == fl.DefValue {
		fl.Value.Set("25")
		defer fl.Value.Set(fl.DefValue)
	}
	rapid.Check(t, func(rt *rapid.T) {
		live := record.NewIndex(f.repo, "ocx")
		var homes []string // the records written so far in this run
		var launches []string
		code := 0
		steps := rapid.IntRange(1, 8).Draw(rt, "steps")
		for i := range steps {
			login := rapid.SampledFrom(logins).Draw(rt, "login")
			key := messages.WorkspaceKey{Login: login, Project: "demo"}
			writer := rapid.SampledFrom([]string{"admin", "admin", "node", "agent", "alice"}).Draw(rt, "writer")
			c, author := f.admin, f.srv.AdminLogin
			switch writer {
			case "node":
				c, author = f.nodeU, "ocx"
			case "agent":
				c, author = f.agent, "agent-1"
			case "alice":
				c, author = f.alice, f.srv.AdminLogin // a U card proves nothing
			}
			kind := "workspace"
			if len(homes) > 0 {
				kind = rapid.SampledFrom([]string{"workspace", "session", "launch", "end", "terminated", "listen", "unlisten"}).Draw(rt, "kind")
			}
			var home string
			if len(homes) > 0 {
				home = rapid.SampledFrom(homes).Draw(rt, "home")
			}
			switch kind {
			case "workspace":
				homes = append(homes, f.thread(c, author, f.block(wsDef(login))))
			case "session":
				f.reply(c, author, home, f.block(&messages.SessionDefinition{Kind: messages.Mechanical, Command: []string{"cat"}, Lifetime: messages.Stays}))
			case "launch":
				launches = append(launches, f.reply(c, author, home, f.block(&messages.LaunchNote{Login: login, Project: "demo", Workspace: home, Session: home, Release: messages.ReleaseCurrent})))
			case "end":
				launch := home
				if len(launches) > 0 {
					launch = rapid.SampledFrom(launches).Draw(rt, "launch")
				}
				f.reply(c, author, home, f.block(&messages.EndNote{Launch: launch, Login: login, Project: "demo", PID: 100 + i, StartTime: 9, Status: messages.EndExited, ExitCode: &code,
					Seen: time.Unix(1_700_000_000, 0).UTC(), Note: "exited 0", Release: "test"}))
			case "terminated":
				f.reply(c, author, home, f.block(&messages.TerminatedNote{Login: login, Project: "demo"}))
			case "listen", "unlisten":
				l := messages.Listener{Login: "agent-1", Project: "demo", Kind: messages.ListenThread, Names: rapid.SampledFrom(homes).Draw(rt, "names")}
				var n messages.Note = &messages.ListenNote{Listener: l}
				if kind == "unlisten" {
					n = &messages.UnlistenNote{Listener: l}
				}
				f.reply(c, author, home, f.block(n))
			}
			if d := differs(f, live, key); d != "" {
				rt.Fatalf("after step %d (%s by %s): %s", i, kind, writer, d)
			}
		}
	})
}

// differs says what the live index answers otherwise than a fresh one.
func differs(f *fix, live *record.Index, key messages.WorkspaceKey) string {
	fresh := record.NewIndex(f.repo, "ocx")
	for _, q := range []struct {
		name string
		ask  func(x *record.Index) (any, error)
	}{
		{"workspaces", func(x *record.Index) (any, error) { return x.Workspaces(f.ctx) }},
		{"listeners", func(x *record.Index) (any, error) { return x.Listeners(f.ctx) }},
		{"latest end", func(x *record.Index) (any, error) {
			e, ok, err := x.LatestEnd(f.ctx, key)
			return fmt.Sprint(e.Hash, ok), err
		}},
		{"listen events", func(x *record.Index) (any, error) { return listening.EventsIn(f.ctx, x, key) }},
		{"latest start", func(x *record.Index) (any, error) {
			e, ok, err := x.LatestStart(f.ctx, key)
			return fmt.Sprint(e.Hash, ok), err
		}},
	} {
		a, err := q.ask(live)
		if err != nil {
			return q.name + " (live): " + err.Error()
		}
		b, err := q.ask(fresh)
		if err != nil {
			return q.name + " (fresh): " + err.Error()
		}
		if !reflect.DeepEqual(a, b) {
			return fmt.Sprintf("%s: live %+v, fresh %+v", q.name, a, b)
		}
	}
	// What a launch's rebuild reads from the index (listening.InIndex) is
	// what it would read from the repository itself.
	own := listening.Own{Kind: messages.ListenThread, ID: strings.Repeat("a", 64)}
	inIndex, inHears, err := listening.InIndex(live, key, nil)(f.ctx)
	if err != nil {
		return "listen events (live): " + err.Error()
	}
	events, err := listening.Events(f.ctx, f.repo, key)
	if err != nil {
		return "listen events (repository): " + err.Error()
	}
	hears, err := f.repo.PrivilegedUsers(f.ctx)
	if err != nil {
		return "privileged users (repository): " + err.Error()
	}
	a, aerr := listening.Want(key, own, inIndex)
	b, berr := listening.Want(key, own, events)
	if !reflect.DeepEqual(a, b) || aerr != nil || berr != nil || !slices.Equal(inHears, hears) {
		return fmt.Sprintf("a rebuild's reading: the index %+v %v %v, the repository %+v %v %v", a, inHears, aerr, b, hears, berr)
	}
	if len(inIndex) != len(events) || (len(events) > 0 && !reflect.DeepEqual(inIndex, events)) {
		return fmt.Sprintf("listen events: the index %+v, the repository %+v", inIndex, events)
	}
	return ""
}
