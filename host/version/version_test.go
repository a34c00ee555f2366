package version

import (
	"strings"
	"testing"
	"time"
)

// TestLineParses: the line a build prints reads back as what it said, and
// an unstamped build says dev.
func TestLineParses(t *testing.T) {
	got, err := Parse(Line("ocxd"))
	if err != nil {
		t.Fatal(err)
	}
	if got != (Info{Program: "ocxd", Version: Dev, Checkin: Dev}) || got.Stamped() {
		t.Fatalf("an unstamped build reads as %+v", got)
	}
	h := strings.Repeat("ab", 32)
	in := Info{Program: "workspace", Version: "v0.0.0-20261201100000-abababababab", Checkin: h}
	if got, err := Parse(in.String() + "\n"); err != nil || got != in || !got.Stamped() {
		t.Fatalf("%q reads as %+v, %v", in, got, err)
	}
}

// TestParseRefuses: anything but the five words is not a version line.
func TestParseRefuses(t *testing.T) {
	for _, l := range []string{
		"", "ocx", "ocx version dev", "ocx version dev checkin", "ocx version dev checkin dev extra",
		"ocx  version dev checkin dev", "ocx release dev checkin dev", "ocx version dev commit dev",
		"ocx version dev checkin dev\n\n", "ocx version\tdev checkin dev", "99",
	} {
		if i, err := Parse(l); err == nil {
			t.Errorf("%q read as %+v", l, i)
		}
	}
}

func TestLDFlags(t *testing.T) {
	want := "-X github.com/ocx-go/ocx/host/version.Version=v1 -X github.com/ocx-go/ocx/host/version.Checkin=abc"
	if got := LDFlags("v1", "abc"); got != want {
		t.Fatalf("LDFlags: %q", got)
	}
}

func TestPseudo(t *testing.T) {
	when := time.Date(2026, 12, 1, 10, 0, 5, 0, time.FixedZone("x", 3600))
	if got := Pseudo(when, strings.Repeat("3f", 20)); got != "v0.0.0-20261201090005-3f3f3f3f3f3f" {
		t.Fatalf("Pseudo: %q", got)
	}
}
