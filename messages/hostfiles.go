package messages

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// The two files of the agents root that are JSON (decisions D2): node.json, which
// says what the node is, and a workspace's binding.json, the copy of its
// definition a session reads. They are host files, not notes: they carry
// "ocx": "node" and "ocx": "binding" so a reader can tell them apart, and they are
// read as strictly as a note (duplicate keys, wrong types and unknown versions
// are refused, naming the field).

// NodeConfig is AGENTS/node.json.
type NodeConfig struct {
	// User is the node user: the daemon writes its notes as this login, whose
	// password is AGENTS/USER/password.
	User string `json:"user" why:"node.json names the node user"`
	// Release is the release root (current and previous link to releases/ID/);
	// empty for a developer's build, where the running executable's directory is
	// the release.
	Release string `json:"release,omitempty"`
	// Projects are the repositories of the login group, by project name.
	Projects map[string]NodeProject `json:"projects" why:"node.json lists the node's repositories"`
	// SessionLimits are the limits every session of the node runs under,
	// in a cgroup of its own (D46); each left out has its default (half
	// the host's memory, 4096 processes). nil: the defaults.
	SessionLimits *NodeSessionLimits `json:"session_limits,omitempty" ocx:"closed"`
	// Sandbox is what the node adds to every sandbox it proposes (a
	// workspace's template, create's records): host paths seen read-only,
	// and directories put on PATH after the release's, such as where the
	// agent CLIs a runner drives are installed (D48). nil: nothing.
	Sandbox *NodeSandbox `json:"sandbox,omitempty" ocx:"closed"`
	// ConfinedOnly: the node runs nothing unconfined (seed 004, section
	// 11, row 7; D53): a run without a sandbox is refused. `ocx init
	// --confined-only` writes it.
	ConfinedOnly bool `json:"confined_only,omitempty"`
	// Pull is how a node on another host pulls its projects marked
	// other_host (D72): every Every, and when poked on Listen. nil: every
	// defaultPullEvery, taking no pokes.
	Pull *NodePull `json:"pull,omitempty" ocx:"closed"`
}

// NodePull is node.json's pull.
type NodePull struct {
	// Every is the pull's timer, a Go duration ("2s") from minPullEvery
	// to maxPullEvery; empty: defaultPullEvery.
	Every string `json:"every,omitempty"`
	// Listen is the address (IP:PORT) the daemon takes pokes on: a POST
	// from the server's hook that says only "pull now".
	Listen string `json:"listen,omitempty"`
	// Secret is what each poke carries (Authorization: Bearer SECRET),
	// the server's node.json holding it too (remote_nodes' poke_secret):
	// a poke without it is refused and pulls nothing (D81). Given with
	// Listen, and only then.
	Secret string `json:"secret,omitempty"`
}

// The pull's timer: its default and bounds.
const (
	defaultPullEvery = 2 * time.Second
	minPullEvery     = 100 * time.Millisecond
	maxPullEvery     = time.Hour
)

// PullEvery is the pull's timer.
func (c *NodeConfig) PullEvery() time.Duration {
	if c.Pull == nil || c.Pull.Every == "" {
		return defaultPullEvery
	}
	d, _ := time.ParseDuration(c.Pull.Every) // checked by Validate
	return d
}

// OtherHost says whether any project is served from another host.
func (c *NodeConfig) OtherHost() bool {
	for _, p := range c.Projects {
		if p.OtherHost {
			return true
		}
	}
	return false
}

// validate checks the timer and the address.
func (p *NodePull) validate(field string) error {
	if p.Every != "" {
		d, err := time.ParseDuration(p.Every)
		if err != nil || d < minPullEvery || d > maxPullEvery {
			return strictjson.FieldErr(field+".every", strictjson.ErrInvalid, fmt.Sprintf("%s is not a duration from %s to %s, as \"2s\"", strictjson.QuoteShort(p.Every), minPullEvery, maxPullEvery))
		}
	}
	if p.Listen != "" {
		if err := checkIPPort(field+".listen", p.Listen); err != nil {
			return err
		}
	}
	switch {
	case p.Listen != "" && p.Secret == "":
		return strictjson.FieldErr(field+".secret", strictjson.ErrMissing, "is missing; a node that takes pokes holds the secret each carries, as the server's node.json holds it (`ocx node add --poke` made it)")
	case p.Listen == "" && p.Secret != "":
		return strictjson.FieldErr(field+".secret", strictjson.ErrInvalid, "is given without listen; a secret is for the pokes a node takes")
	case p.Secret != "":
		return CheckPokeSecret(field+".secret", p.Secret)
	}
	return nil
}

