package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The seeds' rows end to end that only their cores proved (issue 41 item
// 5): a run in a ticket, a session given a check-in and a ticket change,
// limits.wall and limits.cpu, edits, an agent's messages one at a time,
// create's default user and its closed keys.

// ticketRun reads a ticket's changes with the run engine message each
// holds (nil for a plain change, such as the kept logs).
func (n *testNode) ticketRun(id string) []runPost {
	n.t.Helper()
	var out []runPost
	for _, c := range n.ticket(id) {
		m, _ := runmsg.ReadMessage([]byte(c.Text))
		out = append(out, runPost{posted: c, Msg: m})
	}
	return out
}

// ticketAnswer is the first message of type M the node user wrote on the
// ticket; nil if none.
func ticketAnswer[M any](n *testNode, id string) *M {
	user := n.nodeUser()
	for _, p := range n.ticketRun(id) {
		if m, ok := any(p.Msg).(*M); ok && p.Sender == user {
			return m
		}
	}
	return nil
}

// keptStdoutsOf are the STDOUT blocks of the kept logs the node wrote
// among posts, in order.
func (n *testNode) keptStdoutsOf(posts []runPost) []string {
	node := n.nodeUser()
	var out []string
	for _, p := range posts {
		if p.Msg != nil || p.Sender != node {
			continue
		}
		_, after, ok := strings.Cut(p.Text, "```stdout\n")
		if !ok {
			continue
		}
		block, _, _ := strings.Cut(after, "```")
		out = append(out, block)
	}
	return out
}

