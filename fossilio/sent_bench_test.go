package fossilio_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
)

// BenchmarkSentBy lists what one login sent among 4,000 posts and ticket
// changes, half of them its own (threads, replies holding a note, ticket
// changes), as a listening index is rebuilt for an agent that has worked a
// while.
func BenchmarkSentBy(b *testing.B) {
	users := []harness.User{{Login: "alice", Password: "alice-pw", Caps: "gio"}, {Login: "bob", Password: "bob-pw", Caps: "gio"}}
	srv := harness.StartServer(b, harness.Options{Users: users})
	ctx := context.Background()
	repo, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer repo.Close()
	now := time.Now()
	for _, u := range users {
		c := &fossilio.Client{URL: srv.URL, Login: u.Login, Password: u.Password, ProjectCode: srv.ProjectCode}
		var batch [][]byte
		var root string
		for i := 0; i < 2000; i++ {
			d := now.Add(time.Duration(i) * time.Millisecond)
			var data []byte
			switch {
			case i%3 == 0:
				data, err = fossilio.PostDraft{Date: d, User: u.Login, Title: fmt.Sprintf("thread %d", i), Text: "some words of a post"}.Bytes()
				root = fossilio.HashOf(data)
			case i%3 == 1:
				data, err = fossilio.PostDraft{Date: d, User: u.Login, Root: root, InReplyTo: root, Text: "Listening.\n\n```json\n{\"ocx\": \"listen\"}\n```\n"}.Bytes()
			default:
				data, err = fossilio.TicketDraft{Date: d, User: u.Login, Ticket: fossilio.NewTicketID(), Fields: []fossilio.Field{{Name: "icomment", Value: "x"}, {Name: "title", Value: "t"}}}.Bytes()
			}
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, data)
			if len(batch) == 100 {
				if _, err := c.PushAll(ctx, batch...); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	for _, v := range []struct {
		name, holding string
		want          int
	}{{"all", "", 2000}, {"notes", "```json", 667}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				sent, err := repo.SentBy(ctx, "alice", v.holding)
				if err != nil {
					b.Fatal(err)
				}
				if len(sent) != v.want {
					b.Fatalf("%d listed, want %d", len(sent), v.want)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2000, "ns/artifact")
		})
	}
}
