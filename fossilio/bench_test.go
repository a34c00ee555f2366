package fossilio_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
)

// BenchmarkWrite compares a write as a user through fossilio (one sync
// request to the running server) with the fossil command doing an
// equivalent write on the host (a process per write), side by side.
func BenchmarkWrite(b *testing.B) {
	srv := harness.StartServer(b, harness.Options{Users: []harness.User{{Login: "alice", Password: "alice-pw", Caps: "gio"}}})
	ctx := context.Background()
	repo, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer repo.Close()
	ci, _, err := repo.Received(ctx, 0)
	if err != nil || len(ci) == 0 {
		b.Fatal(err)
	}
	target := ci[0] // the initial check-in
	c := &fossilio.Client{URL: srv.URL, Login: "alice", Password: "alice-pw", ProjectCode: srv.ProjectCode}

	b.Run("fossilio-post", func(b *testing.B) {
		i := 0
		defer cpuPerOp(b, srv.PID)()
		for b.Loop() {
			i++
			if _, err := c.NewThread(ctx, fmt.Sprintf("bench %d", i), "a post written over sync"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fossilio-tag", func(b *testing.B) {
		i := 0
		defer cpuPerOp(b, srv.PID)()
		for b.Loop() {
			i++
			if _, err := c.Tag(ctx, target, "bench", fmt.Sprintf("value %d", i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fossil-tag-add", func(b *testing.B) {
		i, locked := 0, 0
		defer cpuPerOp(b, srv.PID)()
		for b.Loop() {
			i++
			locked += tagAdd(b, srv, target, i)
		}
		b.ReportMetric(float64(locked), "locked-retries")
	})
	// A write on the host starts no backoffice, so for the hook to see it a
	// local writer must run one after (protocol v1, E7); a sync write needs
	// no second process.
	b.Run("fossil-tag-add+backoffice", func(b *testing.B) {
		i, locked := 0, 0
		defer cpuPerOp(b, srv.PID)()
		for b.Loop() {
			i++
			locked += tagAdd(b, srv, target, i)
			if err := srv.Backoffice(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(locked), "locked-retries")
	})
}

// tagAdd is the fossil command's write on the host, as a user would run it
// beside the live server, and returns how often it was refused with
// "database is locked" first: the server's backoffice, which runs after
// each request and takes its lease in a write, makes a host writer's
// transaction fail at once now and then (its snapshot is stale by the time
// it writes), and a user then runs the command again. A write over sync
// never meets this: the server serializes its own writes.
func tagAdd(b *testing.B, srv *harness.Server, target string, i int) int {
	b.Helper()
	for locked := 0; ; locked++ {
		_, err := srv.Fossil("tag", "add", "--raw", "-U", "alice", "bench", target, fmt.Sprintf("value %d", i), "-R", srv.Repo)
		switch {
		case err == nil:
			return locked
		case !strings.Contains(err.Error(), "database is locked") || locked == 20:
			b.Fatalf("%v (after %d refusals for a locked database)", err, locked)
		}
	}
}

// BenchmarkClassify1000 classifies 1,000 received artifacts of every kind as
// the hook will: one open repository, one read transaction, prepared
// statements, no process per artifact.
func BenchmarkClassify1000(b *testing.B) {
	srv := harness.StartServer(b, harness.Options{Users: []harness.User{{Login: "alice", Password: "alice-pw", Caps: "gio"}}})
	ctx := context.Background()
	c := &fossilio.Client{URL: srv.URL, Login: "alice", Password: "alice-pw", ProjectCode: srv.ProjectCode}
	repo, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer repo.Close()
	initial, _, err := repo.Received(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	checkin := initial[0]
	now := time.Now()
	var batch [][]byte
	var roots []string
	for i := 0; len(batch) < 1000; i++ {
		d := now.Add(time.Duration(i) * time.Millisecond)
		var data []byte
		switch {
		case i%4 == 0 || len(roots) == 0:
			data, err = fossilio.PostDraft{Date: d, User: "alice", Title: fmt.Sprintf("thread %d", i), Text: "text"}.Bytes()
			if err == nil {
				roots = append(roots, fossilio.HashOf(data))
			}
		case i%4 == 1:
			r := roots[len(roots)-1]
			data, err = fossilio.PostDraft{Date: d, User: "alice", Root: r, InReplyTo: r, Text: "```json\n{\"ocx\": \"listen\"}\n```\n"}.Bytes()
		case i%4 == 2:
			data, err = fossilio.TicketDraft{Date: d, User: "alice", Ticket: fossilio.NewTicketID(), Fields: []fossilio.Field{{Name: "icomment", Value: "x"}, {Name: "title", Value: "t"}}}.Bytes()
		default:
			data, err = fossilio.ControlDraft{Date: d, User: "alice", Tags: []fossilio.Tag{{Op: fossilio.TagAdd, Name: "ci", Target: checkin, Value: fmt.Sprint(i)}}}.Bytes()
		}
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, data)
	}
	var hashes []string
	for start := 0; start < len(batch); start += 100 {
		h, err := c.PushAll(ctx, batch[start:start+100]...)
		if err != nil {
			b.Fatal(err)
		}
		hashes = append(hashes, h...)
	}
	b.ResetTimer()
	for b.Loop() {
		infos, err := repo.Classify(ctx, hashes...)
		if err != nil {
			b.Fatal(err)
		}
		if len(infos) != 1000 || infos[0].Sender != "alice" {
			b.Fatalf("classified %d, first %+v", len(infos), infos[0])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/artifact")
}

// cpuPerOp reports the processor time a write costs, wherever it is spent:
// this process, the fossil commands it ran and waited for, and the server's
// request handlers (its reaped children). Wall time on a shared 2-core
// machine measures the other load as much as the write; processor time
// does not.
func cpuPerOp(b *testing.B, serverPID int) func() {
	start := cpuNow(serverPID)
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((cpuNow(serverPID)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

func cpuNow(serverPID int) time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	total := time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
	// Fields 16 and 17 of /proc/PID/stat: the server's reaped children's
	// user and system time, in clock ticks (100 per second).
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", serverPID)); err == nil {
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			f := strings.Fields(string(b[i+2:]))
			if len(f) > 14 {
				cu, _ := strconv.ParseInt(f[13], 10, 64)
				cs, _ := strconv.ParseInt(f[14], 10, 64)
				total += time.Duration(cu+cs) * 10 * time.Millisecond
			}
		}
	}
	return total
}
