//go:build linux

package unixhost

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

func TestResolve(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "real", "sub"), 0o755)
	os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link"))
	os.Symlink("real/sub", filepath.Join(dir, "rel"))
	os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling"))
	cases := map[string]string{
		filepath.Join(dir, "link", "sub"):              filepath.Join(dir, "real", "sub"),
		filepath.Join(dir, "rel"):                      filepath.Join(dir, "real", "sub"),
		filepath.Join(dir, "link", "missing", "x"):     filepath.Join(dir, "real", "missing", "x"),
		filepath.Join(dir, "real", "..", "link") + "/": filepath.Join(dir, "real"),
	}
	for in, want := range cases {
		got, err := Resolve(in)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"relative", filepath.Join(dir, "dangling"), filepath.Join(dir, "dangling", "x")} {
		if got, err := Resolve(bad); err == nil {
			t.Errorf("Resolve(%q) = %q, want an error", bad, got)
		}
	}
}

// The node-files rule on real paths: a sandbox path that is a link planted
// to a password file, or to the repositories, is refused by what it leads to.
func TestCheckSandboxReal(t *testing.T) {
	s := newSandboxSetup(t)
	repoDir := t.TempDir()
	repo := filepath.Join(repoDir, "demo.fossil")
	os.WriteFile(repo, nil, 0o600)
	links := t.TempDir()
	os.Symlink(s.secret, filepath.Join(links, "innocent"))
	os.Symlink(repoDir, filepath.Join(links, "data"))
	n, err := NodeFilesOf([]string{repo}, s.layout.Root(), s.releaseRoot, s.release, s.ws.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ok := messages.Sandbox{ReadOnly: []string{"/usr", filepath.Join(s.releaseRoot, "current")}, ReadWrite: []string{s.ws.Dir}, Homes: []string{s.home}}
	if err := n.CheckSandbox(ok, Resolve); err != nil {
		t.Fatalf("a sound sandbox was refused: %v", err)
	}
	for _, sb := range []messages.Sandbox{
		{ReadOnly: []string{filepath.Join(links, "innocent")}},
		{ReadWrite: []string{filepath.Join(links, "data")}},
		{Homes: []string{s.layout.Root()}},
		{ReadOnly: []string{s.releaseRoot}},
	} {
		err := n.CheckSandbox(sb, Resolve)
		var re *host.RefusalError
		if !errors.As(err, &re) {
			t.Errorf("%+v: %v, want a refusal", sb, err)
		}
	}
}
