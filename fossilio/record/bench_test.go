package record_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// BenchmarkIndexRefresh is a first look at a record of 600 notes (200
// workspace definitions, each in its thread, and 400 listen notes), as a
// console request or `ocx status` makes it: every artifact classified and
// read once.
func BenchmarkIndexRefresh(b *testing.B) {
	f := newFix(b)
	var posts [][]byte
	for i := range 200 {
		d, _ := fossilio.PostDraft{Date: time.Now().UTC(), User: f.srv.AdminLogin, Title: fmt.Sprintf("w%d", i), Text: f.block(wsDef(fmt.Sprintf("agent-%d", i)))}.Bytes()
		posts = append(posts, d)
	}
	roots, err := f.admin.PushAll(f.ctx, posts...)
	if err != nil {
		b.Fatal(err)
	}
	posts = posts[:0]
	for i := range 400 {
		l := &messages.ListenNote{Listener: messages.Listener{Login: "agent-1", Project: "demo", Kind: messages.ListenThread, Names: roots[i%len(roots)]}}
		d, _ := fossilio.PostDraft{Date: time.Now().UTC(), User: "agent-1", Root: roots[i%len(roots)], InReplyTo: roots[i%len(roots)], Text: f.block(l)}.Bytes()
		posts = append(posts, d)
	}
	if _, err := f.agent.PushAll(f.ctx, posts...); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		idx := record.NewIndex(f.repo, "ocx")
		ws, err := idx.Workspaces(f.ctx)
		if err != nil || len(ws) != 200 {
			b.Fatalf("%d workspaces, %v", len(ws), err)
		}
	}
}

// BenchmarkFindAgentRecord is the caller's record looked up as post,
// push and login rotate look it up (D47), on a repository of 200 threads
// the admin opened (workspace definitions, as every workspace add makes
// one) and the record last: every first post listed, the admin's read.
func BenchmarkFindAgentRecord(b *testing.B) {
	f := newFix(b)
	var posts [][]byte
	for i := range 200 {
		d, _ := fossilio.PostDraft{Date: time.Now().UTC(), User: f.srv.AdminLogin, Title: fmt.Sprintf("w%d", i), Text: f.block(wsDef(fmt.Sprintf("agent-%d", i)))}.Bytes()
		posts = append(posts, d)
	}
	if _, err := f.admin.PushAll(f.ctx, posts...); err != nil {
		b.Fatal(err)
	}
	rec := &runmsg.TaskRecord{User: "native-7f3a2b", Node: "ocx", Runner: "native", Objective: "Bench.", Checkins: []string{},
		Hears: []string{"alice"}, Restrict: runmsg.Restrict{NoPassword: true}, Sandbox: runmsg.DefaultRecordSandbox(true), Budget: runmsg.Budget{Wall: "1h"}}
	block, err := rec.Encode()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.admin.NewThread(f.ctx, "Record", "Record.\n\n"+string(block)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, ok, err := record.FindAgentRecord(f.ctx, f.repo, "native-7f3a2b", "ocx"); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
