package runengine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// A holder's status file is the exit of its run's process: a code, a
// signal (128 and N), or unknown when there is none (a holder killed
// outright writes none).
func TestHolderExit(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		text string
		want protocol.RunProcessExited
	}{
		{`{"exit":3}`, protocol.RunProcessExited{Proc: 2, Status: messages.Exited(3)}},
		{`{"exit":143,"signal":"SIGTERM"}`, protocol.RunProcessExited{Proc: 2, Status: messages.Signaled(15)}},
		{`{"exit":127,"error":"no such program"}`, protocol.RunProcessExited{Proc: 2, Status: messages.Exited(127)}},
		{"", protocol.RunProcessExited{Proc: 2, Status: messages.ExitUnknown}},
		{`{"exit":1,"what":1}`, protocol.RunProcessExited{Proc: 2, Status: messages.ExitUnknown}},
	} {
		p := filepath.Join(dir, "x.status")
		os.Remove(p)
		if c.text != "" {
			if err := os.WriteFile(p, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := holderExit(2, p); got != c.want {
			t.Errorf("%q: %+v, want %+v", c.text, got, c.want)
		}
	}
}
