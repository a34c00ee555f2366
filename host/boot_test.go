package host

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestParseBootTime(t *testing.T) {
	b, err := os.ReadFile("testdata/proc/proc-stat.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseBootTime(b)
	if err != nil || !got.Equal(time.Unix(1796113847, 0)) {
		t.Fatalf("boot time %v %v", got, err)
	}
	for _, bad := range []string{"", "cpu 1 2 3\n", "btime x\n", "btime -4\n"} {
		if _, err := ParseBootTime([]byte(bad)); !errors.Is(err, errNoBootTime) {
			t.Errorf("%q: %v, want ErrNoBootTime", bad, err)
		}
	}
}
