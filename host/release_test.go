package host

import (
	"strings"
	"testing"
)

// TestReleaseRoot: every path of the release root, and the links' targets
// read back as the release they name.
func TestReleaseRoot(t *testing.T) {
	r, err := NewReleaseRoot("/var/lib/ocx/release/")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("3f", 32)
	for got, want := range map[string]string{
		r.Root():         "/var/lib/ocx/release",
		r.Releases():     "/var/lib/ocx/release/releases",
		r.Release(id):    "/var/lib/ocx/release/releases/" + id,
		r.Current():      "/var/lib/ocx/release/current",
		r.Previous():     "/var/lib/ocx/release/previous",
		r.StagedDir():    "/var/lib/ocx/release/staged",
		r.Staged(id):     "/var/lib/ocx/release/staged/" + id,
		r.UndoDir():      "/var/lib/ocx/release/undo",
		r.Undo(id):       "/var/lib/ocx/release/undo/" + id,
		r.Next():         "/var/lib/ocx/release/staged/next",
		RootTarget(id):   "releases/" + id,
		StagedTarget(id): "../releases/" + id,
		NextTarget(id):   id,
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
	for _, target := range []string{RootTarget(id), StagedTarget(id), NextTarget(id)} {
		if got, ok := ReleaseOfTarget(target); !ok || got != id {
			t.Errorf("ReleaseOfTarget(%q) = %q, %v", target, got, ok)
		}
	}
	for _, bad := range []string{"", "/srv/x", "releases/a/b", "../../x", "..", "releases/"} {
		if got, ok := ReleaseOfTarget(bad); ok {
			t.Errorf("ReleaseOfTarget(%q) = %q", bad, got)
		}
	}
	if _, err := NewReleaseRoot("rel"); err == nil {
		t.Error("a relative release root accepted")
	}
}

func TestReleasePrograms(t *testing.T) {
	for _, n := range []string{"ocx", "ocxd", "workspace", "ocx-runner-native", "ocx-runner-claude", "ocx-hook"} {
		if !IsReleaseProgram(n) {
			t.Errorf("%s is not a release's program", n)
		}
	}
	for _, n := range []string{"", "ocx-runner-", "README", "ocx.tmp", "bwrap"} {
		if IsReleaseProgram(n) {
			t.Errorf("%q is a release's program", n)
		}
	}
	if err := ValidateCheckin(strings.Repeat("a", 40)); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"dev", "test", strings.Repeat("A", 40), strings.Repeat("a", 12)} {
		if ValidateCheckin(bad) == nil {
			t.Errorf("%q accepted as a release's name", bad)
		}
	}
}
