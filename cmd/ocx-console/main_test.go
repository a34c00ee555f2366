package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/consolepage"
)

// TestByDaemon: a page read by GET or HEAD is asked of the daemon; a
// form, a git fetch (whatever slashes its path holds), a request with no
// method and one with more variables than a page ask carries are not.
func TestByDaemon(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want bool
	}{
		{[]string{"REQUEST_METHOD=GET", "PATH_INFO=/sessions"}, true},
		{[]string{"REQUEST_METHOD=HEAD", "PATH_INFO=/state"}, true},
		{[]string{"REQUEST_METHOD=GET", "PATH_INFO=/gitlike"}, true},
		{[]string{"REQUEST_METHOD=POST", "PATH_INFO=/sessions"}, false},
		{[]string{"REQUEST_METHOD=GET", "PATH_INFO=/git/info/refs"}, false},
		{[]string{"REQUEST_METHOD=GET", "PATH_INFO=/git"}, false},
		// The console's route trims the slashes: so does the decision.
		{[]string{"REQUEST_METHOD=GET", "PATH_INFO=//git/info/refs"}, false},
		{[]string{"REQUEST_METHOD=GET", "PATH_INFO=/git//info/refs"}, false},
		{[]string{"REQUEST_METHOD=HEAD", "PATH_INFO=git/"}, false},
		{[]string{"REQUEST_METHOD=GET", "PATH_INFO=//sessions//"}, true},
		{[]string{"PATH_INFO=/sessions"}, false},
		{append([]string{"REQUEST_METHOD=GET"}, strings.Split(strings.Repeat("X=1,", 300), ",")...), false},
	} {
		if got := byDaemon(c.env); got != c.want {
			t.Errorf("byDaemon(%.80q) = %v, want %v", c.env, got, c.want)
		}
	}
}

// TestUsage: a call without the agents root, or with more, is refused
// with the usage, before anything is asked.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"--agents", "/srv/agents", "extra"}} {
		var out, errb bytes.Buffer
		if code := run(args, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage: ocx-console --agents AGENTS") || out.Len() != 0 {
			t.Errorf("run(%q) = %d, %q, %q", args, code, out.String(), errb.String())
		}
	}
}

// TestFollowWaitsLessThanThePage: a live log's ask waits for the log to
// grow (consolepage.FollowWait) less than ocx-console waits for the
// daemon's page, or every quiet log would be answered by `ocx console`.
func TestFollowWaitsLessThanThePage(t *testing.T) {
	if consolepage.FollowWait >= pageWait-time.Second {
		t.Errorf("a log's ask waits %s, ocx-console %s for the page", consolepage.FollowWait, pageWait)
	}
}
