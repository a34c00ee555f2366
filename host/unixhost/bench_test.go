//go:build linux

package unixhost

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// pool starts n processes: named of them are `workspace serve KEY` sessions
// (the test binary) naming keys of l, the rest `sleep`. They are ended by PID
// and reaped when the benchmark ends.
func pool(b *testing.B, l host.Layout, n, named int) { startPool(b, l, n, named, false) }

// startPool is pool; with listen, each session holds its workspace's wake
// pipe open for reading (descriptor 3), as a listening session does.
func startPool(b *testing.B, l host.Layout, n, named int, listen bool) {
	b.Helper()
	var pids []int
	b.Cleanup(func() {
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGKILL)
		}
		for _, pid := range pids {
			var ws unix.WaitStatus
			for {
				if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
					break
				}
			}
		}
	})
	null, err := syscall.Open("/dev/null", syscall.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Close(null)
	files := []uintptr{uintptr(null), uintptr(null), uintptr(null)}
	exe := testExe(b)
	for i := range n {
		path, argv, env := "/bin/sleep", []string{"sleep", "100000"}, []string(nil)
		if i < named {
			path = exe
			argv = []string{"workspace", "serve", fmt.Sprintf("agent%d/demo", i), "--root", l.Root()}
			env = []string{helperEnv + "=serve"}
		}
		fs := files
		if listen && i < named {
			ws, err := l.Workspace(messages.WorkspaceKey{Login: fmt.Sprintf("agent%d", i), Project: "demo"})
			if err != nil {
				b.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(ws.Wake), 0o700); err != nil {
				b.Fatal(err)
			}
			if err := unix.Mkfifo(ws.Wake, 0o600); err != nil {
				b.Fatal(err)
			}
			wake, err := syscall.Open(ws.Wake, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer syscall.Close(wake)
			fs = append(slices.Clone(files), uintptr(wake))
		}
		pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Dir: "/", Env: env, Files: fs})
		if err != nil {
			b.Fatalf("process %d of %d: %v", i, n, err)
		}
		pids = append(pids, pid)
	}
}

// psNaming is the shell way: ps's table, parsed, and the same matching.
func psNaming(l host.Layout) (int, error) {
	out, err := exec.Command("ps", "-eo", "pid,lstart,args").Output()
	if err != nil {
		return 0, err
	}
	named := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// PID, then lstart's five words (Mon Nov 30 09:44:31 2026), then args.
		if len(f) < 7 {
			continue
		}
		if len(host.Namings(f[6:], l)) > 0 {
			named++
		}
	}
	return named, sc.Err()
}

// BenchmarkProcTable: the table of about 5,000 processes read by a full
// scan of /proc, by `ps -eo pid,lstart,args`, and through the index the proc
// connector keeps; and the refusal check ("does any process name W?") from
// a full scan and from the index.
func BenchmarkProcTable(b *testing.B) {
	dir := b.TempDir()
	l, _ := host.NewLayout(dir)
	const total, named = 5000, 10
	pool(b, l, total, named)
	k := messages.WorkspaceKey{Login: "agent3", Project: "demo"}
	full, err := NewProcTable(ProcOptions{Layout: l})
	if err != nil {
		b.Fatal(err)
	}
	defer full.Close()
	indexed, err := NewProcTable(ProcOptions{Layout: l})
	if err != nil {
		b.Fatal(err)
	}
	defer indexed.Close()
	if err := indexed.Watch(); err != nil {
		b.Fatal(err)
	}
	procs, _ := full.pids()
	check := func(b *testing.B, tab host.Table) {
		if len(tab.Procs) != named {
			b.Fatalf("found %d sessions, want %d", len(tab.Procs), named)
		}
	}
	b.Run("scan/ocx-full", func(b *testing.B) {
		for b.Loop() {
			tab, err := full.Scan()
			if err != nil {
				b.Fatal(err)
			}
			check(b, tab)
		}
		b.ReportMetric(float64(len(procs)), "procs")
	})
	b.Run("scan/ps", func(b *testing.B) {
		for b.Loop() {
			n, err := psNaming(l)
			if err != nil {
				b.Fatal(err)
			}
			if n != named {
				b.Fatalf("ps found %d sessions, want %d", n, named)
			}
		}
	})
	b.Run("scan/ocx-index", func(b *testing.B) {
		for b.Loop() {
			tab, err := indexed.Scan()
			if err != nil {
				b.Fatal(err)
			}
			check(b, tab)
		}
	})
	for _, c := range []struct {
		name string
		t    *ProcTable
	}{{"naming/ocx-full", full}, {"naming/ocx-index", indexed}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				v, err := c.t.Naming(k)
				if err != nil || v.Named != host.Yes || len(v.By) != 1 {
					b.Fatalf("Naming = %s %v", v, err)
				}
			}
		})
	}
}

