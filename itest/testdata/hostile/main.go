// Command hostile is what TestHostileLoad's agent runs in its own sandbox
// to take what the kernel lets it of the node, and say how far it got:
//
//	hostile inotify OUT   inotify instances until refused, then watches
//	                      on one of them, over /usr, until refused
//	hostile procs N OUT   N processes (sleep), each started at once,
//	                      counting those refused
//
// Each writes what it got to OUT, a line "done ..." last, and then holds
// what it took until it is killed (its session's end).
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: hostile inotify OUT | hostile procs N OUT")
		os.Exit(2)
	}
	var report string
	switch os.Args[1] {
	case "inotify":
		report = inotify()
	case "procs":
		n, err := strconv.Atoi(os.Args[2])
		if err != nil || len(os.Args) < 4 {
			fmt.Fprintln(os.Stderr, "hostile procs N OUT")
			os.Exit(2)
		}
		report = procs(n)
	default:
		fmt.Fprintf(os.Stderr, "hostile: no %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[len(os.Args)-1], []byte(report+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	for {
		time.Sleep(time.Hour)
	}
}

// inotify takes instances until the kernel refuses one, then watches on
// the first until it refuses one.
func inotify() string {
	var fds []int
	var refused error
	for range 100000 {
		fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
		if err != nil {
			refused = err
			break
		}
		fds = append(fds, fd)
	}
	if len(fds) == 0 {
		return fmt.Sprintf("done instances=0 instance_error=%q", errText(refused))
	}
	// A path whose inode is watched already (a hard link) gets its watch
	// again: only new watch descriptors count.
	wds := map[int]bool{}
	var stopped error
	filepath.WalkDir("/usr", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		wd, err := syscall.InotifyAddWatch(fds[0], p, syscall.IN_MODIFY)
		if err != nil {
			if err == syscall.ENOSPC {
				stopped = err
				return filepath.SkipAll
			}
			return nil
		}
		wds[wd] = true
		return nil
	})
	return fmt.Sprintf("done instances=%d instance_error=%q watches=%d watch_error=%q", len(fds), errText(refused), len(wds), errText(stopped))
}

// procs starts n sleeps, counting those the kernel refused.
func procs(n int) string {
	started, refused := 0, 0
	var last error
	for range n {
		_, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "3600"}, &syscall.ProcAttr{Files: []uintptr{0, 1, 2}})
		if err != nil {
			refused++
			last = err
			continue
		}
		started++
	}
	return fmt.Sprintf("done started=%d refused=%d error=%q", started, refused, errText(last))
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
