package pipe

import (
	"strings"
	"testing"
)

func TestRunStartLine(t *testing.T) {
	h := strings.Repeat("ab", 32)
	l := RunStartLine{Repository: "/srv/demo.fossil", Hash: h, By: "admin"}
	b, err := l.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "run start /srv/demo.fossil "+h+" admin\n" {
		t.Fatalf("encoded %q", b)
	}
	got, err := Parse(b)
	if err != nil || got != l {
		t.Fatalf("parsed %v, %v", got, err)
	}
	for _, bad := range []string{"run start /srv/demo.fossil " + h, "run stop /srv/demo.fossil " + h + " admin", "run start demo.fossil " + h + " admin", "run start /srv/demo.fossil abc admin"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
