package nodestatus

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
)

// The status's look-alikes are bounded (D78): each process by the first
// few workspaces it claims, with how many in all, whole or not at all, by
// PID, a hundred entries at most, and the processes left out counted. A
// process naming 20,000 workspaces costs the document a few lines.
func TestLookAlikesBounded(t *testing.T) {
	var tab host.Table
	claiming := func(pid, n int) host.LookAlike {
		l := host.LookAlike{Process: host.Process{ID: protocol.ProcID{PID: pid, Start: 9}, Argv: []string{"bwrap"}}, Why: "it names many"}
		for i := range n {
			l.Argv = append(l.Argv, "--bind", "/agents/u"+strconv.Itoa(i)+"/projects/p", "/x")
			l.Names = append(l.Names, host.Naming{Verb: host.VerbBind, Key: messages.WorkspaceKey{Login: "u" + strconv.Itoa(i), Project: "p"}})
		}
		return l
	}
	for pid := 200; pid > 50; pid-- { // 150 processes, listed by PID
		n := 1
		if pid%2 == 0 {
			n = 20000
		}
		tab.LookAlikes = append(tab.LookAlikes, claiming(pid, n))
	}
	out, leftOut := lookAlikes(tab)
	if len(out) > messages.MaxLookAlikes || len(out) < messages.MaxLookAlikes-messages.MaxLookAlikeClaims {
		t.Fatalf("%d entries; want at most %d, and no room left for another process", len(out), messages.MaxLookAlikes)
	}
	per := map[int]int{}
	last := 0
	for _, l := range out {
		per[l.PID]++
		if l.PID < last {
			t.Fatalf("entries not by PID: %d after %d", l.PID, last)
		}
		last = l.PID
		if want := map[bool]int{true: 20000, false: 0}[l.PID%2 == 0]; l.Claims != want {
			t.Errorf("pid %d: claims %d, want %d", l.PID, l.Claims, want)
		}
		if len(l.Command) > 256 {
			t.Errorf("pid %d: a command of %d bytes", l.PID, len(l.Command))
		}
	}
	for pid, n := range per {
		if want := map[bool]int{true: messages.MaxLookAlikeClaims, false: 1}[pid%2 == 0]; n != want {
			t.Errorf("pid %d: %d entries, want %d", pid, n, want)
		}
	}
	if len(per)+leftOut != 150 || out[0].PID != 51 {
		t.Errorf("%d processes listed, %d left out, the first %d; want 150 in all, from 51", len(per), leftOut, out[0].PID)
	}
	st := &messages.NodeState{LookAlikes: out, LookAlikesLeftOut: leftOut}
	doc, err := st.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(doc) > 64<<10 {
		t.Errorf("the state document is %d bytes", len(doc))
	}
	if !strings.Contains(string(doc), `"look_alikes_left_out": `+strconv.Itoa(leftOut)) {
		t.Errorf("the document does not count the processes left out")
	}
	if out, leftOut := lookAlikes(host.Table{}); out != nil || leftOut != 0 {
		t.Errorf("no look-alike: %v, %d", out, leftOut)
	}
}
