package hook_test

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/hook"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
)

// BenchmarkRun is the hook's work in one process, without starting one
// (itest's BenchmarkHook runs the real binary): 1 or 1,000 posts arrived in
// a thread a session listens to; each is classified, read for a note, woken
// and handed to the daemon (the benchmark reads both pipes). With unheard,
// nobody reads the session's wake pipe: each post earns an unheard note,
// all of them written in one note (D28), as itest's
// artifacts=1000-unheard.
func BenchmarkRun(b *testing.B) {
	for _, c := range []struct {
		count   int
		unheard bool
	}{{1, false}, {1000, false}, {1000, true}} {
		count, name := c.count, "artifacts="+strconv.Itoa(c.count)
		if c.unheard {
			name += "-unheard"
		}
		b.Run(name, func(b *testing.B) {
			f := newFix(b)
			person := f.client(person, personPW)
			th, err := person.NewThread(f.ctx, "A question", "Hello?")
			if err != nil {
				b.Fatal(err)
			}
			must(b, workspaces.Of(f.n).ListenerAdd(f.ctx, workspaces.ListenerInput{Workspace: agent + "/demo", Kind: "thread", Names: th}))
			f.hears(agent, "alice")
			var w *lines
			if !c.unheard {
				w = f.listen(agent)
			}
			r, _ := fossilio.OpenNode(f.srv.Repo, nil)
			_, mark, err := r.Received(f.ctx, math.MaxInt64)
			r.Close()
			if err != nil {
				b.Fatal(err)
			}
			var stdin strings.Builder
			for done := 0; done < count; {
				var batch [][]byte
				for ; done < count && len(batch) < 100; done++ {
					data, err := fossilio.PostDraft{Date: time.Now().UTC(), User: "alice", Root: th, InReplyTo: th, Text: fmt.Sprintf("post %d", done)}.Bytes()
					if err != nil {
						b.Fatal(err)
					}
					batch = append(batch, data)
				}
				hashes, err := person.PushAll(f.ctx, batch...)
				if err != nil {
					b.Fatal(err)
				}
				for _, h := range hashes {
					fmt.Fprintf(&stdin, "%s forum-reply-to %s\n", h, th[:14])
				}
			}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if err := os.WriteFile(filepath.Join(f.agents, "hook.mark.demo"), []byte(strconv.FormatInt(mark, 10)), 0o600); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := hook.Run(f.ctx, hook.Options{Agents: f.agents, Repo: f.srv.Repo, Stdin: strings.NewReader(stdin.String()), Log: log, Release: f.release}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(count), "ns/artifact")
			if w == nil {
				return
			}
			if got := len(w.all(count * b.N)); got != count*b.N {
				b.Fatalf("woken %d times, want %d", got, count*b.N)
			}
		})
	}
}
