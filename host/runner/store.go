package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/ocx-go/ocx/host/unixhost"
)

// maxConversationLen bounds a stored conversation.
const maxConversationLen = 64 << 20

// Conversation is what a runner keeps from one turn to the next: how many
// turns it has had and its own state (the native runner's messages, an
// agent CLI's session id), which the store keeps as it is.
type Conversation struct {
	Turns int             `json:"turns"`
	State json.RawMessage `json:"state"`
}

// store keeps each conversation of one runner in the session's directory,
// at OCX_SESSION_DIR/conversations/RUNNER/SESSION.json, SESSION the
// session's own record. A write replaces the file whole (a temporary file
// renamed over it), following no symbolic link; a file that does not read
// back is an error naming it, never a new conversation.
type store struct {
	root   *unixhost.Root
	dir    string
	runner string
}

// OpenStore opens the store of the runner named runner (native, claude,
// codex) in the session's directory, which must exist.
func OpenStore(sessionDir, runner string) (*store, error) {
	if err := checkName("runner", runner); err != nil {
		return nil, err
	}
	if sessionDir == "" {
		return nil, fmt.Errorf("no session directory ($%s is not set)", envSessionDir)
	}
	root, err := unixhost.OpenRoot(sessionDir)
	if err != nil {
		return nil, fmt.Errorf("the session's directory: %w", err)
	}
	return &store{root: root, dir: filepath.Join(root.Path(), "conversations", runner), runner: runner}, nil
}

// Close releases the store.
func (s *store) Close() error { return s.root.Close() }

// Path is the file that holds the conversation of session.
func (s *store) Path(session string) (string, error) {
	if err := checkName("session", session); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, session+".json"), nil
}

// storedConversation is the file's shape.
type storedConversation struct {
	OCX     string          `json:"ocx"`
	Runner  string          `json:"runner"`
	Session string          `json:"session"`
	Turns   int             `json:"turns"`
	State   json.RawMessage `json:"state"`
}

const conversationKind = "conversation"

// Load reads the conversation of session: nil and no error when there is
// none yet (the session's first turn).
func (s *store) Load(session string) (*Conversation, error) {
	p, err := s.Path(session)
	if err != nil {
		return nil, err
	}
	b, err := s.root.ReadFile(p, maxConversationLen)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the conversation: %w", err)
	}
	c, err := s.decode(session, b)
	if err != nil {
		return nil, fmt.Errorf("the conversation %s is corrupt (%v); move it away to start a new one", p, err)
	}
	return c, nil
}

func (s *store) decode(session string, b []byte) (*Conversation, error) {
	if len(b) > maxConversationLen {
		return nil, fmt.Errorf("it is longer than %d bytes", maxConversationLen)
	}
	var sc storedConversation
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("it holds more than one JSON value")
	}
	switch {
	case sc.OCX != conversationKind:
		return nil, fmt.Errorf("its \"ocx\" is %q, not %q", sc.OCX, conversationKind)
	case sc.Runner != s.runner:
		return nil, fmt.Errorf("it is runner %q's, not %q's", sc.Runner, s.runner)
	case sc.Session != session:
		return nil, fmt.Errorf("it is session %q's, not %q's", sc.Session, session)
	case sc.Turns < 1:
		return nil, fmt.Errorf("it has %d turns", sc.Turns)
	case len(sc.State) == 0 || !json.Valid(sc.State):
		return nil, errors.New("it has no state")
	}
	return &Conversation{Turns: sc.Turns, State: sc.State}, nil
}

// Save replaces the conversation of session with c.
func (s *store) Save(session string, c *Conversation) error {
	p, err := s.Path(session)
	if err != nil {
		return err
	}
	if c == nil || c.Turns < 1 || !json.Valid(c.State) {
		return errors.New("save the conversation: it has no turn or no state")
	}
	b, err := json.Marshal(storedConversation{OCX: conversationKind, Runner: s.runner, Session: session, Turns: c.Turns, State: c.State})
	if err != nil {
		return fmt.Errorf("save the conversation: %w", err)
	}
	if len(b) > maxConversationLen {
		return fmt.Errorf("save the conversation: it is longer than %d bytes", maxConversationLen)
	}
	if err := s.root.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("save the conversation: %w", err)
	}
	if err := s.root.WriteFile(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save the conversation: %w", err)
	}
	return nil
}

// checkName refuses a name that could not be one path component: only
// letters, digits, '-' and '_', 1 to 100 of them.
func checkName(what, name string) error {
	if name == "" || len(name) > 100 {
		return fmt.Errorf("the %s %q is not a name of 1 to 100 characters", what, name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
		if !ok {
			return fmt.Errorf("the %s %q holds %q: only letters, digits, '-' and '_'", what, name, r)
		}
	}
	return nil
}
