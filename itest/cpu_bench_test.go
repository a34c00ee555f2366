package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages/runmsg"
	"golang.org/x/sys/unix"
)

// BenchmarkRunCPU (issue 42, item 2): the CPU a run costs the server's
// node, by program, against Fossil's floor, the CPU Fossil spends on the
// four writes a run needs (the run, started, kept logs, ended) pushed to a
// plain `fossil server` with no hook. Both are counted by the kernel
// (cpuMeter: every process forked from the fossil server and the daemon,
// by its exit record, and the two servers' own time), so the benchmark's
// own work (posting, the completion check) is not counted. Each op is 20
// runs (the floor: 20 times four pushes), posted from four posters at once
// as BenchmarkRemoteRunsPerSecond does; the floor runs first, so that the
// ratio (x-floor) compares figures of one run (the mean of the floors this
// process measured: go test -count runs the floor count times first).
func BenchmarkRunCPU(b *testing.B) {
	needs(b, "ocxd")
	const perOp = 20
	ctx := context.Background()
	// The floor's CPU per run, each time it was measured in this process
	// (go test -count runs the floor count times before the node).
	var floors []time.Duration
	post := func(b *testing.B, n int, one func(i int) error) {
		work := make(chan int)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					if err := one(i); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
	}
	b.Run("fossil-floor", func(b *testing.B) {
		srv := harness.StartServer(b, harness.Options{})
		client := &fossilio.Client{URL: srv.URL, Login: srv.AdminLogin, Password: srv.AdminPassword, ProjectCode: srv.ProjectCode}
		if _, err := client.NewThread(ctx, "first", "before the runs"); err != nil {
			b.Fatal(err)
		}
		m := startCPUMeter(b, srv.PID)
		b.ResetTimer()
		for op := 0; op < b.N; op++ {
			post(b, perOp, func(i int) error {
				root, err := client.NewThread(ctx, fmt.Sprintf("run %d %d", op, i), echoRun("node", "u-node", fmt.Sprintf("r%d", i)))
				if err != nil {
					return err
				}
				for _, text := range []string{"started", "kept logs\n\n```\nr\n```", "ended"} {
					if _, err := client.Reply(ctx, root, root, text); err != nil {
						return err
					}
				}
				return nil
			})
		}
		b.StopTimer()
		// The last pushes' backoffices end after their replies.
		time.Sleep(500 * time.Millisecond)
		got := m.stop()
		runs := b.N * perOp
		floor := got.total() / time.Duration(runs)
		floors = append(floors, floor)
		b.ReportMetric(float64(floor.Microseconds())/1000, "cpu-ms/run")
		b.ReportMetric(0, "ns/op")
		b.Logf("CPU ms per run by program: %s", got.per(runs))
	})
	b.Run("server-node", func(b *testing.B) {
		a := serverNode(b)
		d := startDaemon(b, a, program("ocxd"))
		node := a.nodeUser()
		client := &fossilio.Client{URL: a.srv.URL, Login: a.srv.AdminLogin, Password: a.srv.AdminPassword, ProjectCode: a.srv.ProjectCode}
		if _, err := client.NewThread(ctx, "first", "before the runs"); err != nil {
			b.Fatal(err)
		}
		repo := a.repo()
		defer repo.Close()
		ended := newEndedRuns(a)
		time.Sleep(500 * time.Millisecond) // the first post's backoffice and hook
		m := startCPUMeter(b, a.srv.PID, d.cmd.Process.Pid)
		b.ResetTimer()
		for op := 0; op < b.N; op++ {
			var runs []string
			var mu sync.Mutex
			post(b, perOp, func(i int) error {
				h, err := client.NewThread(ctx, fmt.Sprintf("run %d %d", op, i), echoRun(node, "u-node", fmt.Sprintf("r%d", i)))
				if err != nil {
					return err
				}
				mu.Lock()
				runs = append(runs, h)
				mu.Unlock()
				return nil
			})
			ended.await(b, repo, runs)
		}
		b.StopTimer()
		time.Sleep(500 * time.Millisecond)
		got := m.stop()
		runs := b.N * perOp
		per := got.total() / time.Duration(runs)
		b.ReportMetric(float64(per.Microseconds())/1000, "cpu-ms/run")
		if len(floors) > 0 {
			var floor time.Duration
			for _, f := range floors {
				floor += f
			}
			floor /= time.Duration(len(floors))
			b.ReportMetric(float64(per)/float64(floor), "x-floor")
		}
		b.ReportMetric(0, "ns/op")
		b.Logf("CPU ms per run by program: %s", got.per(runs))
	})
}

