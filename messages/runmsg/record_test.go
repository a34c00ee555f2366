package runmsg

import (
	"errors"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/strictjson"
)

func TestTaskRecordRoundTrip(t *testing.T) {
	r := &TaskRecord{User: "claude-91c0de", Node: "ocx", Runner: "claude", Objective: "Keep docs/ in step.",
		Hears: []string{"pat"}, Remote: true, Restrict: Restrict{NoPassword: true, Branch: "docs-sync"},
		Sandbox: DefaultRecordSandbox(true), Budget: Budget{Wall: "2h"}}
	block, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(block), `"ocx": 1,`) || !strings.Contains(string(block), `"checkins": []`) {
		t.Errorf("block:\n%s", block)
	}
	got, err := ReadTaskRecord(append([]byte("Record.\n\n"), block...))
	if err != nil {
		t.Fatal(err)
	}
	if got.User != r.User || got.Restrict != r.Restrict || got.Budget != r.Budget || len(got.Checkins) != 0 {
		t.Errorf("read back %+v", got)
	}
	// A key a reader does not know inside restrict may be a limit: refused.
	bad := strings.Replace(string(block), `"no_password": true`, `"no_password": true, "no_network": true`, 1)
	if _, err := ReadTaskRecord([]byte(bad)); err == nil || !strings.Contains(err.Error(), "restrict.no_network") {
		t.Errorf("unknown restriction: %v", err)
	}
	// So inside sandbox and budget (E9, D83).
	for _, c := range []struct{ from, to, field string }{
		{`"network": true`, `"network": true, "cpus": 2`, "sandbox.cpus"},
		{`"wall": "2h"`, `"wall": "2h", "gpu_hours": 1`, "budget.gpu_hours"},
	} {
		bad := strings.Replace(string(block), c.from, c.to, 1)
		if bad == string(block) {
			t.Fatalf("%q is not in the block:\n%s", c.from, block)
		}
		if _, err := ReadTaskRecord([]byte(bad)); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("unknown %s: %v", c.field, err)
		}
	}
	// Elsewhere it is ignored (E9).
	ok := strings.Replace(string(block), `"ocx": 1,`, `"ocx": 1, "colour": "blue",`, 1)
	if _, err := ReadTaskRecord([]byte(ok)); err != nil {
		t.Errorf("unknown top-level key: %v", err)
	}
	two := strings.Replace(string(block), `"ocx": 1,`, `"ocx": 2,`, 1)
	if _, err := ReadTaskRecord([]byte(two)); !errors.Is(err, strictjson.ErrUnknownVersion) {
		t.Errorf("version 2: %v", err)
	}
}
