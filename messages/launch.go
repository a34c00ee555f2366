package messages

import (
	"fmt"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// The releases a launch may ask for (seed 000: restart on the current or the
// previous release).
const (
	ReleaseCurrent  = "current"
	ReleasePrevious = "previous"
)

// LaunchNote asks the daemon to start a session: written by the caller on the
// session's own record, or by the node user for a CI launch, and handed to the
// daemon as a post line.
type LaunchNote struct {
	Version int    `json:"-" ocx:"version"`
	Login   string `json:"login" why:"the note names the agent login of its workspace"`
	Project string `json:"project" why:"the note names the project of its workspace"`
	// Workspace is the hash of the post holding the workspace definition.
	Workspace string `json:"workspace" why:"a launch names the post holding its workspace definition"`
	// Session is the hash of the post holding the session definition.
	Session string `json:"session" why:"a launch names the post holding its session definition"`
	// Release is the release to run: "current" (the default when the key is
	// left out) or "previous".
	Release string `json:"release"`
	// Checkin is, for a CI launch, the check-in to test.
	Checkin string `json:"checkin,omitempty"`
}

// NoteKind is "launch".
func (*LaunchNote) NoteKind() NoteKind { return KindLaunch }

func (n *LaunchNote) version() int { return n.Version }

// Key is the workspace the launch is for.
func (n *LaunchNote) Key() WorkspaceKey { return WorkspaceKey{Login: n.Login, Project: n.Project} }

// Validate checks the names, the hashes and the release.
func (n *LaunchNote) Validate() error {
	if err := checkHeader(n.Version, n.Login, n.Project); err != nil {
		return err
	}
	if err := CheckHash("workspace", n.Workspace); err != nil {
		return err
	}
	if err := CheckHash("session", n.Session); err != nil {
		return err
	}
	if err := checkRelease("release", n.Release); err != nil {
		return err
	}
	return checkOptHash("checkin", n.Checkin)
}

func checkRelease(field, r string) error {
	switch r {
	case ReleaseCurrent, ReleasePrevious:
		return nil
	case "":
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty; it is current or previous")
	}
	return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a release to launch on (current, previous)", strictjson.QuoteShort(r)))
}

// Encode renders the canonical block; it always writes the release.
func (n *LaunchNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *LaunchNote) String() string {
	return Render(KindLaunch).version(n.Version).Word(n.Login+"/"+n.Project).KV("workspace", n.Workspace).
		KV("session", n.Session).KV("release", n.Release).OptKV("checkin", n.Checkin).String()
}

// Decoded gives a launch that names no release the current one.
func (n *LaunchNote) Decoded(strictjson.Obj) error {
	if n.Release == "" {
		n.Release = ReleaseCurrent
	}
	return nil
}
