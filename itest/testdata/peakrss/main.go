// Command peakrss runs a command and writes on descriptor 3 the most
// resident memory, in bytes, that it and what it waited for used. A test
// cannot take it from its own child's rusage: Linux counts in a child's
// peak the memory of the parent it was forked from, up to its exec, and a
// test binary is large. peakrss is small, so its child's peak is the
// command's.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peakrss COMMAND [ARG...]")
		os.Exit(125)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(125)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		fmt.Fprintf(os.NewFile(3, "peak"), "%d\n", ru.Maxrss<<10)
	}
	os.Exit(code)
}
