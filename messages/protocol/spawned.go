package protocol

import (
	"encoding/json"
	"path/filepath"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// Spawned is what the node keeps of a session the daemon spawned until its
// end note is on the record (D76), in the workspace's held directory, out
// of every sandbox's reach (host.Workspace.SpawnedFile): the workspace,
// the launch note it serves, its process (the daemon's child, as the
// session's end note names it) and the release directory it runs. A daemon that starts finds each one left:
// one whose process runs no more ended while no daemon ran, and its end is
// written then.
type Spawned struct {
	Workspace messages.WorkspaceKey `json:"workspace"`
	Launch    string                `json:"launch"`
	Proc      ProcID                `json:"proc"`
	// Release is the directory of the release the session runs, links
	// followed (LaunchSpec.ReleaseDir): what its end note names.
	Release string `json:"release,omitempty"`
}

// Validate checks every field.
func (s Spawned) Validate() error {
	if err := s.Workspace.Validate(); err != nil {
		return strictjson.At("workspace", err)
	}
	if err := messages.CheckHash("launch", s.Launch); err != nil {
		return err
	}
	if err := s.Proc.Validate(); err != nil {
		return strictjson.At("proc", err)
	}
	if s.Release != "" && (!filepath.IsAbs(s.Release) || filepath.Clean(s.Release) != s.Release) {
		return strictjson.FieldErr("release", strictjson.ErrInvalid, strictjson.QuoteShort(s.Release)+" is not a clean absolute path")
	}
	return messages.CheckLine("release", s.Release, false, messages.MaxTextLen)
}

// Encode is the file's content: one JSON object and a newline.
func (s Spawned) Encode() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, strictjson.At("spawned", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// maxSpawnedLen bounds a spawned record: one short line.
const maxSpawnedLen = 4 << 10

// DecodeSpawned reads a file Encode wrote, every field checked. A key it
// does not know is passed over (a file a newer daemon wrote still reads);
// a key twice, or anything after the object, is refused.
func DecodeSpawned(b []byte) (Spawned, error) {
	if _, err := strictjson.Parse(b, maxSpawnedLen); err != nil {
		return Spawned{}, strictjson.At("spawned", err)
	}
	var s Spawned
	if err := json.Unmarshal(b, &s); err != nil {
		return Spawned{}, strictjson.FieldErr("spawned", strictjson.ErrInvalid, err.Error())
	}
	if err := s.Validate(); err != nil {
		return Spawned{}, strictjson.At("spawned", err)
	}
	return s, nil
}

func (s Spawned) String() string {
	return "spawned " + daemonShort(s.Launch) + " of " + s.Workspace.String() + " pid " + s.Proc.String()
}
