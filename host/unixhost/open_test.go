//go:build linux

package unixhost

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenRegular: a clone is opened in place only when it is a regular
// file with one name, reached without a link (issue 22 item 3): a link to
// the node's repository, a link on the path, a pipe (without waiting), a
// directory, a socket and a hard link are each refused, naming why, and
// what they name is neither read nor written.
func TestOpenRegular(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	secret := filepath.Join(outside, "node.fossil")
	if err := os.WriteFile(secret, []byte("the node's repository"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := hostile(t, root, secret)
	hard := filepath.Join(root, "hard")
	if err := os.Link(secret, hard); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(root, "clone")
	if err := os.WriteFile(clone, []byte("the agent's clone"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, flag := range []int{os.O_RDONLY, os.O_RDWR} {
		f, err := r.OpenRegular(clone, flag)
		if err != nil {
			t.Fatalf("the clone itself (flag %d): %v", flag, err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil || string(b) != "the agent's clone" {
			t.Errorf("read the clone: %q %v", b, err)
		}
		for what, why := range map[string]string{
			p["link"]: "a symbolic link", p["through"]: "symbolic link", p["fifo"]: "a named pipe",
			p["dir"]: "a directory", p["socket"]: "a socket", hard: "a file with 2 names (a hard link)",
		} {
			f, err := r.OpenRegular(what, flag)
			if err == nil {
				f.Close()
				t.Errorf("%s (flag %d) was opened", what, flag)
				continue
			}
			ref, ok := AsRefused(err)
			if !ok || !strings.Contains(ref.Why, why) {
				t.Errorf("%s (flag %d): %v; want refused: %s", what, flag, err, why)
			}
		}
	}
	if _, err := r.OpenRegular(filepath.Join(root, "none"), os.O_RDONLY); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := r.OpenRegular(clone, os.O_WRONLY|os.O_CREATE); err == nil {
		t.Errorf("a flag that creates was taken")
	}
	if b, _ := os.ReadFile(secret); string(b) != "the node's repository" {
		t.Errorf("the file outside changed: %q", b)
	}
}