// endedRuns follows the runs ended on the server's record for a
// benchmark, at as little cost to the machine it measures as it can: it
// reads what the nodes' daemons log anyway (each run's "released from the
// node's care", which follows its ended written), a few bytes appended to
// each ocxd.log since its last look, and looks at the record (what
// arrived since its last look there, each artifact classified and read
// once) only when the logs say every run it waits for is released, or
// every second whatever they say. The record, not the logs, says a run
// ended.
type endedRuns struct {
	logs     []string // the nodes' ocxd.log
	read     []int64  // how far each is read
	partial  [][]byte // each one's last line, not yet whole
	released map[string]bool
	mark     int64
	ended    map[string]bool
}

func newEndedRuns(nodes ...*testNode) *endedRuns {
	e := &endedRuns{released: map[string]bool{}, ended: map[string]bool{}}
	for _, n := range nodes {
		e.logs = append(e.logs, filepath.Join(n.agents, "ocxd.log"))
	}
	e.read = make([]int64, len(e.logs))
	e.partial = make([][]byte, len(e.logs))
	return e
}

// releasedMsg is the log line await reads.
var releasedMsg = []byte(`"msg":"run released from the node's care"`)

// readLogs reads what the logs gained since the last look.
func (e *endedRuns) readLogs(b *testing.B) {
	for i, path := range e.logs {
		f, err := os.Open(path)
		if err != nil {
			continue // not made yet
		}
		data, err := io.ReadAll(io.NewSectionReader(f, e.read[i], 1<<40))
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		e.read[i] += int64(len(data))
		data = append(e.partial[i], data...)
		end := bytes.LastIndexByte(data, '\n') + 1
		e.partial[i] = append([]byte(nil), data[end:]...)
		for _, line := range bytes.Split(data[:end], []byte("\n")) {
			if !bytes.Contains(line, releasedMsg) {
				continue
			}
			var l struct {
				Run string `json:"run"`
			}
			if json.Unmarshal(line, &l) == nil && l.Run != "" {
				e.released[l.Run] = true
			}
		}
	}
}

// await waits until every run of runs has its ended on the record, looking
// every 20 ms. It returns the CPU the benchmark's process spent meanwhile,
// which is the check's (the posters are done).
func (e *endedRuns) await(b *testing.B, repo *fossilio.Repo, runs []string) time.Duration {
	b.Helper()
	cpu0 := selfCPU(b)
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	var looked time.Time
	for {
		e.readLogs(b)
		all := true
		for _, h := range runs {
			all = all && e.released[h]
		}
		if all || time.Since(looked) >= time.Second {
			looked = time.Now()
			hashes, last, err := repo.Received(ctx, e.mark)
			if err != nil {
				b.Fatal(err)
			}
			if len(hashes) > 0 {
				infos, err := repo.Classify(ctx, hashes...)
				if err != nil {
					b.Fatal(err)
				}
				texts, err := repo.NoteTexts(ctx, infos)
				if err != nil {
					b.Fatal(err)
				}
				for i, info := range infos {
					if m, ok := record.ReadRunMsg(info, texts[i]); ok && m.Kind() == runmsg.MsgEnded && m.Sender == m.Node() {
						e.ended[m.About()] = true
					}
				}
			}
			e.mark = max(e.mark, last)
		}
		done := 0
		for _, h := range runs {
			if e.ended[h] {
				done++
			}
		}
		if done == len(runs) {
			return selfCPU(b) - cpu0
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d runs ended in five minutes", done, len(runs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// selfCPU is this process's user and system time so far.
func selfCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
