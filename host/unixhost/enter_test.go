//go:build linux

package unixhost

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSandboxInitRefusesWhatIsNoSandbox: a process whose one child is in
// the node's own user namespace is no sandbox to enter, and one with no
// child has no first process (D100).
func TestSandboxInitRefusesWhatIsNoSandbox(t *testing.T) {
	// sh, and its one child, which reads fd 3 until the test closes it.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command("/bin/sh", "-c", "(read x <&3) & echo forked; wait")
	parent.ExtraFiles = []*os.File{r}
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer func() {
		w.Close()
		parent.Wait()
	}()
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "forked\n" {
		t.Fatalf("the shell's word that it forked: %q %v", l, err)
	}
	if _, err := SandboxInit(parent.Process.Pid); err == nil || !strings.Contains(err.Error(), "is in the node's own user namespace: it is no sandbox") {
		t.Errorf("a child in our user namespace: %v", err)
	}

	lone := exec.Command("/bin/sh", "-c", "read x")
	lin, err := lone.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := lone.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { lin.Close(); lone.Wait() }()
	if _, err := SandboxInit(lone.Process.Pid); err == nil || !strings.Contains(err.Error(), "has 0 children, not one") {
		t.Errorf("a process with no child: %v", err)
	}
}