// The bounds of a poke's secret.
const (
	MinPokeSecret = 32
	maxPokeSecret = 256
)

// CheckPokeSecret accepts a poke's secret: 32 to 256 letters, digits and
// '-', '_', '.', '~', '+', '/', '=' (hex or base64, as a header carries
// it).
func CheckPokeSecret(field, s string) error {
	if len(s) < MinPokeSecret || len(s) > maxPokeSecret || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~+/=") != "" {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("is not a poke secret: %d to %d letters, digits, '-', '_', '.', '~', '+', '/' or '=' (its %d bytes not shown)", MinPokeSecret, maxPokeSecret, len(s)))
	}
	return nil
}

// CheckRemoteURL accepts the URL of a server a node on another host
// trusts, or of a poke that carries a secret: https, or http on this
// host's loopback alone (127.0.0.0/8, ::1, localhost), where nothing else
// carries the bytes (D81). Over http elsewhere the node user's password
// would go to the server's login in clear, and a forged answer would be
// believed.
func CheckRemoteURL(field, s string) error {
	if err := checkURL(field, s); err != nil {
		return err
	}
	u, _ := url.Parse(s)
	if u.Scheme == "https" || isLoopback(u.Hostname()) {
		return nil
	}
	return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is http on %s, not this host's loopback: a node on another host speaks https (a password and a poke's secret travel there, and what comes back is believed); http only on 127.0.0.1, ::1 or localhost", strictjson.QuoteShort(s), strictjson.QuoteShort(u.Hostname())))
}

// isLoopback says whether host is a loopback address or localhost.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkIPPort accepts IP:PORT, an IP address and a port from 1 to 65535:
// the daemon binds what node.json says, never a name it would look up.
func checkIPPort(field, s string) error {
	host, port, err := net.SplitHostPort(s)
	n, perr := strconv.Atoi(port)
	if err != nil || net.ParseIP(host) == nil || perr != nil || n < 1 || n > 65535 {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not an IP address and a port, as 127.0.0.1:8091", strictjson.QuoteShort(s)))
	}
	return nil
}

// NodeSandbox is node.json's sandbox.
type NodeSandbox struct {
	ReadOnly []string `json:"read_only,omitempty"`
	Path     []string `json:"path,omitempty"`
}

// validate checks each path is absolute and clean.
func (s *NodeSandbox) validate(field string) error {
	for _, l := range []struct {
		name  string
		paths []string
	}{{"read_only", s.ReadOnly}, {"path", s.Path}} {
		for i, p := range l.paths {
			if err := CheckAbsPath(fmt.Sprintf("%s.%s[%d]", field, l.name, i), p); err != nil {
				return err
			}
		}
	}
	return nil
}

// NodeSessionLimits are node.json's session_limits: a session past one is
// ended, its end note saying budget memory or processes (D46).
type NodeSessionLimits struct {
	// Memory is a size: a whole number of bytes, or one and K, M or G
	// ("512M"), as a run's limits.memory, but always a string.
	Memory string `json:"memory,omitempty"`
	// Processes is the most tasks (threads count) the session's processes
	// may be at once; a fork past it fails, and the session is ended.
	Processes *uint64 `json:"processes,omitempty"`
	// Disk is the size of each workspace's own file system (D82), as
	// Memory is written: the node makes it when it adds the workspace,
	// and sizes it again at each launch whose session definition gives
	// no limits.disk. Absent: workspaces have none, and are bounded by
	// the host's file system alone.
	Disk string `json:"disk,omitempty"`
}

// validate checks each limit node.json gives.
func (l *NodeSessionLimits) validate(field string) error {
	if l.Memory != "" {
		n, err := ParseSize(strictjson.JoinField(field, LimitMemory), l.Memory, false)
		if err != nil {
			return err
		}
		if n < minSessionMemory {
			return strictjson.FieldErr(strictjson.JoinField(field, LimitMemory), strictjson.ErrInvalid, fmt.Sprintf("%s is below %d bytes (16M), less than a session's own programs need", strictjson.QuoteShort(l.Memory), uint64(minSessionMemory)))
		}
	}
	if l.Disk != "" {
		if _, err := ParseDisk(strictjson.JoinField(field, LimitDisk), l.Disk); err != nil {
			return err
		}
	}
	if l.Processes != nil && (*l.Processes < minSessionProcesses || *l.Processes > MaxLimit) {
		return strictjson.FieldErr(strictjson.JoinField(field, LimitProcesses), strictjson.ErrInvalid, fmt.Sprintf("%d is not a processes limit: a whole number from %d (the sandbox's init, the session and its turn) to %d", *l.Processes, minSessionProcesses, uint64(MaxLimit)))
	}
	return nil
}

