package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunToolUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run"}, 2, "no action given"},
		{[]string{"run", "launch"}, 2, "not an action of ocx run"},
		{[]string{"run", "post"}, 2, "--input FILE or --message JSON, or a pattern"},
		{[]string{"run", "post", "--objective", "x", "--message", "{}"}, 2, "--objective goes with --pattern"},
		{[]string{"run", "patterns", "x"}, 2, "unexpected argument"},
		{[]string{"run", "post", "--input", "x", "--message", "{}"}, 2, "both give the message"},
		{[]string{"run", "stop"}, 2, "want one run's hash"},
		{[]string{"run", "start", "a", "b"}, 2, "want one run's hash"},
		{[]string{"run", "status", "a", "b"}, 2, "at most one run's hash"},
		{[]string{"run", "check", "x"}, 2, "unexpected argument"},
		{[]string{"run", "shell"}, 2, "want one run's hash"},
		{[]string{"run", "shell", "a", "b", "--", "true"}, 2, "want one run's hash"},
		{[]string{"run", "shell", "--json", "a"}, 2, "no answer to give in JSON"},
		{[]string{"run", "enter"}, 2, "started by ocx run shell"},
		{[]string{"run", "enter", "--socket-fd", "1"}, 2, "started by ocx run shell"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}
