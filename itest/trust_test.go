package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The bounds of TestHostileWorkspace (issue 22): whatever an agent plants
// in its workspace, no node-side command takes longer than this, grows
// larger than this, and another agent's session still answers within this.
const (
	hostileSlowest  = 2 * time.Second
	hostileLargest  = 100 << 20 // bytes of resident memory
	hostileBystande = 5 * time.Second
)

// plantKind is one thing an agent may put where the node reads or writes
// a file.
type plantKind string

const (
	plantLinkSecret plantKind = "a link to the node user's password"
	plantLinkVictim plantKind = "a link to a file outside, to be overwritten"
	plantFIFO       plantKind = "a named pipe"
	plantSparse     plantKind = "a sparse file of 1 GiB"
	plantDir        plantKind = "a directory"
)

// hostilePaths are the paths of a workspace that a program outside the
// sandbox reads or writes (docs/trust.md), relative to the workspace;
// listening/R is the index's old place, where the agent planted another
// agent's record.
func hostilePaths(victimRecord string) []string {
	return []string{"binding.json", "session/log", "session/turn", "session/wake", "session/listening/" + victimRecord, "clone"}
}

// plant puts kind at p, whatever was there.
func plant(t *testing.T, kind plantKind, p, secret, victim string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	var err error
	switch kind {
	case plantLinkSecret:
		err = os.Symlink(secret, p)
	case plantLinkVictim:
		err = os.Symlink(victim, p)
	case plantFIFO:
		err = syscall.Mkfifo(p, 0o600)
	case plantSparse:
		var f *os.File
		if f, err = os.Create(p); err == nil {
			err = f.Truncate(1 << 30)
			f.Close()
		}
	case plantDir:
		err = os.MkdirAll(filepath.Join(p, "inside"), 0o700)
	}
	if err != nil {
		t.Fatalf("plant %s at %s: %v", kind, p, err)
	}
}

// timedOCX runs ocx as user and says how long it took and how much
// resident memory it and what it waited for used at most (peakrss).
func (n *testNode) timedOCX(user string, stdin string, args ...string) (result, time.Duration, int64) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, peakRSS, append([]string{program("ocx")}, args...)...)
	peakR, peakW, err := os.Pipe()
	if err != nil {
		n.t.Fatal(err)
	}
	defer peakR.Close()
	cmd.ExtraFiles = []*os.File{peakW}
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + n.agents, "LANG=C.UTF-8", "OCX_AGENTS=" + n.agents}
	if user != "" {
		cmd.Env = append(cmd.Env, "OCX_USER="+user, "OCX_PASSWORD="+n.pw[user])
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	peakW.Close()
	r := result{args: args, stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		n.t.Fatalf("ocx %v: %v", args, err)
	}
	var rss int64
	if _, err := fmt.Fscan(peakR, &rss); err != nil {
		n.t.Fatalf("ocx %v: its peak memory: %v", args, err)
	}
	return r, took, rss
}

