package unixhost

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages/protocol"
)

// WriteSpawned keeps s in its workspace's SpawnedDir (D76), atomically:
// the daemon spawned a session for s.Launch, and its end note is not on
// the record yet.
func WriteSpawned(root *Root, ws host.Workspace, s protocol.Spawned) error {
	if s.Workspace != ws.Key {
		return fmt.Errorf("unixhost: spawned record of %s kept in workspace %s", s.Workspace, ws.Key)
	}
	b, err := s.Encode()
	if err != nil {
		return err
	}
	p, err := ws.SpawnedFile(s.Launch)
	if err != nil {
		return err
	}
	if err := root.MkdirAll(ws.SpawnedDir(), 0o700); err != nil {
		return err
	}
	return root.WriteFile(p, b, 0o600)
}

// ForgetSpawned removes launch's spawned record from ws, once its end note
// is on the record; none there is no error.
func ForgetSpawned(root *Root, ws host.Workspace, launch string) error {
	p, err := ws.SpawnedFile(launch)
	if err != nil {
		return err
	}
	return root.Remove(p)
}

// ReadSpawned lists the spawned records of ws, in the order of their
// names: none when its SpawnedDir is not there. A file that does not read
// as the record of its name's launch in ws (planted, cut short) is passed
// over, each with why in bad, and left where it is.
func ReadSpawned(root *Root, ws host.Workspace) (out []protocol.Spawned, bad []error, err error) {
	entries, err := root.ReadDir(ws.SpawnedDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		p, err := ws.SpawnedFile(e.Name())
		if err != nil {
			bad = append(bad, fmt.Errorf("%s/%s: %w", ws.SpawnedDir(), e.Name(), err))
			continue
		}
		b, err := root.ReadFile(p, SmallFile)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		s, err := protocol.DecodeSpawned(b)
		if err == nil && (s.Launch != e.Name() || s.Workspace != ws.Key) {
			err = fmt.Errorf("it names launch %s of %s", s.Launch, s.Workspace)
		}
		if err != nil {
			bad = append(bad, fmt.Errorf("%s: %w", p, err))
			continue
		}
		out = append(out, s)
	}
	return out, bad, nil
}
