package runhold

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/keptlog"
	"github.com/ocx-go/ocx/host/unixhost"
)

// maxSpec bounds a spec file: a run's command, environment and sandbox,
// whose files' texts are the largest part.
const maxSpec = 16 << 20

// Spec is what a holder starts (--spec): a run's process as the node
// prepared it, every value in place (seed 004, tables 6 to 8). The daemon
// writes it; the holder reads it once, before it starts the command.
type Spec struct {
	Command []string         `json:"command"`
	Env     []string         `json:"env"`
	Dir     string           `json:"dir"`
	Sandbox *host.RunSandbox `json:"sandbox,omitempty"`
	Limits  host.RunLimits   `json:"limits"`
	// Cgroup is the cgroup the command is held in when its limits need
	// one (host.Layout.RunCgroup); the holder's launcher makes it and
	// removes it once the command has ended.
	Cgroup string `json:"cgroup,omitempty"`
	// Input are the lines typed in once the command starts, after the
	// first line (--first-line), each without its newline: the line of
	// the delivery a process was started for (seed 004 §8.1).
	Input []string `json:"input,omitempty"`
	// Keep is the kept logs' filter (D98): the holder keeps the end of
	// each stream as it passes it, masked and matched line by line, so
	// neither its log files nor anything read from them holds what it
	// masks. It holds the run's secrets: the file is the node's alone.
	Keep *keptlog.Spec `json:"keep,omitempty"`
}

// WriteSpec writes s to p atomically, readable by the node's account alone
// (the environment may hold what the run was given).
func WriteSpec(p string, s Spec) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("runhold: spec %s: %w", p, err)
	}
	return unixhost.WriteFileAtomic(p, b, 0o600)
}

// ReadSpec reads a spec file: the holder's, and `ocx run shell`'s, which
// enters the sandbox it names (D100).
func ReadSpec(p string) (Spec, error) {
	b, err := unixhost.Below(filepath.Dir(p)).ReadFile(p, maxSpec)
	if err != nil {
		return Spec{}, fmt.Errorf("runhold: spec: %w", err)
	}
	s, err := decodeSpec(b)
	if err != nil {
		return Spec{}, fmt.Errorf("runhold: spec %s: %w", p, err)
	}
	return s, nil
}

// decodeSpec reads a spec strictly: one object, no key it does not know,
// a command, and an absolute directory.
func decodeSpec(b []byte) (Spec, error) {
	if len(b) > maxSpec {
		return Spec{}, fmt.Errorf("longer than %d bytes", maxSpec)
	}
	var s Spec
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return Spec{}, err
	}
	if _, err := d.Token(); err != io.EOF {
		return Spec{}, errors.New("text after the object")
	}
	switch {
	case len(s.Command) == 0 || s.Command[0] == "":
		return Spec{}, errors.New("no command")
	case s.Dir == "" || s.Dir[0] != '/':
		return Spec{}, fmt.Errorf("dir %q is not an absolute path", s.Dir)
	}
	for i, l := range s.Input {
		if err := checkControl(l); err != nil {
			return Spec{}, fmt.Errorf("input[%d]: %w", i, err)
		}
	}
	if s.Keep != nil {
		if _, err := s.Keep.Filter(); err != nil {
			return Spec{}, fmt.Errorf("keep: %w", err)
		}
	}
	return s, nil
}
