package unixhost

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// OfferedRunners lists the runners whose program, ocx-runner-NAME, is an
// executable file in the release directory dir, in the order of
// messages.Runners (E9): what a node offers is what its release holds.
func OfferedRunners(dir string) []string {
	var out []string
	for _, r := range messages.Runners {
		if HasProgram(dir, host.RunnerPrefix+r) {
			out = append(out, r)
		}
	}
	return out
}

// HasProgram says whether the release directory dir holds name as an
// executable file.
func HasProgram(dir, name string) bool {
	if dir == "" {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, name))
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// Exists says whether something is at p, following no link at its end
// and opening nothing: a link, a pipe or a file an agent planted there
// counts, and is not read.
func Exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}
