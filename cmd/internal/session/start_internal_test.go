package session

import (
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// TestNamedRefusal (issue 10, item 7): a session starts only when no process
// but itself names its workspace and the table left nothing unknown; an
// unknown answer refuses, as the daemon's does, naming the processes.
func TestNamedRefusal(t *testing.T) {
	k := messages.WorkspaceKey{Login: "agent-1", Project: "demo"}
	self := 100
	other := host.Process{ID: protocol.ProcID{PID: 200, Start: 9}, Argv: []string{"workspace", "serve", "agent-1/demo"}}
	tab := host.Table{Procs: []host.Process{other}}
	for _, c := range []struct {
		name string
		v    host.Verdict
		want []string // nil: no refusal
	}{
		{"nobody", host.Verdict{Key: k, Named: host.No}, nil},
		{"itself only", host.Verdict{Key: k, Named: host.Yes, By: []protocol.ProcID{{PID: self, Start: 1}}}, nil},
		{"another", host.Verdict{Key: k, Named: host.Yes, By: []protocol.ProcID{{PID: self, Start: 1}, other.ID}}, []string{"in use", "200 (workspace serve agent-1/demo)"}},
		{"unknown", host.Verdict{Key: k, Named: host.Unknown, Unsure: []int{300}}, []string{"cannot tell", "300", "no session starts"}},
		{"unknown only for itself", host.Verdict{Key: k, Named: host.Unknown, Unsure: []int{self}}, nil},
	} {
		err := namedRefusal(tab, c.v, self)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: not refused", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}