// TestRunInATicket is seed 004's table 3 ("written where: a new thread, a
// reply, a ticket change") and section 8.2 for a ticket: the admin opens a
// ticket whose first change is the run; the node answers on the ticket
// alone, each as a change to it by the node user: started, the kept logs
// (a plain change holding the STDOUT block and the exit), then ended
// exited 0; no forum post is written.
func TestRunInATicket(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Say hello.",
"process": {"user": "builder", "command": ["echo", "hello"], "env": {"PATH": "/usr/bin:/bin"},
"keep": {"stdout_when": "always"}}}`, node)
	id := n.result(admin, "ticket", "--title", "Say hello", "--text", block(run))
	n.waitFor("the run's ended on its ticket", func() bool { return ticketAnswer[runmsg.RunEnded](n, id) != nil })
	changes := n.ticketRun(id)
	for _, c := range changes {
		t.Logf("%s by %s:\n%s", c.Hash, c.Sender, c.Text)
	}
	if len(changes) != 4 {
		t.Fatalf("the ticket holds %d changes, want the run, started, the kept logs and ended", len(changes))
	}
	hash := changes[0].Hash
	if _, ok := changes[0].Msg.(*runmsg.Run); !ok || changes[0].Sender != admin {
		t.Fatalf("the ticket's first change is not the admin's run: %+v", changes[0])
	}
	if st, ok := changes[1].Msg.(*runmsg.RunStarted); !ok || changes[1].Sender != node || st.Run != hash || st.Values["run"] != hash {
		t.Errorf("the second change is not the node's started of run %s: %s by %s", hash, changes[1].Text, changes[1].Sender)
	}
	logs := changes[2]
	if logs.Msg != nil || logs.Sender != node || !strings.Contains(logs.Text, "```stdout\nhello\n```") || !strings.Contains(logs.Text, "exit: 0") {
		t.Errorf("the third change is not the kept logs holding hello, exit 0 (by %s):\n%s", logs.Sender, logs.Text)
	}
	if e, ok := changes[3].Msg.(*runmsg.RunEnded); !ok || changes[3].Sender != node || e.Run != hash || e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 0 {
		t.Errorf("the last change is not ended exited 0 by the node: %s by %s", changes[3].Text, changes[3].Sender)
	}
	r := n.repo()
	defer r.Close()
	posts, err := r.FirstPosts(n.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(posts) != 0 {
		t.Errorf("the node wrote in the forum for a run in a ticket: %+v", posts)
	}
}

// TestRunSessionGivenACheckinAndAChange is seed 004's section 9 for a
// session in a ticket: filter 6 ("a change to its ticket, or a check-in on
// a branch in checkins"), filter 7 (a check-in whoever sent it; a change
// from a user it hears) and table 9's change and check-in lines, given on
// its STDIN after its started, each once, in the server's order: alice's
// change, the admin's check-in on trunk, a check-in on another branch
// (not given), alice's second change.
func TestRunSessionGivenACheckinAndAChange(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"), "--grace", "2s")
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Echo what you are given.",
"process": {"user": "builder", "command": ["sh", "-c", "while read l; do echo \"got $l\"; done"], "env": {"PATH": "/usr/bin:/bin"},
"session": true, "hears": [%q], "checkins": ["trunk"], "deliveries": "feed", "keep": {"stdout_when": "always"}}}`, node, person)
	id := n.result(admin, "ticket", "--title", "Echo", "--text", block(run))
	var hash string
	n.waitFor("the run's started and its holder", func() bool {
		cs := n.ticket(id)
		if len(cs) == 0 {
			return false
		}
		hash = cs[0].Hash
		_, held := n.runCare(hash)
		return held && ticketAnswer[runmsg.RunStarted](n, id) != nil
	})
	if id, ok := n.runCare(hash); ok {
		killAtEnd(t, id)
	}

	c := newCommitter(t, n)
	var want []string
	change := n.result(person, "post", "--to", id, "--text", "a change from alice")
	want = append(want, protocol.RunLine(protocol.RunArrival{Kind: protocol.RunChange, Hash: change, Ticket: id, From: person, Text: "a change from alice"}))
	onTrunk := c.commit("b.txt")
	want = append(want, protocol.RunLine(protocol.RunArrival{Kind: protocol.RunCheckin, Hash: onTrunk, Branch: "trunk", From: admin, Text: "add b.txt"}))
	c.commitWith("c.txt", "", "--branch", "feature")
	last := n.result(person, "post", "--to", id, "--text", "and another")
	want = append(want, protocol.RunLine(protocol.RunArrival{Kind: protocol.RunChange, Hash: last, Ticket: id, From: person, Text: "and another"}))
	at := n.posAt(last)
	n.waitFor("the session given alice's second change", func() bool { return n.runGiven(hash) == at })

	stop := fmt.Sprintf(`{"ocx": 1, "kind": "stop", "node": %q, "run": %q}`, node, hash)
	n.result(admin, "post", "--to", id, "--text", block(stop))
	n.waitFor("the run's ended", func() bool { return ticketAnswer[runmsg.RunEnded](n, id) != nil })
	if e := ticketAnswer[runmsg.RunEnded](n, id); e.Outcome != runmsg.RunStopped {
		t.Errorf("ended %+v, want stopped", e)
	}
	outs := n.keptStdoutsOf(n.ticketRun(id))
	if len(outs) != 1 {
		t.Fatalf("%d kept STDOUT blocks on the ticket, want 1: %q", len(outs), outs)
	}
	lines := strings.Split(strings.TrimSuffix(outs[0], "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], `got {"run"`) {
		t.Fatalf("the kept STDOUT does not begin with the first line: %q", outs[0])
	}
	var got []string
	for _, l := range lines[1:] {
		got = append(got, strings.TrimPrefix(l, "got "))
	}
	for i := range want {
		want[i] = strings.TrimSuffix(want[i], "\n")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the session got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRunPastItsWallAndCPU is seed 004's table 7 and table 12's budget end
// to end: an unconfined run past limits.wall (2s) is ended by the node,
// and a sandboxed one whose busy loop goes past limits.cpu (1 second) by
// the kernel's SIGXCPU; each is answered started, then ended budget, its
// note naming the limit, and its process is gone.
func TestRunPastItsWallAndCPU(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"), "--grace", "1s")
	wall := n.result(admin, "thread", "--title", "Past its wall", "--text", block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Sleep.",
"limits": {"wall": "2s"},
"process": {"user": "builder", "command": ["sleep", "600"], "env": {"PATH": "/usr/bin:/bin"}}}`, node)))
	cpu := n.result(admin, "thread", "--title", "Past its CPU", "--text", block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Spin.",
"sandbox": {"uid": 1000, "gid": 1000, "capabilities": [], "network": false, "own_session": true, "ends_with_node": false,
  "read_only": ["/usr", "/bin", "/lib", "/lib64"], "read_write": [], "homes": [], "files": [], "proc": "/proc", "dev": "/dev", "tmp": "/tmp"},
"limits": {"cpu": 1},
"process": {"user": "spinner", "command": ["/bin/sh", "-c", "while :; do :; done"], "env": {"PATH": "/usr/bin:/bin"}}}`, node)))
	for _, c := range []struct {
		root, note string
	}{{wall, "wall: past limits.wall of 2s"}, {cpu, "cpu: its process was ended by SIGXCPU, past limits.cpu"}} {
		// The holder as the daemon launched it: the cpu run may be out of
		// the node's care (its care file gone) before the wall run ends.
		var id protocol.ProcID
		n.waitLogLine("the run's holder launched", func(l logLine) bool {
			if l.Msg != "run's process launched in its holder" || l.Run != c.root {
				return false
			}
			var err error
			id, err = protocol.ParseProcID(l.PID)
			return err == nil
		})
		killAtEnd(t, id)
		n.waitFor("the run's ended", func() bool { return n.endedOf(c.root) != nil })
		e := n.endedOf(c.root)
		if e.Outcome != runmsg.RunBudget || e.Exit != nil || !strings.HasPrefix(e.Note, c.note) {
			t.Errorf("ended %+v; want budget, its note beginning %q", e, c.note)
		}
		if st := n.startedOf(c.root); st == nil {
			t.Errorf("no started before ended budget")
		}
		n.waitFor("the run's process gone", func() bool { return !procAlive(id) })
	}
	if st := n.startedOf(wall); st.Limits.Wall != "2s" {
		t.Errorf("started lists limits %+v, want the wall as written", st.Limits)
	}
}