// The least session limits node.json may give: below them a session
// cannot start its own programs.
const (
	minSessionMemory    = 16 << 20
	minSessionProcesses = 8
)

// NodeProject is one repository of the node: its file on this host and the URL
// the node serves it at.
type NodeProject struct {
	Repository string `json:"repository" why:"a project names its repository file"`
	URL        string `json:"url" why:"a project names the URL the node serves it at"`
	// OtherHost says this node is not the server's node of the project
	// (seed 004, sections 4 and 5): it sets no run user's password, but
	// reads each from its file of passwords (AGENTS/run-passwords), and a
	// run with a password step whose user the file lacks is refused (section
	// 11, row 6). Repository is then the node's clone of the server, which
	// it pulls as the node user and whose senders the server vouches for
	// (D72); its writes go to URL as the node user.
	OtherHost bool `json:"other_host,omitempty"`
	// RemoteNodes are, on the server's node, the nodes on other hosts that
	// serve the project: the console's receipt page answers their node
	// users alone, and the hook pokes those that name a URL.
	RemoteNodes []RemoteNode `json:"remote_nodes,omitempty" ocx:"closed"`
}

// RemoteNode is a node on another host, as the server's node lists it.
type RemoteNode struct {
	// User is its node user, a user of the server's repository.
	User string `json:"user" why:"a remote node names its node user"`
	// Poke, when set, is the URL the server's hook POSTs to when
	// something arrives, so that the node pulls at once: https, or http on
	// loopback (CheckRemoteURL).
	Poke string `json:"poke,omitempty"`
	// PokeSecret is what each poke carries, the node's own node.json
	// holding it too (pull.secret): given with Poke, and only then (D81).
	PokeSecret string `json:"poke_secret,omitempty"`
}

// RemoteNode is the remote node whose node user is user, if the project
// lists one.
func (p NodeProject) RemoteNode(user string) (RemoteNode, bool) {
	for _, r := range p.RemoteNodes {
		if r.User == user {
			return r, true
		}
	}
	return RemoteNode{}, false
}

// Validate checks the node user, the release root and every project.
func (c *NodeConfig) Validate() error {
	if err := CheckLogin("user", c.User); err != nil {
		return strictjson.At("node.json", err)
	}
	if c.Release != "" {
		if err := CheckAbsPath("release", c.Release); err != nil {
			return strictjson.At("node.json", err)
		}
	}
	if len(c.Projects) == 0 {
		return strictjson.At("node.json", strictjson.FieldErr("projects", strictjson.ErrMissing, "is empty; a node serves at least one repository"))
	}
	if c.SessionLimits != nil {
		if err := c.SessionLimits.validate("session_limits"); err != nil {
			return strictjson.At("node.json", err)
		}
	}
	if c.Sandbox != nil {
		if err := c.Sandbox.validate("sandbox"); err != nil {
			return strictjson.At("node.json", err)
		}
	}
	if c.Pull != nil {
		if err := c.Pull.validate("pull"); err != nil {
			return strictjson.At("node.json", err)
		}
	}
	for _, name := range c.ProjectNames() {
		p := c.Projects[name]
		field := strictjson.JoinField("projects", name)
		if err := CheckProject(field, name); err != nil {
			return strictjson.At("node.json", err)
		}
		if err := CheckRepository(field+".repository", p.Repository); err != nil {
			return strictjson.At("node.json", err)
		}
		if got := ProjectOf(p.Repository); got != name {
			return strictjson.At("node.json", strictjson.FieldErr(field+".repository", strictjson.ErrInvalid,
				fmt.Sprintf("%q is project %q, not %q: a project is its repository's file name without .fossil", p.Repository, got, name)))
		}
		if err := checkURL(field+".url", p.URL); err != nil {
			return strictjson.At("node.json", err)
		}
		if p.OtherHost {
			if err := CheckRemoteURL(field+".url", p.URL); err != nil {
				return strictjson.At("node.json", err)
			}
		}
		if err := c.checkRemoteNodes(field, p); err != nil {
			return strictjson.At("node.json", err)
		}
	}
	return nil
}