// BenchmarkStatusScan: the scan a status makes through the index, of 100
// listening sessions among 1,000 processes: each session's identity, its
// executable and whether it holds its wake pipe open for reading.
func BenchmarkStatusScan(b *testing.B) {
	l, _ := host.NewLayout(b.TempDir())
	const total, named = 1000, 100
	startPool(b, l, total, named, true)
	t, err := NewProcTable(ProcOptions{Layout: l})
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	if err := t.Watch(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		tab, err := t.Scan()
		if err != nil {
			b.Fatal(err)
		}
		listening := 0
		for _, p := range tab.Procs {
			if p.Listening == host.Yes {
				listening++
			}
		}
		if len(tab.Procs) != named || listening != named {
			b.Fatalf("found %d sessions, %d listening; want %d, all listening", len(tab.Procs), listening, named)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/named, "µs/session")
}

// BenchmarkSpawn: from asking to start a program until it runs (Spawn, or
// ForkExec, returns once the exec has happened), and the whole cycle with
// its reaping, for the launcher and for a bare fork and exec, interleaved.
func BenchmarkSpawn(b *testing.B) {
	l, err := NewLauncher(LauncherOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	done := make(chan host.Exit, 1)
	spec := host.SpawnSpec{Path: "/bin/true", Args: []string{"true"}, Dir: "/"}
	null, _ := syscall.Open("/dev/null", syscall.O_RDWR, 0)
	defer syscall.Close(null)
	bare := func() int {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Dir: "/", Env: []string{},
			Files: []uintptr{uintptr(null), uintptr(null), uintptr(null)}, Sys: &syscall.SysProcAttr{Setsid: true}})
		if err != nil {
			b.Fatal(err)
		}
		return pid
	}
	reap := func(pid int) {
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
	}
	// The two are interleaved in one loop, so that the load of a shared
	// machine weighs on both alike; each is timed from the call until it
	// returns, which is once the exec has happened.
	b.Run("to-exec/interleaved", func(b *testing.B) {
		var ocx, fork time.Duration
		n := 0
		one := func() {
			t0 := time.Now()
			if _, err := l.Spawn(spec, func(e host.Exit) { done <- e }); err != nil {
				b.Fatal(err)
			}
			ocx += time.Since(t0)
			<-done
		}
		other := func() {
			t0 := time.Now()
			pid := bare()
			fork += time.Since(t0)
			reap(pid)
		}
		for b.Loop() {
			// Each goes first every other time, so that neither pays for
			// what the other leaves behind.
			if n%2 == 0 {
				one()
				other()
			} else {
				other()
				one()
			}
			n++
		}
		b.ReportMetric(float64(ocx.Microseconds())/float64(n), "ocx-µs/spawn")
		b.ReportMetric(float64(fork.Microseconds())/float64(n), "forkexec-µs/spawn")
		b.ReportMetric(float64(ocx)/float64(fork), "ratio")
	})
	b.Run("cycle/interleaved", func(b *testing.B) {
		var ocx, fork time.Duration
		n := 0
		one := func() {
			t0 := time.Now()
			if _, err := l.Spawn(spec, func(e host.Exit) { done <- e }); err != nil {
				b.Fatal(err)
			}
			if e := <-done; !e.Known || e.Code != 0 {
				b.Fatalf("exit %s", e)
			}
			ocx += time.Since(t0)
		}
		other := func() {
			t0 := time.Now()
			reap(bare())
			fork += time.Since(t0)
		}
		for b.Loop() {
			if n%2 == 0 {
				one()
				other()
			} else {
				other()
				one()
			}
			n++
		}
		b.ReportMetric(float64(ocx.Microseconds())/float64(n), "ocx-µs/cycle")
		b.ReportMetric(float64(fork.Microseconds())/float64(n), "forkexec-µs/cycle")
		b.ReportMetric(float64(ocx)/float64(fork), "ratio")
	})
}

