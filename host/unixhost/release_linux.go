package unixhost

import (
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
	if dir == "" {
		return out
	}
	for _, r := range messages.Runners {
		st, err := os.Stat(filepath.Join(dir, host.RunnerPrefix+r))
		if err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			out = append(out, r)
		}
	}
	return out
}