// checkRemoteNodes checks a project's remote nodes: listed by the
// server's node alone, each a valid login, not the node's own, once.
func (c *NodeConfig) checkRemoteNodes(field string, p NodeProject) error {
	if len(p.RemoteNodes) > 0 && p.OtherHost {
		return strictjson.FieldErr(field+".remote_nodes", strictjson.ErrInvalid, "is given on a project served from another host; the server's node lists the remote nodes")
	}
	seen := map[string]bool{}
	for i, r := range p.RemoteNodes {
		f := fmt.Sprintf("%s.remote_nodes[%d]", field, i)
		if err := CheckLogin(f+".user", r.User); err != nil {
			return err
		}
		if r.User == c.User {
			return strictjson.FieldErr(f+".user", strictjson.ErrInvalid, fmt.Sprintf("%s is this node's own user", strictjson.QuoteShort(r.User)))
		}
		if seen[r.User] {
			return strictjson.FieldErr(f+".user", strictjson.ErrInvalid, fmt.Sprintf("%s is listed twice", strictjson.QuoteShort(r.User)))
		}
		seen[r.User] = true
		switch {
		case r.Poke != "" && r.PokeSecret == "":
			return strictjson.FieldErr(f+".poke_secret", strictjson.ErrMissing, "is missing; a poke carries the secret the remote node holds (`ocx node add --poke` makes it)")
		case r.Poke == "" && r.PokeSecret != "":
			return strictjson.FieldErr(f+".poke_secret", strictjson.ErrInvalid, "is given without poke; a secret is for the pokes of a node")
		case r.Poke != "":
			if err := CheckRemoteURL(f+".poke", r.Poke); err != nil {
				return err
			}
			if err := CheckPokeSecret(f+".poke_secret", r.PokeSecret); err != nil {
				return err
			}
		}
	}
	return nil
}

// ProjectNames lists the projects in a stable order.
func (c *NodeConfig) ProjectNames() []string {
	names := make([]string, 0, len(c.Projects))
	for n := range c.Projects {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ProjectOfRepository finds the project whose repository file is repo.
func (c *NodeConfig) ProjectOfRepository(repo string) (string, bool) {
	for n, p := range c.Projects {
		if p.Repository == repo {
			return n, true
		}
	}
	return "", false
}

// Encode renders node.json, indented, after validating it.
func (c *NodeConfig) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c.encode()
}

// encode renders node.json, unvalidated.
func (c *NodeConfig) encode() ([]byte, error) {
	return encodeHostFile("node", struct {
		User          string                 `json:"user"`
		Release       string                 `json:"release,omitempty"`
		Projects      map[string]NodeProject `json:"projects"`
		SessionLimits *NodeSessionLimits     `json:"session_limits,omitempty"`
		Sandbox       *NodeSandbox           `json:"sandbox,omitempty"`
		ConfinedOnly  bool                   `json:"confined_only,omitempty"`
		Pull          *NodePull              `json:"pull,omitempty"`
	}{c.User, c.Release, c.Projects, c.SessionLimits, c.Sandbox, c.ConfinedOnly, c.Pull})
}

// EncodeShown is Encode with every secret (pull.secret, each remote
// node's poke_secret) replaced by secretShown: what a plan or an answer
// shows of node.json.
func (c *NodeConfig) EncodeShown() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	shown := *c
	if c.Pull != nil && c.Pull.Secret != "" {
		p := *c.Pull
		p.Secret = secretShown
		shown.Pull = &p
	}
	shown.Projects = make(map[string]NodeProject, len(c.Projects))
	for name, p := range c.Projects {
		rs := make([]RemoteNode, len(p.RemoteNodes))
		for i, r := range p.RemoteNodes {
			if r.PokeSecret != "" {
				r.PokeSecret = secretShown
			}
			rs[i] = r
		}
		if p.RemoteNodes != nil {
			p.RemoteNodes = rs
		}
		shown.Projects[name] = p
	}
	return shown.encode()
}

// secretShown stands for a secret where node.json is shown.
const secretShown = "(kept in node.json, not shown)"

// String renders the node on one line.
func (c *NodeConfig) String() string {
	l := Render("node").KV("user", c.User).OptKV("release", c.Release)
	for _, n := range c.ProjectNames() {
		l.KV(n, c.Projects[n].URL)
	}
	return l.String()
}

