package runhold

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/host/unixhost"
)

// runNameLen is how much of a run's hash names its holder's files: a
// socket's path has at most 108 bytes, and a hash may have 64.
const runNameLen = 16

// RunFilesBase is the path, without its suffix, of the files of the
// holder ocxd starts for run hash in careDir (AGENTS/ocxd.runs): .sock,
// .status, .stdout.log, .stderr.log, .holder.log.
func RunFilesBase(careDir, hash string) string {
	if len(hash) > runNameLen {
		hash = hash[:runNameLen]
	}
	return filepath.Join(careDir, hash)
}

// RunSocket finds the socket of the terminal of the run in careDir's care
// whose hash begins with run (`ocx attach RUN`).
func RunSocket(careDir, run string) (string, error) {
	if run == "" || strings.Trim(strings.ToLower(run), "0123456789abcdef") != "" {
		return "", fmt.Errorf("runhold: %q is not a run's hash", run)
	}
	entries, err := unixhost.Below(careDir).ReadDir(careDir)
	if err != nil {
		return "", fmt.Errorf("runhold: the runs in care: %w", err)
	}
	var found []string
	for _, d := range entries {
		h, ok := strings.CutSuffix(d.Name(), ".json")
		if ok && !strings.Contains(h, ".") && strings.HasPrefix(h, strings.ToLower(run)) {
			found = append(found, h)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("runhold: no run %s is in the node's care (%s)", run, careDir)
	case 1:
		return RunFilesBase(careDir, found[0]) + ".sock", nil
	}
	return "", fmt.Errorf("runhold: %d runs in care begin with %s", len(found), run)
}
