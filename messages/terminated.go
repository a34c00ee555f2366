package messages

// TerminatedNote ends a workspace: written by the caller on the workspace's
// record; the workspace is then removed from the host.
type TerminatedNote struct {
	Version int    `json:"-" ocx:"version"`
	Login   string `json:"login" why:"the note names the agent login of its workspace"`
	Project string `json:"project" why:"the note names the project of its workspace"`
	Reason  string `json:"reason,omitempty"`
}

// NoteKind is "terminated".
func (*TerminatedNote) NoteKind() NoteKind { return KindTerminated }

func (n *TerminatedNote) version() int { return n.Version }

// Key is the workspace it ends.
func (n *TerminatedNote) Key() WorkspaceKey { return WorkspaceKey{Login: n.Login, Project: n.Project} }

// Validate checks the names and the reason.
func (n *TerminatedNote) Validate() error {
	if err := checkHeader(n.Version, n.Login, n.Project); err != nil {
		return err
	}
	return CheckText("reason", n.Reason, false, MaxTextLen)
}

// Encode renders the canonical block.
func (n *TerminatedNote) Encode() ([]byte, error) { return encodeChecked(n) }

// String renders the note on one line.
func (n *TerminatedNote) String() string {
	return Render(KindTerminated).version(n.Version).Word(n.Login+"/"+n.Project).Text("reason", n.Reason).String()
}