// DecodeNodeConfig reads and validates node.json. Unknown keys are ignored (a
// later version may add some); unknown versions are refused.
func DecodeNodeConfig(data []byte) (*NodeConfig, error) {
	o, err := hostFileObject("node.json", "node", data)
	if err != nil {
		return nil, err
	}
	c := &NodeConfig{}
	if err := Fill(o, c); err != nil {
		return nil, strictjson.At("node.json", err)
	}
	for name, p := range c.Projects {
		if p.RemoteNodes != nil && len(p.RemoteNodes) == 0 {
			p.RemoteNodes = nil // "remote_nodes": [] lists none, as no key does
			c.Projects[name] = p
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Binding is a workspace's binding.json (seed 000 layout): made from its
// definition when the workspace is added, and read by the session process.
type Binding struct {
	Login   string `json:"login" why:"a binding names its agent login"`
	Project string `json:"project" why:"a binding names its project"`
	// ProjectCode is the repository's project code, which a sync login needs.
	ProjectCode string `json:"project_code" why:"a binding carries the project code a sync login needs"`
	// Remote is the URL the clone syncs with, without a password.
	Remote string `json:"remote" why:"a binding names the URL its clone syncs with"`
	// Branch is the branch the tree is on.
	Branch string `json:"branch" why:"a binding names its tree's branch"`
	// Home is the workspace's record: the root post of the thread that holds
	// the definition.
	Home string `json:"home" why:"a binding names the workspace's record"`
	// Workspace is the hash of the post holding the workspace definition.
	Workspace string `json:"workspace" why:"a binding names the post holding its definition"`
}

// Key is the workspace the binding is for.
func (b *Binding) Key() WorkspaceKey { return WorkspaceKey{Login: b.Login, Project: b.Project} }

// Validate checks every field.
func (b *Binding) Validate() error {
	if err := CheckLogin("login", b.Login); err != nil {
		return strictjson.At("binding.json", err)
	}
	if err := CheckProject("project", b.Project); err != nil {
		return strictjson.At("binding.json", err)
	}
	if err := CheckHash("project_code", b.ProjectCode); err != nil {
		return strictjson.At("binding.json", err)
	}
	if err := checkURL("remote", b.Remote); err != nil {
		return strictjson.At("binding.json", err)
	}
	if err := ValidateBranch(b.Branch); err != nil {
		return strictjson.At("binding.json", strictjson.At("branch", err))
	}
	if err := CheckHash("home", b.Home); err != nil {
		return strictjson.At("binding.json", err)
	}
	if err := CheckHash("workspace", b.Workspace); err != nil {
		return strictjson.At("binding.json", err)
	}
	return nil
}

// Encode renders binding.json, indented, after validating it.
func (b *Binding) Encode() ([]byte, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return encodeHostFile("binding", *b)
}

// String renders the binding on one line.
func (b *Binding) String() string {
	return Render("binding").Word(b.Login+"/"+b.Project).KV("branch", b.Branch).
		KV("remote", b.Remote).KV("home", b.Home).String()
}

// DecodeBinding reads and validates binding.json.
func DecodeBinding(data []byte) (*Binding, error) {
	o, err := hostFileObject("binding.json", "binding", data)
	if err != nil {
		return nil, err
	}
	b := &Binding{}
	if err := Fill(o, b); err != nil {
		return nil, strictjson.At("binding.json", err)
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// hostFileObject parses a host file strictly and checks its "ocx" and version.
func hostFileObject(where, kind string, data []byte) (strictjson.Obj, error) {
	v, err := strictjson.Parse(data, strictjson.MaxNoteLen)
	if err != nil {
		return strictjson.Obj{}, strictjson.At(where, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return strictjson.Obj{}, &strictjson.FieldError{Where: where, Problem: "is " + strictjson.JSONType(v) + "; it must be a JSON object", Err: strictjson.ErrInvalid}
	}
	o := strictjson.Obj{Map: m}
	got, err := o.Str("ocx", true, fmt.Sprintf("%s says %q in \"ocx\"", where, kind))
	if err != nil {
		return strictjson.Obj{}, strictjson.At(where, err)
	}
	if got != kind {
		return strictjson.Obj{}, strictjson.At(where, strictjson.FieldErr("ocx", strictjson.ErrWrongKind, fmt.Sprintf("is %s; %s says %q", strictjson.QuoteShort(got), where, kind)))
	}
	if err := readVersion(o); err != nil {
		return strictjson.Obj{}, strictjson.At(where, err)
	}
	return o, nil
}

// encodeHostFile writes {"ocx": kind, ...fields} indented, with a final newline.
func encodeHostFile(kind string, body any) ([]byte, error) {
	b, err := ObjectAfter(`{"ocx":`+strconv.Quote(kind), body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", kind, err)
	}
	return append(b, '\n'), nil
}

// checkURL accepts an absolute http or https URL with a host and no password:
// a password in a URL ends up in logs and in `ps`.
func checkURL(field, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not an http or https URL", strictjson.QuoteShort(s)))
	}
	if _, has := u.User.Password(); has {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, "holds a password; a password never goes in a URL here")
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s holds white space", strictjson.QuoteShort(s)))
	}
	return nil
}
