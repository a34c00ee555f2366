package messages

import (
	"fmt"
	"path"
	"strings"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// WorkspaceDefinition is the first entry on a workspace's record (seed 000): the
// agent login, the project, the branch its tree is on, and its whole sandbox.
// A definition without a sandbox is refused, never read as an older form.
type WorkspaceDefinition struct {
	Version int     `json:"-" ocx:"version"`
	Login   string  `json:"login" why:"a workspace definition names its agent login"`
	Project string  `json:"project" why:"a workspace definition names its project"`
	Branch  string  `json:"branch" why:"a workspace definition names the branch of its tree"`
	Sandbox Sandbox `json:"sandbox" ocx:"closed" why:"a workspace definition states its whole sandbox; one without is refused, not read as an older form"`
}

// Sandbox is what a session of the workspace sees, stated whole on the record;
// the host builds bwrap from it and nothing else. All five fields are required.
// What is the same for every workspace (/proc, /dev, /tmp, the workspace as
// HOME) and the program a session runs are not stated here (seed 000).
type Sandbox struct {
	// Network says whether the session shares the host's network.
	Network bool `json:"network" why:"a sandbox says whether it shares the host's network"`
	// ReadOnly are host paths it sees read-only, each where it is on the host.
	ReadOnly []string `json:"read_only" why:"a sandbox states every list, even an empty one"`
	// ReadWrite are host paths it sees read-write, each where it is on the host.
	ReadWrite []string `json:"read_write" why:"a sandbox states every list, even an empty one"`
	// Homes are host paths it sees read-write inside the workspace, each by its
	// last name (/root/.claude as WORKSPACE/.claude); so no two share a last name.
	Homes []string `json:"homes" why:"a sandbox states every list, even an empty one"`
	// Path are the directories of the session's PATH, in order; none holds ':'.
	Path []string `json:"path" why:"a sandbox states every list, even an empty one"`
}

// NoteKind is "workspace".
func (*WorkspaceDefinition) NoteKind() NoteKind { return KindWorkspace }

func (n *WorkspaceDefinition) version() int { return n.Version }

// Key is the workspace the definition defines.
func (d *WorkspaceDefinition) Key() WorkspaceKey {
	return WorkspaceKey{Login: d.Login, Project: d.Project}
}

// Validate checks the names, the branch and every path of the sandbox.
func (d *WorkspaceDefinition) Validate() error {
	if err := checkVersion(d.Version); err != nil {
		return err
	}
	if err := CheckLogin("login", d.Login); err != nil {
		return err
	}
	if err := CheckProject("project", d.Project); err != nil {
		return err
	}
	if err := CheckBranch("branch", d.Branch); err != nil {
		return err
	}
	return d.Sandbox.validate("sandbox")
}

// Validate checks every path of the sandbox.
func (s *Sandbox) Validate() error { return s.validate("sandbox") }

func (s *Sandbox) validate(field string) error {
	lists := []struct {
		key   string
		paths []string
	}{{"read_only", s.ReadOnly}, {"read_write", s.ReadWrite}, {"homes", s.Homes}, {"path", s.Path}}
	for _, l := range lists {
		f := strictjson.JoinField(field, l.key)
		for i, p := range l.paths {
			if err := CheckAbsPath(strictjson.IndexField(f, i), p); err != nil {
				return err
			}
		}
	}
	names := make(map[string]int, len(s.Homes))
	for i, h := range s.Homes {
		f := strictjson.IndexField(strictjson.JoinField(field, "homes"), i)
		if h == "/" {
			return strictjson.FieldErr(f, strictjson.ErrInvalid, `"/" has no last name to appear under in the workspace`)
		}
		base := path.Base(h)
		if j, dup := names[base]; dup {
			return strictjson.FieldErr(f, strictjson.ErrInvalid, fmt.Sprintf("%s has the last name %q, as homes[%d] does; both would appear at the same place in the workspace", strictjson.QuoteShort(h), base, j))
		}
		names[base] = i
	}
	for i, p := range s.Path {
		if strings.ContainsRune(p, ':') {
			return strictjson.FieldErr(strictjson.IndexField(strictjson.JoinField(field, "path"), i), strictjson.ErrInvalid, fmt.Sprintf("%s holds ':', which separates PATH's entries", strictjson.QuoteShort(p)))
		}
	}
	return nil
}

// Encode renders the canonical block. Nil lists are written as [], since the
// sandbox states every list.
func (d *WorkspaceDefinition) Encode() ([]byte, error) {
	c := *d
	c.Sandbox = c.Sandbox.filled()
	if err := c.Validate(); err != nil {
		return nil, strictjson.At(KindWorkspace.where(), err)
	}
	return encodeNote(KindWorkspace, c.Version, c)
}

func (s Sandbox) filled() Sandbox {
	s.ReadOnly = nonNil(s.ReadOnly)
	s.ReadWrite = nonNil(s.ReadWrite)
	s.Homes = nonNil(s.Homes)
	s.Path = nonNil(s.Path)
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// String renders the definition on one line.
func (d *WorkspaceDefinition) String() string {
	l := Render(KindWorkspace).version(d.Version).Word(d.Login+"/"+d.Project).KV("branch", d.Branch)
	d.Sandbox.render(l)
	return l.String()
}

// String renders the sandbox on one line.
func (s Sandbox) String() string {
	l := Render("sandbox")
	s.render(l)
	return l.String()
}

func (s Sandbox) render(l *rendering) {
	l.Flag("network", s.Network).List("read_only", s.ReadOnly).List("read_write", s.ReadWrite).
		List("homes", s.Homes).List("path", s.Path)
}

// DecodeSandbox reads a sandbox object on its own (a workspace template's,
// a --sandbox file's) as strictly as inside a workspace definition: every
// key known, every list stated, each path checked; errors name the field
// under "sandbox".
func DecodeSandbox(data []byte) (Sandbox, error) {
	const where = "sandbox"
	v, err := strictjson.Parse(data, strictjson.MaxNoteLen)
	if err != nil {
		return Sandbox{}, strictjson.At(where, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Sandbox{}, &strictjson.FieldError{Where: where, Problem: "is " + strictjson.JSONType(v) + "; a sandbox is a JSON object", Err: strictjson.ErrInvalid}
	}
	var wrap struct {
		Sandbox Sandbox `json:"sandbox" ocx:"closed" why:"a sandbox"`
	}
	if err := Fill(strictjson.Obj{Map: map[string]any{"sandbox": m}}, &wrap); err != nil {
		return Sandbox{}, strictjson.At(where, err)
	}
	if err := wrap.Sandbox.Validate(); err != nil {
		return Sandbox{}, strictjson.At(where, err)
	}
	return wrap.Sandbox, nil
}
