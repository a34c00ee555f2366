package procs

import "testing"

func TestReleases(t *testing.T) {
	dev := &Releases{self: "/home/dev/ocx/bin"}
	if d, err := dev.Dir("current"); err != nil || d != "/home/dev/ocx/bin" {
		t.Errorf("a developer build's current: %q %v", d, err)
	}
	if _, err := dev.Dir("previous"); err == nil {
		t.Errorf("a developer build has a previous release")
	}
	if got := dev.Name("/home/dev/ocx/bin"); got != "/home/dev/ocx/bin" {
		t.Errorf("a developer build's release is named %q", got)
	}
	rel := &Releases{root: "/var/lib/ocx/release"}
	if got := rel.Name("/var/lib/ocx/release/releases/2026-11-30.1"); got != "2026-11-30.1" {
		t.Errorf("a release is named %q", got)
	}
	if got := rel.Name(""); got != "unknown" {
		t.Errorf("no release dir is named %q", got)
	}
}