// BenchmarkPipeIngest: lines through the daemon's named pipe from many
// concurrent writers, each with its own descriptor, counted at the reader:
// one line per write (as the hook writes), and lines packed into writes of
// at most PIPE_BUF bytes. Every line is counted; none may be lost.
func BenchmarkPipeIngest(b *testing.B) {
	for _, c := range []struct {
		name    string
		writers int
		batch   int
	}{{"line-per-write/writers=1", 1, 1}, {"line-per-write/writers=2", 2, 1}, {"line-per-write/writers=8", 8, 1}, {"line-per-write/writers=64", 64, 1}, {"packed/writers=8", 8, 48}} {
		b.Run(c.name, func(b *testing.B) {
			root, p := pipeRoot(b)
			r, err := OpenPipeReader(root, p)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.SetBuffer(1 << 20); err != nil {
				b.Logf("pipe buffer: %v", err)
			}
			var got atomic.Int64
			var torn atomic.Int64
			runDone := make(chan error, 1)
			go func() {
				runDone <- r.Run(func(l []byte) {
					if len(l) != 93 {
						torn.Add(1)
					}
					got.Add(1)
				})
			}()
			// A hook's line: post REPOSITORY HASH.
			line := []byte("post /srv/fossil/demo.fossil " + strings.Repeat("0123456789abcdef", 4))
			writers := make([]*LineWriter, c.writers)
			for i := range writers {
				if writers[i], err = OpenLineWriter(root, p); err != nil {
					b.Fatal(err)
				}
				writers[i].Wait = time.Minute
			}
			n := b.N
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for i, w := range writers {
				share := n / c.writers
				if i < n%c.writers {
					share++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					batch := make([][]byte, 0, c.batch)
					for j := 0; j < share; j++ {
						if c.batch == 1 {
							if err := w.WriteLine(line); err != nil {
								b.Error(err)
								return
							}
							continue
						}
						batch = append(batch, line)
						if len(batch) == c.batch || j == share-1 {
							if err := w.WriteLines(batch); err != nil {
								b.Error(err)
								return
							}
							batch = batch[:0]
						}
					}
				}()
			}
			wg.Wait()
			for got.Load() < int64(n) {
				time.Sleep(50 * time.Microsecond)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			for _, w := range writers {
				w.Close()
			}
			r.Close()
			if err := <-runDone; err != nil {
				b.Fatal(err)
			}
			if got.Load() != int64(n) || torn.Load() != 0 || r.Dropped() != 0 {
				b.Fatalf("read %d lines (%d torn, %d dropped), wrote %d", got.Load(), torn.Load(), r.Dropped(), n)
			}
			b.ReportMetric(float64(n)/elapsed.Seconds(), "lines/s")
		})
	}
}

// BenchmarkLookAlike: the refusal check of a workspace and the scan
// through the index, beside issue 39's look-alike in alice's sandbox (a
// loop forking 20 times a second whose command line binds 20,000 made-up
// workspaces) and beside the same loop binding none (D78).
func BenchmarkLookAlike(b *testing.B) {
	claimed := messages.WorkspaceKey{Login: "u5", Project: "p"}
	for _, binds := range []int{0, 20000} {
		b.Run(fmt.Sprintf("binds=%d", binds), func(b *testing.B) {
			s := newSandboxSetup(b)
			pt, err := NewProcTable(ProcOptions{Layout: s.layout})
			if err != nil {
				b.Fatal(err)
			}
			defer pt.Close()
			if err := pt.Watch(); err != nil {
				b.Skipf("no process events here: %v", err)
			}
			forkingLookAlike(b, s, binds)
			if binds > 0 {
				manyBindsLookAlike(b, pt)
			}
			b.Run("naming", func(b *testing.B) {
				for b.Loop() {
					if v, err := pt.Naming(claimed); err != nil || v.Named != host.No {
						b.Fatalf("Naming = %s, %v", v, err)
					}
				}
			})
			b.Run("scan", func(b *testing.B) {
				for b.Loop() {
					if _, err := pt.Scan(); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
