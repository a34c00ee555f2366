package unixhost

import (
	"context"
	"errors"
	"io/fs"
	"os/exec"
	"testing"

	"github.com/ocx-go/ocx/messages/protocol"
)

// ReapIfChild reaps an ended child, and leaves alone a running one, one
// that is not a child, and the PIDs that would name any child.
func TestReapIfChild(t *testing.T) {
	done := exec.Command("/bin/true")
	if err := done.Start(); err != nil {
		t.Fatal(err)
	}
	running := exec.Command("/bin/sleep", "600")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { running.Process.Kill(); running.Wait() })
	st, err := ReadStat(done.Process.Pid) // a child not reaped: its PID is its own
	if err != nil {
		t.Fatal(err)
	}
	id := protocol.ProcID{PID: done.Process.Pid, Start: st.Start}
	if err := WaitGone(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	ReapIfChild(0)
	ReapIfChild(-1)
	if st, err := ReadStat(done.Process.Pid); err != nil || !st.Zombie() {
		t.Fatalf("the ended child before ReapIfChild: %+v, %v (want a zombie: 0 and -1 reaped nothing)", st, err)
	}
	ReapIfChild(done.Process.Pid)
	if _, err := ReadStat(done.Process.Pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the ended child is still there: %v", err)
	}
	ReapIfChild(running.Process.Pid)
	ReapIfChild(1)
	if st, err := ReadStat(running.Process.Pid); err != nil || st.Zombie() {
		t.Errorf("the running child: %+v, %v", st, err)
	}
}
