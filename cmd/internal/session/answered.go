package session

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// maxAnswered bounds WS/session/answered. A hash comes twice when two of the
// node's backoffice runs overlap (D11), seconds apart; the file need only
// outlast that, and a session restarted meanwhile.
const maxAnswered = 1000

// answeredLog is WS/session/answered: the posts this workspace's sessions
// answered (a reply, or a stopped note for a stop request), one full hash a
// line, oldest first, at most maxAnswered. It tells a session that a post
// woken again was answered without reading the record, which only a pull of
// the whole clone could bring up to date.
type answeredLog struct {
	root  *unixhost.Root
	path  string
	order []string
	set   map[string]bool
}

func answeredFile(sessionDir string) string { return filepath.Join(sessionDir, "answered") }

// loadAnswered reads the log; a missing file is an empty log.
func loadAnswered(root *unixhost.Root, path string) (*answeredLog, error) {
	a := &answeredLog{root: root, path: path, set: map[string]bool{}}
	// Twice the most it holds: a file the agent's own turn grew or made a
	// pipe is as good as none, costing at most a second answer.
	data, err := root.ReadFile(path, 2*maxAnswered*65)
	if _, refused := unixhost.AsRefused(err); refused || errors.Is(err, fs.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return a, err
	}
	a.order = parseAnswered(data)
	for _, h := range a.order {
		a.set[h] = true
	}
	return a, nil
}

// parseAnswered reads the log's lines: full hashes, each once, the last
// maxAnswered. A line that is not a full hash is passed over, so a file the
// agent's own turn spoiled costs at most a second answer.
func parseAnswered(data []byte) []string {
	var out []string
	seen := map[string]bool{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		h := string(line)
		if messages.ValidateHash(h) != nil || seen[h] {
			continue
		}
		seen[h] = true
		out = append(out, h)
	}
	if len(out) > maxAnswered {
		out = out[len(out)-maxAnswered:]
	}
	return out
}

func (a *answeredLog) has(h string) bool { return a != nil && a.set[h] }

// add records h and rewrites the file whole (atomically: a reader sees the
// old log or the new), dropping the oldest beyond maxAnswered.
func (a *answeredLog) add(h string) error {
	if a == nil || a.set[h] {
		return nil
	}
	a.set[h] = true
	a.order = append(a.order, h)
	if len(a.order) > maxAnswered {
		for _, old := range a.order[:len(a.order)-maxAnswered] {
			delete(a.set, old)
		}
		a.order = append([]string(nil), a.order[len(a.order)-maxAnswered:]...)
	}
	var b bytes.Buffer
	for _, x := range a.order {
		b.WriteString(x)
		b.WriteByte('\n')
	}
	return a.root.WriteFile(a.path, b.Bytes(), 0o600)
}
