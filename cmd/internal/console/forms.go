package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/workspaces"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// The forms' defaults: the ten most recent records and the branches for
// completion, and the templates, wiki pages workspace/NAME and
// session/NAME each holding one fenced JSON block.

const recentCount = 10

// template reads wiki page prefix+name as a user holding admin or setup
// last sent it, in the server's order (fossilio's PrivilegedWikiPage,
// D81: any login that may check in may push a wiki version, dated as it
// likes), and the one fenced JSON block it holds. A template that does
// not decode is an error saying why, shown on the form: never silently
// dropped.
func (q *request) template(r *fossilio.Repo, prefix, name string) ([]byte, error) {
	p, err := r.PrivilegedWikiPage(q.Ctx, prefix+name)
	if err != nil {
		return nil, fmt.Errorf("template %s%s: %w", prefix, name, err)
	}
	if p.Deleted {
		return nil, fmt.Errorf("template %s%s was deleted", prefix, name)
	}
	blocks, err := messages.Blocks([]byte(p.Text))
	if err != nil {
		return nil, fmt.Errorf("template %s%s: %w", prefix, name, err)
	}
	if len(blocks) != 1 {
		return nil, fmt.Errorf("template %s%s holds %d fenced JSON blocks; a template holds one", prefix, name, len(blocks))
	}
	return blocks[0].JSON, nil
}

// checkTemplateName refuses a template name that is not one: letters,
// digits, '.', '_' and '-', at most 64, as a login is named.
func checkTemplateName(name string) error {
	if len(name) == 0 || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" || name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("template %q: a template's name is letters, digits, '.', '_' and '-' (at most 64)", name)
	}
	return nil
}

// templates lists the templates under prefix: the pages whose version
// a user holding admin or setup last sent is not a deletion.
func (q *request) templates(r *fossilio.Repo, prefix string) []string {
	names, err := r.PrivilegedWikiPages(q.Ctx, prefix)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		out = append(out, strings.TrimPrefix(n, prefix))
	}
	return out
}

type workspaceAddData struct {
	Templates     []string
	Template      string
	TemplateError string
	Logins        []string
	Threads       []fossilio.Thread
	Branches      []string
	Sandbox       string
}

func (q *request) workspaceAddPage() {
	d := workspaceAddData{Template: q.R.URL.Query().Get("template")}
	var problems []error
	logins, err := q.n.AgentLogins()
	problems = append(problems, err)
	d.Logins = logins
	r, err := q.n.OpenRepo(q.Project)
	if err != nil {
		q.RenderProblem("workspace-add", "Add a workspace", "workspaces", d, err)
		return
	}
	defer r.Close()
	d.Threads, err = r.RecentThreads(q.Ctx, recentCount)
	problems = append(problems, err)
	bs, err := r.Branches(q.Ctx)
	problems = append(problems, err)
	for _, b := range bs {
		d.Branches = append(d.Branches, b.Name)
	}
	d.Templates = q.templates(r, "workspace/")
	sb := q.n.DefaultSandbox("WORKSPACE")
	if d.Template != "" {
		if err := checkTemplateName(d.Template); err != nil {
			d.TemplateError = err.Error()
		} else if block, err := q.template(r, "workspace/", d.Template); err != nil {
			d.TemplateError = err.Error()
		} else if s, err := messages.DecodeSandbox(block); err != nil {
			d.TemplateError = fmt.Sprintf("template workspace/%s does not decode: %v", d.Template, err)
		} else {
			sb = s
		}
	}
	b, _ := json.MarshalIndent(sb, "", "  ")
	d.Sandbox = string(b)
	q.RenderProblem("workspace-add", "Add a workspace", "workspaces", d, errors.Join(problems...))
}

// workspaceDirToken stands in the form's sandbox for the workspace's own
// directory, which is known only once the login is chosen.
const workspaceDirToken = "WORKSPACE"

func (q *request) workspaceAdd(form url.Values) (*node.Answer, string) {
	login := form.Get("login")
	in := workspaces.WorkspaceAddInput{Login: login, Project: q.Project, Branch: strings.TrimSpace(form.Get("branch")), Record: form.Get("record")}
	if sb := strings.TrimSpace(form.Get("sandbox")); sb != "" {
		in.SandboxJSON = []byte(sb)
		if k, err := messages.ParseWorkspaceKey(q.KeyOf(login)); err == nil {
			if paths, err := q.n.WorkspacePaths(k); err == nil {
				in.SandboxJSON = withWorkspaceDir([]byte(sb), paths.Dir)
			}
		}
	}
	return workspaces.Of(q.n).WorkspaceAdd(q.Ctx, in), "/workspace/" + login
}

// withWorkspaceDir puts the workspace's own directory in place of the
// form's stand-in, and in the read-write list when the sandbox lacks it.
func withWorkspaceDir(sandbox []byte, dir string) []byte {
	quoted, _ := json.Marshal(workspaceDirToken)
	qdir, _ := json.Marshal(dir)
	s := strings.ReplaceAll(string(sandbox), string(quoted), string(qdir))
	sb, err := messages.DecodeSandbox([]byte(s))
	if err != nil {
		return []byte(s) // the action refuses it, naming the field
	}
	for _, p := range sb.ReadWrite {
		if p == dir {
			return []byte(s)
		}
	}
	sb.ReadWrite = append(sb.ReadWrite, dir)
	out, err := json.Marshal(sb)
	if err != nil {
		return []byte(s)
	}
	return out
}

type sessionStartData struct {
	Key           messages.WorkspaceKey
	Templates     []string
	Template      string
	TemplateError string
	Kind          string
	Command       string
	Runner, Model string
	Lifetime      string
	Hears         string
}

func (q *request) sessionStartPage(login string) {
	k, ok := q.WorkspaceKey(login)
	if !ok {
		return
	}
	d := sessionStartData{Key: k, Template: q.R.URL.Query().Get("template"), Kind: "mechanical", Lifetime: "stays"}
	r, err := q.n.OpenRepo(q.Project)
	if err != nil {
		q.RenderProblem("session-start", "start a session", "workspaces", d, err)
		return
	}
	defer r.Close()
	d.Templates = q.templates(r, "session/")
	if d.Template != "" {
		if err := checkTemplateName(d.Template); err != nil {
			d.TemplateError = err.Error()
		} else if block, err := q.template(r, "session/", d.Template); err != nil {
			d.TemplateError = err.Error()
		} else if def, err := messages.DecodeNoteAs[*messages.SessionDefinition](block); err != nil {
			d.TemplateError = fmt.Sprintf("template session/%s does not decode: %v", d.Template, err)
		} else {
			d.Kind, d.Lifetime = string(def.Kind), string(def.Lifetime)
			d.Command, d.Runner, d.Model = shellCommand(def.Command), def.Runner, def.Model
			d.Hears = strings.Join(def.Hears, ", ")
		}
	}
	q.Render("session-start", "start a session in "+k.String(), "workspaces", d)
}

// shellCommand is a definition's command as the form's one line for
// /bin/sh -c: the script itself when it is one, else each argument quoted.
func shellCommand(argv []string) string {
	if len(argv) == 3 && (argv[0] == "/bin/sh" || argv[0] == "sh") && argv[1] == "-c" {
		return argv[2]
	}
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