// TestHostileWorkspace is issue 22's hostile workspace: for every path of
// a workspace that a program outside the sandbox reads or writes, it
// plants in turn a link to a secret, a link to a file outside to be
// overwritten, a named pipe, a sparse gigabyte and a directory, and drives
// every node-side reader and writer that touches them: each console page
// as the admin, as a reader and without a login, the hook with a post in
// every listened record, the status, every tool, and session start,
// restart, withdraw, terminate and gc (dry runs each round, and for real
// once at the end). No answer or page holds a secret, no file outside
// changes, no command takes over 2 s or 100 MB, and another agent's
// session answers a post within 5 s, every round.
func TestHostileWorkspace(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := consoleNode(t)
	n.must("", "hook", "install")
	admin := n.srv.AdminLogin
	const hostile, bystander = "agent-1", "agent-2"
	for _, l := range []string{hostile, bystander} {
		n.must("", "login", "add", l)
	}
	hostileRec := n.result(admin, "workspace", "add", "--login", hostile, "--project", "demo", "--branch", "trunk")
	byRec := n.result(admin, "workspace", "add", "--login", bystander, "--project", "demo", "--branch", "trunk")
	for _, l := range []string{hostile, bystander} {
		n.result(admin, "session", "start", key(l), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	}
	n.waitFor("both sessions to listen", func() bool {
		st := n.status()
		listening := 0
		for _, s := range st.Sessions {
			if s.Listening {
				listening++
			}
		}
		return listening == 2
	})

	// The secrets: the node user's password and the bystander's; the
	// victim: a file outside the agents root that nothing may write.
	var cfg struct{ User string }
	if b, err := os.ReadFile(filepath.Join(n.agents, "node.json")); err != nil || json.Unmarshal(b, &cfg) != nil || cfg.User == "" {
		t.Fatalf("node.json: %v", err)
	}
	secretFile := filepath.Join(n.agents, cfg.User, "password")
	var secrets []string
	for _, f := range []string{secretFile, filepath.Join(n.agents, bystander, "password")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, strings.TrimSpace(string(b)))
	}
	victim := filepath.Join(t.TempDir(), "victim")
	const victimText = "nobody writes here\n"
	if err := os.WriteFile(victim, []byte(victimText), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := n.workspaceDir(hostile)
	// The agent's clone is kept aside while its place holds what is
	// planted, and put back for the end.
	clone := filepath.Join(ws, "clone.kept")
	if err := os.Rename(filepath.Join(ws, "clone"), clone); err != nil {
		t.Fatal(err)
	}

	viewers := map[string]*viewer{"admin": n.viewer(admin), "reader": n.viewer(person), "no login": n.viewer("")}
	pages := []string{"", "hook", "logins", "workspaces", "workspace/" + hostile, "workspace/" + bystander,
		"sessions", "session/" + hostile, "session/" + bystander, "session/" + hostile + "/listeners",
		"state", "thread/" + hostileRec[:12], "thread/" + byRec[:12], "tools"}
	check := func(what, out string, took time.Duration, rss int64) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s shows a secret", what)
			}
		}
		if took > hostileSlowest {
			t.Errorf("%s took %v", what, took)
		}
		if rss > hostileLargest {
			t.Errorf("%s grew to %d MB", what, rss>>20)
		}
	}
	tool := func(in map[string]any) string {
		b, _ := json.Marshal(in)
		return string(b)
	}
	round := 0
	readers := func(kind plantKind) {
		t.Helper()
		round++
		for who, v := range viewers {
			for _, p := range pages {
				start := time.Now()
				code, body := v.get(p)
				check(fmt.Sprintf("[%s] the page %q as %s (%d)", kind, p, who, code), body, time.Since(start), 0)
			}
		}
		// The hook, through a person's post in every listened record; the
		// bystander answers within its bound.
		var byPost string
		for _, rec := range []string{hostileRec, byRec} {
			r, took, rss := n.timedOCX(person, "", "post", "--to", rec, "--text", fmt.Sprintf("round %d: are you there?", round), "--json")
			check(fmt.Sprintf("[%s] ocx post to %s", kind, rec[:10]), r.stdout+r.stderr, took, rss)
			if rec == byRec {
				var a answer
				if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || a.Result == nil {
					t.Fatalf("[%s] the post to the bystander: %s", kind, r)
				}
				byPost = *a.Result
			}
		}
		deadline := time.Now().Add(hostileBystande)
		for answered := false; !answered; {
			for _, p := range n.thread(byRec) {
				answered = answered || (p.InReplyTo == byPost && p.Sender == bystander)
			}
			if !answered && time.Now().After(deadline) {
				t.Fatalf("[%s] the bystander did not answer within %v", kind, hostileBystande)
			}
			if !answered {
				time.Sleep(50 * time.Millisecond)
			}
		}
		for _, args := range [][]string{
			{"status"}, {"status", "--json"},
			{"session", "start", key(hostile), "--dry-run", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript},
			{"session", "restart", "--release", "current", "-n"},
			{"login", "withdraw", hostile, "--dry-run"},
			{"workspace", "terminate", key(hostile), "--dry-run", "--reason", "hostile"},
			{"workspace", "gc", "--dry-run"},
			{"listener", "add", key(hostile), "--kind", "thread", "--names", byRec, "--dry-run"},
			// For real: the clone the node would make remember the fresh
			// password is whatever is planted in its place.
			{"login", "rotate", hostile},
		} {
			r, took, rss := n.timedOCX(admin, "", args...)
			check(fmt.Sprintf("[%s] ocx %s", kind, strings.Join(args, " ")), r.stdout+r.stderr, took, rss)
		}
		for _, c := range []struct {
			user, name, input string
			agent             bool
		}{
			{admin, "create", tool(map[string]any{"objective": "x", "model": "standin-model", "budget": map[string]any{"wall": "1m"}, "dry_run": true}), false},
			{admin, "post", tool(map[string]any{"to": hostileRec, "text": "x", "dry_run": true}), false},
			{admin, "stop", tool(map[string]any{"record": hostileRec, "dry_run": true}), false},
			{admin, "audit", tool(map[string]any{"checkin": "trunk", "verdict": "pass", "reason": "x", "against": hostileRec, "dry_run": true}), false},
			{hostile, "push", tool(map[string]any{"dry_run": true}), true},
			{hostile, "post", tool(map[string]any{"to": byRec, "text": "x", "dry_run": true}), true},
		} {
			args := []string{"tool", c.name, "--json"}
			user := c.user
			if c.agent {
				args, user = append(args, "--agent", c.user), ""
			}
			r, took, rss := n.timedOCX(user, c.input, args...)
			check(fmt.Sprintf("[%s] ocx tool %s as %s", kind, c.name, c.user), r.stdout+r.stderr, took, rss)
		}
		if b, err := os.ReadFile(victim); err != nil || string(b) != victimText {
			t.Fatalf("[%s] the file outside changed: %q, %v", kind, b, err)
		}
	}

	for _, kind := range []plantKind{plantLinkSecret, plantLinkVictim, plantFIFO, plantSparse, plantDir} {
		for _, p := range hostilePaths(byRec) {
			plant(t, kind, filepath.Join(ws, p), secretFile, victim)
		}
		readers(kind)
	}

	// For real, once, with links and pipes in place: a second start
	// restarts the hostile session (the daemon makes its session
	// directory afresh), the restart, the withdrawal of its login, the
	// termination of its workspace, and gc. The bystander answers after.
	plant(t, plantLinkVictim, filepath.Join(ws, "binding.json"), secretFile, victim)
	plant(t, plantLinkVictim, filepath.Join(ws, "session", "log"), secretFile, victim)
	plant(t, plantFIFO, filepath.Join(ws, "session", "turn"), secretFile, victim)
	plant(t, plantLinkSecret, filepath.Join(ws, "session", "wake"), secretFile, victim)
	if err := os.RemoveAll(filepath.Join(ws, "clone")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(clone, filepath.Join(ws, "clone")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"login", "rotate", hostile}, // the clone is back: it remembers the password the rounds left
		{"session", "start", key(hostile), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript},
		{"session", "stop", key(hostile)},
		{"session", "restart", "--release", "current", "-n"},
		{"login", "withdraw", hostile},
		{"workspace", "terminate", key(hostile), "--reason", "hostile"},
		{"workspace", "gc"},
	} {
		if args[1] == "withdraw" {
			n.waitFor("the hostile session to end", func() bool {
				for _, s := range n.status().Sessions {
					if s.Login == hostile {
						return false
					}
				}
				return true
			})
		}
		r, took, rss := n.timedOCX(admin, "", append(args, "--json")...)
		if args[1] == "start" {
			// A second start restarts: it waits for the running session's
			// end, which its agent may put off until the daemon's KILL
			// after the grace; the start itself is bounded as the rest.
			took -= min(took, actors.DefaultGrace)
		}
		check("ocx "+strings.Join(args, " "), r.stdout+r.stderr, took, rss)
		if r.code != 0 {
			t.Errorf("%s", r)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != victimText {
		t.Fatalf("the file outside changed: %q, %v", b, err)
	}
	to := n.result(person, "post", "--to", byRec, "--text", "still there?")
	n.awaitReplyBy(bystander, byRec, to)
	if st := n.status(); len(st.Sessions) != 1 || st.Sessions[0].Login != bystander {
		t.Fatalf("sessions after the hostile workspace went: %+v", st.Sessions)
	}
}

// TestRunKeptLogsFollowNoLink is issue 22's run that writes any file of
// the node: its process, sandboxed with its workspace read-write, plants
// links at $$workspace$$/stdout.log and stderr.log to files outside and
// prints; the node writes its kept logs in their place, replacing the
// links, and the files outside keep what they held.
func TestRunKeptLogsFollowNoLink(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	outside := t.TempDir()
	victims := []string{filepath.Join(outside, "out"), filepath.Join(outside, "err")}
	for _, v := range victims {
		if err := os.WriteFile(v, []byte("nobody writes here\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf(`ln -s %s "$HOME/stdout.log"; ln -s %s "$HOME/stderr.log"; echo PWNED; echo PWNED >&2; exit 3`, victims[0], victims[1])
	command, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Write outside.",
"workspace": [{"step": "directory", "at": "$$root$$/$$user$$/projects/$$project$$/$$run$$"}],
"sandbox": {"uid": 1000, "gid": 1000, "capabilities": [], "network": false, "own_session": true,
  "ends_with_node": false, "read_only": ["/usr", "/bin", "/lib", "/lib64"], "read_write": ["$$workspace$$"], "homes": [],
  "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/scratch"},
"process": {"user": "builder", "command": %s, "env": {"PATH": "/usr/bin:/bin", "HOME": "$$workspace$$"},
  "keep": {"stdout_when": "always"}}}`, node, command)
	root := n.result(admin, "thread", "--title", "Write outside", "--text", block(run))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	if e := n.endedOf(root); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 3 {
		for _, p := range n.runThread(root) {
			t.Logf("%s: %s", p.Sender, p.Text)
		}
		t.Fatalf("the run ended %+v, want exited 3", e)
	}
	for _, v := range victims {
		if b, err := os.ReadFile(v); err != nil || string(b) != "nobody writes here\n" {
			t.Errorf("%s, outside the sandbox, holds %q (%v): the kept logs were written through the run's link", v, b, err)
		}
	}
	st := n.startedOf(root)
	ws := st.Values["workspace"]
	for _, name := range []string{"stdout.log", "stderr.log"} {
		p := filepath.Join(ws, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is %v, %v; want the kept log, a regular file in the link's place", p, fi, err)
			continue
		}
		if b, _ := os.ReadFile(p); string(b) != "PWNED\n" {
			t.Errorf("%s holds %q, want the process's PWNED", p, b)
		}
	}
}

// plantingScript is a session's command that plants what a post asks in
// its own workspace from inside its sandbox, and echoes anything else:
// `plant-fifo PATH`, `plant-text PATH TEXT`, `plant-link PATH TARGET`.
const plantingScript = `read -r verb path arg
case "$verb" in
plant-fifo) rm -rf "$HOME/$path"; mkfifo "$HOME/$path" && echo "planted a pipe at $path" ;;
plant-text) rm -rf "$HOME/$path"; printf '%s\n' "$arg" > "$HOME/$path" && echo "planted text at $path" ;;
plant-link) rm -rf "$HOME/$path"; ln -s "$arg" "$HOME/$path" && echo "planted a link at $path" ;;
*) echo "echo: $verb $path $arg" ;;
esac`

// plantBy has the agent's session plant, from inside its sandbox, what
// line asks, and waits for its answer.
func (n *testNode) plantBy(login, record, line string) {
	n.t.Helper()
	to := n.result(person, "post", "--to", record, "--text", line)
	if got := n.awaitReplyBy(login, record, to); !strings.Contains(got.Text, "planted") {
		n.t.Fatalf("the session did not plant %q: %s", line, got.Text)
	}
}

// TestBindingIsTheNodesOwn is issue 22 item 1: binding.json is the
// agent's file, and what it says no longer picks the workspace definition
// or the record of the admin's next start, nor can a pipe there hang it.
// The agent, from inside its sandbox, rewrites its binding to name another
// record (a bystander's) and another definition; the admin's next start
// still writes its definition and launch on the workspace's own record and
// launches from its own definition. Then it makes binding.json a pipe: the
// next start returns in seconds, and the daemon puts the binding back.
func TestBindingIsTheNodesOwn(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	n.must("", "login", "add", agent)
	n.must("", "login", "add", "agent-2")
	record := n.result(admin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	other := n.result(admin, "workspace", "add", "--login", "agent-2", "--project", "demo", "--branch", "trunk")
	start := func() result {
		t.Helper()
		r, took, _ := n.timedOCX(admin, "", "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", plantingScript, "--json")
		t.Logf("session start took %v", took)
		if took > 20*time.Second {
			t.Fatalf("session start took %v", took)
		}
		if r.code != 0 {
			t.Fatalf("%s", r)
		}
		return r
	}
	start()
	b, err := readBindingOf(n, agent)
	if err != nil {
		t.Fatal(err)
	}
	forged := *b
	forged.Home, forged.Workspace = other, other
	data, err := forged.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var line bytes.Buffer // one line: the session reads one
	if err := json.Compact(&line, data); err != nil {
		t.Fatal(err)
	}
	n.plantBy(agent, record, "plant-text binding.json "+line.String())
	start()
	// The definition and the launch are on the workspace's own record, and
	// the launch names its own definition.
	launches := notesOn[*messages.LaunchNote](n, record)
	if len(launches) != 2 || launches[1].Note.Workspace != b.Workspace {
		t.Fatalf("the launches on the workspace's record: %+v; want two, the second from definition %s", launches, b.Workspace)
	}
	if got := notesOn[*messages.LaunchNote](n, other); len(got) != 0 {
		t.Fatalf("the forged binding sent a launch to the other record: %+v", got)
	}
	if after, err := readBindingOf(n, agent); err != nil || *after != *b {
		t.Fatalf("the binding after the launch: %+v, %v; want it put back as %+v", after, err, b)
	}

	n.plantBy(agent, record, "plant-fifo binding.json")
	start()
	if after, err := readBindingOf(n, agent); err != nil || *after != *b {
		t.Fatalf("the binding after the launch: %+v, %v; want the pipe replaced by %+v", after, err, b)
	}
}