// TestEditsAreIgnored is seed 004's section 3 ("a message is read from the
// first version of its post: an edit is ignored") and seed 001 E3 ("a
// record is never edited; an edit of one is ignored") end to end. A
// manual run edited by its admin into a run that would start at once, with
// another command: the edit is no run (`ocx run start` of it refused, the
// status lists the first alone), and the start runs the first version's
// command, one started and one ended in the thread. A record listing
// feature edited by its admin to list trunk: the audit tool and the status
// read the first version, so a verdict against it on a trunk check-in is
// refused, and a raw one not counted.
func TestEditsAreIgnored(t *testing.T) {
	needs(t, "ocxd")
	n := newNode(t)
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	startDaemon(t, n, program("ocxd"))
	edit := func(root, title, text string) string {
		t.Helper()
		d, err := fossilio.PostDraft{Date: time.Now(), User: admin, Title: title, Root: root, Prev: root, Text: text}.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		h, err := n.pusher(admin).Push(n.ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	root := n.result(admin, "run", "post", "--message", manualRun(node, "echo first version"))
	edited := edit(root, "a run", block(fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Edited.",
"process": {"user": "builder", "command": ["sh", "-c", "echo edited"], "env": {"PATH": "/usr/bin:/bin"}, "keep": {"stdout_when": "always"}}}`, node)))
	if a, r := n.answer(admin, "run", "start", edited); a.Stopped == nil {
		t.Errorf("ocx run start of the edit was not refused: %s", r)
	}
	status := n.must("", "run", "status").stdout
	if !strings.Contains(status, root+" waiting") || strings.Contains(status, edited) {
		t.Errorf("ocx run status lists the edit, or not the first version waiting:\n%s", status)
	}
	n.result(admin, "run", "start", root)
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	starteds, endeds := 0, 0
	for _, p := range n.runThread(root) {
		switch p.Msg.(type) {
		case *runmsg.RunStarted:
			starteds++
		case *runmsg.RunEnded:
			endeds++
		}
	}
	if starteds != 1 || endeds != 1 {
		t.Errorf("%d started and %d ended in the thread, want one each", starteds, endeds)
	}
	if out := n.keptStdouts(root); len(out) != 1 || out[0] != "first version\n" {
		t.Errorf("the run printed %q, want the first version's output", out)
	}

	ci := newCommitter(t, n).commit("a.txt")
	rec := &runmsg.TaskRecord{User: "nobody-9", Node: node, Runner: "native", Objective: "Judge feature.", Checkins: []string{"feature"},
		Hears: []string{person}, Sandbox: runmsg.DefaultRecordSandbox(true), Budget: runmsg.Budget{Wall: "1h"}}
	b, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	record := n.result(admin, "thread", "--title", "A record", "--text", "Record.\n\n"+string(b))
	rec.Checkins = []string{"trunk"}
	if b, err = rec.Encode(); err != nil {
		t.Fatal(err)
	}
	recEdit := edit(record, "A record", "Record.\n\n"+string(b))
	for _, against := range []string{record, recEdit} {
		a, r := n.answer(person, "tool", "audit", "--checkin", ci, "--verdict", "pass", "--reason", "fine", "--against", against)
		if a.Stopped == nil || !strings.Contains(*a.Stopped, "against: ") {
			t.Errorf("a verdict against %s (the record or its edit) was not refused: %s", against, r)
		}
	}
	raw, err := n.pusher(person).Tag(n.ctx, ci, messages.AuditedTag, "pass: raw (against "+record+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range n.status().Verdicts {
		if v.Tag == raw {
			t.Errorf("the status counts a verdict against the record as its edit says it: %+v", v)
		}
	}
}

// defaultUser is create's default user name: the runner's, a hyphen and
// six hex digits (seed 001 E2).
var defaultUser = regexp.MustCompile(`^native-[0-9a-f]{6}$`)

// TestAgentGivenMessagesOneAtATime is seed 001 E2's default user and E4's
// order end to end: `ocx tool create` with no user makes one named after
// its runner with six hex digits, holding exactly the agent's capabilities,
// and starts its session as it. Posts that arrive while the agent is busy
// with a turn wait their turn: each is given alone, one at a time (no
// turn begins before the one before has ended), in the order they arrived,
// and answered in that order.
func TestAgentGivenMessagesOneAtATime(t *testing.T) {
	needs(t, "ocxd", "workspace", "ocx-runner-native")
	n := newNode(t)
	startDaemon(t, n, program("ocxd"), "--grace", "1s")
	in := filepath.Join(t.TempDir(), "create.json")
	if err := os.WriteFile(in, []byte(`{"objective": "Answer in order.", "runner": "native", "model": "standin", "hears": ["`+person+`"], "budget": {"wall": "1h"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	record := n.result(n.srv.AdminLogin, "tool", "create", "--input", in)
	var login string
	for _, p := range n.thread(record) {
		if rec, err := runmsg.ReadTaskRecord([]byte(p.Text)); err == nil && p.Hash == record {
			login = rec.User
		}
	}
	if !defaultUser.MatchString(login) {
		t.Fatalf("create's default user is %q, want native- and six hex digits", login)
	}
	n.waitFor(login+"'s session to listen", func() bool {
		for _, s := range n.status().Sessions {
			if s.Login == login && s.Listening {
				return true
			}
		}
		return false
	})
	caps := ""
	for _, l := range n.status().Logins {
		for _, a := range l.Accounts {
			if l.Login == login && a.Project == "demo" {
				caps = a.Capabilities
			}
		}
	}
	if caps != fossilio.AgentCaps {
		t.Errorf("%s holds %q on demo, want exactly %q", login, caps, fossilio.AgentCaps)
	}

	ws := n.workspaceDir(login)
	turns := filepath.Join(ws, "turns")
	if err := os.WriteFile(turns, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	busy := n.result(person, "post", "--to", record, "--text", "wait for go")
	n.waitFor("the agent busy with its first turn", func() bool {
		b, _ := os.ReadFile(turns)
		return strings.Contains(string(b), "start wait for go")
	})
	texts := []string{"first", "second", "third"}
	posts := []string{busy}
	for _, text := range texts {
		posts = append(posts, n.result(person, "post", "--to", record, "--text", text))
	}
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	n.awaitReplyBy(login, record, posts[len(posts)-1])
	b, err := os.ReadFile(turns)
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, text := range append([]string{"wait for go"}, texts...) {
		want += "start " + text + "\nend " + text + "\n"
	}
	if string(b) != want {
		t.Errorf("the agent's turns:\n%s\nwant each alone, one at a time, in the order the posts arrived:\n%s", b, want)
	}
	var answered []string
	for _, p := range n.thread(record) {
		if p.Sender == login && slices.Contains(posts, p.InReplyTo) {
			answered = append(answered, p.InReplyTo)
		}
	}
	if strings.Join(answered, ",") != strings.Join(posts, ",") {
		t.Errorf("the agent answered %v, want each post once in the order it arrived: %v", answered, posts)
	}
	n.must(n.srv.AdminLogin, "tool", "stop", "--record", record)
}

// TestCreateRefusesUnknownLimits is seed 001 E9 end to end ("a reader
// ignores keys it does not know, except inside sandbox, budget and
// restrict: a key it does not know there may be a limit, so it refuses
// the record"): `ocx tool create` with an unknown key in sandbox, in
// budget or in restrict is refused naming it, writing nothing and making
// no user; a record an admin wrote by hand with an unknown key in its
// sandbox is no record to the audit tool, which names the key.
func TestCreateRefusesUnknownLimits(t *testing.T) {
	needs(t, "ocx-runner-native")
	n := newNode(t)
	admin := n.srv.AdminLogin
	base := `"objective": "o", "user": "closed-1", "runner": "native", "model": "standin", "hears": ["` + person + `"]`
	r := n.repo()
	before, _, err := r.Received(n.ctx, 0)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ input, field string }{
		{`{` + base + `, "budget": {"wall": "1h"}, "sandbox": {"network": true, "read_only": [], "read_write": [], "cpus": 2}}`, "sandbox.cpus"},
		{`{` + base + `, "budget": {"wall": "1h", "gpu_hours": 1}}`, "budget.gpu_hours"},
		{`{` + base + `, "budget": {"wall": "1h"}, "restrict": {"no_password": true, "sudo": false}}`, "restrict.sudo"},
	} {
		in := filepath.Join(t.TempDir(), "create.json")
		if err := os.WriteFile(in, []byte(c.input), 0o600); err != nil {
			t.Fatal(err)
		}
		a, out := n.answer(admin, "tool", "create", "--input", in)
		if a.Stopped == nil || !strings.Contains(*a.Stopped, c.field) {
			t.Errorf("create with %s was not refused naming it: %s", c.field, out)
		}
	}
	r = n.repo()
	after, _, err := r.Received(n.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.User(n.ctx, "closed-1"); err == nil {
		t.Errorf("a refused create made the user closed-1")
	}
	r.Close()
	if len(after) != len(before) {
		t.Errorf("the refused creates wrote %d artifacts", len(after)-len(before))
	}

	rec := `{"ocx": 1, "kind": "record", "user": "closed-2", "node": "` + n.nodeUser() + `", "runner": "native", "objective": "o",
"checkins": ["trunk"], "hears": ["` + person + `"], "remote": false, "restrict": {},
"sandbox": {"network": true, "read_only": [], "read_write": [], "cpus": 2}, "budget": {"wall": "1h"}}`
	record := n.result(admin, "thread", "--title", "A record with a key it does not know", "--text", "Record.\n\n"+block(rec))
	ci := newCommitter(t, n).commit("a.txt")
	a, out := n.answer(person, "tool", "audit", "--checkin", ci, "--verdict", "pass", "--reason", "fine", "--against", record)
	if a.Stopped == nil || !strings.Contains(*a.Stopped, "is no record") || !strings.Contains(*a.Stopped, "sandbox.cpus") {
		t.Errorf("a verdict against a record with sandbox.cpus was not refused naming it: %s", out)
	}
}

// branchScript answers a post with its text and the branch its workspace's
// tree is on, as Fossil says it.
const branchScript = `read -r line; b=$(cd "$HOME/tree" && fossil branch current 2>&1); printf 'echo: %s on %s\n' "$line" "$b"`

// inode is the file's inode number.
func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestWorkspaceIsTheAgentsOwnAndOutlivesItsSessions is seed 000's part
// "workspace" and three of its decisions end to end. "Which branch does a
// listener's work go on? The workspace's one branch, named by its
// definition; a listener chooses none": a workspace defined on feature
// answers, through a ticket listener and on its own thread, from a tree on
// feature. "How cheap must a workspace and a session be? A workspace is
// made once, by a network clone as the agent, and reused by every session
// after; a session is a process and a pipe in it, with no clone" and "it
// outlives its sessions: each session reuses the clone and tree": a second
// session finds the same clone and tree (their inodes), and no other
// repository file is made. "May agents share a clone? Never": another
// login's workspace has a clone of its own, each remembering its own
// login, neither the node's repository. "Only Terminate or gc removes it,
// and gc skips a workspace a running process names": a terminated note on
// its record leaves it to gc, which leaves it alone while its session
// runs and would remove it once the session is stopped.
func TestWorkspaceIsTheAgentsOwnAndOutlivesItsSessions(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	admin := n.srv.AdminLogin
	n.must("", "hook", "install")
	newCommitter(t, n).commitWith("f.txt", "", "--branch", "feature")
	const a1, a2 = "agent-31", "agent-32"
	n.must("", "login", "add", a1)
	n.must("", "login", "add", a2)
	start := time.Now()
	record := n.result(admin, "workspace", "add", "--login", a1, "--project", "demo", "--branch", "feature")
	t.Logf("workspace add (a clone over the network as %s, a tree, binding.json) took %s", a1, time.Since(start))
	ws := n.workspaceDir(a1)
	clone, tree := filepath.Join(ws, "clone"), filepath.Join(ws, "tree")
	cloneIno, treeIno := inode(t, clone), inode(t, tree)
	id := n.result(person, "ticket", "--title", "a ticket", "--text", "for the session")

	session := func() string {
		t.Helper()
		launch := n.result(admin, "session", "start", key(a1), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", branchScript)
		n.waitFor("the session of "+a1+" to listen", func() bool {
			s, ok := sessionOf(n.status(), a1)
			return ok && s.Listening && s.Launch == launch
		})
		return launch
	}
	answers := func(step string) {
		t.Helper()
		said := n.result(person, "post", "--to", record, "--text", step)
		if r := n.awaitReplyBy(a1, record, said); r.Text != "echo: "+step+" on feature\n" && strings.TrimSpace(r.Text) != "echo: "+step+" on feature" {
			t.Errorf("%s: the session's answer on its thread: %q, want its work on feature", step, r.Text)
		}
		n.result(person, "post", "--to", id, "--text", step+" on the ticket")
		n.waitFor(step+": the session's answer on the ticket", func() bool {
			for _, c := range n.ticket(id) {
				if c.Sender == a1 && strings.Contains(c.Text, "echo: "+step+" on the ticket on feature") {
					return true
				}
			}
			return false
		})
	}
	session()
	n.result("", "listener", "add", key(a1), "--kind", "ticket", "--names", id)
	answers("first")
	n.must("", "session", "stop", key(a1))
	n.waitFor("the first session gone", func() bool { _, ok := sessionOf(n.status(), a1); return !ok })
	session()
	answers("second")
	if inode(t, clone) != cloneIno || inode(t, tree) != treeIno {
		t.Errorf("the second session has another clone or tree (inodes %d, %d; were %d, %d)", inode(t, clone), inode(t, tree), cloneIno, treeIno)
	}
	var repos []string
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			// The tree's checkout database and HOME's .fossil (Fossil's
			// own settings of the agent) are no repositories.
			if p == filepath.Join(ws, ".fossil") || strings.HasPrefix(p, tree+"/") {
				return nil
			}
			if b, rerr := os.ReadFile(p); rerr == nil && strings.HasPrefix(string(b), "SQLite format 3\x00") {
				repos = append(repos, p)
			}
		}
		return nil
	})
	if len(repos) != 1 || repos[0] != clone {
		t.Errorf("the workspace holds the repository files %v, want its one clone", repos)
	}

	n.result(admin, "workspace", "add", "--login", a2, "--project", "demo", "--branch", "trunk")
	other := filepath.Join(n.workspaceDir(a2), "clone")
	if inode(t, other) == cloneIno || inode(t, other) == inode(t, n.srv.Repo) || cloneIno == inode(t, n.srv.Repo) {
		t.Errorf("a clone is shared: %s %d, %s %d, the node's repository %d", clone, cloneIno, other, inode(t, other), inode(t, n.srv.Repo))
	}
	for login, c := range map[string]string{a1: clone, a2: other} {
		if r, err := fossilio.Remembered(n.ctx, c); err != nil || r.Login != login {
			t.Errorf("%s's clone remembers %+v (%v), want its own login", login, r, err)
		}
	}

	block, err := (&messages.TerminatedNote{Login: a1, Project: "demo", Reason: "done"}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	n.push(admin, admin, record, record, string(block))
	gc, out := n.answer(admin, "workspace", "gc", "--dry-run")
	if log := strings.Join(gc.Log, "\n"); gc.Stopped != nil || !strings.Contains(log, "a running process names it") || strings.Contains(log, "remove "+ws) {
		t.Errorf("a collection while the session runs: %s", out)
	}
	n.must("", "session", "stop", key(a1))
	n.waitFor("the second session gone", func() bool { _, ok := sessionOf(n.status(), a1); return !ok })
	gc, out = n.answer(admin, "workspace", "gc", "--dry-run")
	if log := strings.Join(gc.Log, "\n"); gc.Stopped != nil || !strings.Contains(log, "remove "+ws) {
		t.Errorf("a collection once the session is stopped: %s", out)
	}
	if _, err := os.Stat(clone); err != nil {
		t.Errorf("a dry run removed the workspace: %v", err)
	}
}
