package fossilio_test

import (
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
)

func (n *node) admin() *fossilio.Admin {
	return &fossilio.Admin{Repository: n.srv.Repo, Fossil: &fossilio.Fossil{Home: n.srv.Home}}
}

func TestProvisionAgent(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	a := n.admin()
	pwFile := filepath.Join(t.TempDir(), "agents", "claude-7f3a2b", "password")
	if err := a.ProvisionAgent(ctx, "claude-7f3a2b", pwFile); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(pwFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v %v", st, err)
	}
	pw, err := fossilio.ReadPasswordFile(pwFile)
	if err != nil || len(pw) < 20 {
		t.Fatalf("password %q %v", pw, err)
	}
	u, err := n.repo.User(ctx, "claude-7f3a2b")
	if err != nil || u.Caps != fossilio.AgentCaps {
		t.Fatalf("user %+v %v", u, err)
	}
	// Exactly the agent's capabilities, nothing from nobody or anonymous.
	eff, err := n.repo.EffectiveCaps(ctx, "claude-7f3a2b")
	if err != nil || eff != "4cghijnorz" {
		t.Fatalf("effective caps %q %v, want the sorted AgentCaps", eff, err)
	}
	if anon := n.sql("SELECT cap FROM user WHERE login='anonymous'"); anon != "'hnc'" {
		t.Fatalf("anonymous tightened to %s, want 'hnc' (m removed)", anon)
	}
	// The agent really can write, and is recorded as the sender.
	n.pw["claude-7f3a2b"] = pw
	h, err := n.client("claude-7f3a2b").NewThread(ctx, "agent", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if s := n.senderByFossil(h); s != "claude-7f3a2b" {
		t.Fatalf("sender %q", s)
	}
	// Provisioning again keeps the password it kept.
	if err := a.ProvisionAgent(ctx, "claude-7f3a2b", pwFile); err != nil {
		t.Fatal(err)
	}
	if again, _ := fossilio.ReadPasswordFile(pwFile); again != pw {
		t.Fatal("provisioning again changed the kept password")
	}

	// Rotation: the old password is refused, the new one works.
	newPw, err := a.RotatePassword(ctx, "claude-7f3a2b", pwFile)
	if err != nil {
		t.Fatal(err)
	}
	if kept, _ := fossilio.ReadPasswordFile(pwFile); kept != newPw || newPw == pw {
		t.Fatalf("kept %q, rotated to %q, old %q", kept, newPw, pw)
	}
	_, err = n.client("claude-7f3a2b").NewThread(ctx, "old password", "x")
	var re *fossilio.RefusedError
	if !errors.As(err, &re) || !strings.Contains(re.Reason, "login failed") {
		t.Fatalf("old password: %v", err)
	}
	n.pw["claude-7f3a2b"] = newPw
	if _, err := n.client("claude-7f3a2b").NewThread(ctx, "new password", "x"); err != nil {
		t.Fatal(err)
	}

	// Withdrawal takes every capability; the user stays.
	if err := a.Withdraw(ctx, "claude-7f3a2b"); err != nil {
		t.Fatal(err)
	}
	u, err = n.repo.User(ctx, "claude-7f3a2b")
	if err != nil || u.Caps != "" {
		t.Fatalf("after withdrawal: %+v %v", u, err)
	}
	_, err = n.client("claude-7f3a2b").NewThread(ctx, "withdrawn", "x")
	if !errors.As(err, &re) || !strings.Contains(re.Reason, "not authorized to write") {
		t.Fatalf("write after withdrawal: %v", err)
	}
	if info, err := n.repo.Info(ctx, h); err != nil || info.Sender != "claude-7f3a2b" {
		t.Fatalf("the withdrawn login's post: %+v %v", info, err)
	}
}

func TestAdminRefuses(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	a := n.admin()
	for _, caps := range []string{"a", "s", "gios", "ia"} {
		if err := a.SetCaps(ctx, "alice", caps); !errors.Is(err, fossilio.ErrPrivileged) {
			t.Errorf("SetCaps(%q): %v, want ErrPrivileged", caps, err)
		}
		if err := a.SetUser(ctx, "eve", "pw", caps); !errors.Is(err, fossilio.ErrPrivileged) {
			t.Errorf("SetUser(%q): %v, want ErrPrivileged", caps, err)
		}
	}
	if u, _ := n.repo.User(ctx, "alice"); u.Caps != "gio" {
		t.Fatalf("a refused change was half-written: %q", u.Caps)
	}
	for _, login := range []string{"nobody", "anonymous", "bad name", "-x", "", ".."} {
		if err := a.SetUser(ctx, login, "pw", "i"); !errors.Is(err, fossilio.ErrBadInput) {
			t.Errorf("SetUser(%q): %v, want ErrBadInput", login, err)
		}
	}
	if err := a.SetCaps(ctx, "zed", "i"); !errors.Is(err, fossilio.ErrNoSuchUser) {
		t.Errorf("SetCaps of an unknown user: %v", err)
	}
	if err := a.SetPassword(ctx, "zed", "pw"); !errors.Is(err, fossilio.ErrNoSuchUser) {
		t.Errorf("SetPassword of an unknown user: %v", err)
	}
	if err := a.Withdraw(ctx, "zed"); !errors.Is(err, fossilio.ErrNoSuchUser) {
		t.Errorf("Withdraw of an unknown user: %v", err)
	}
	notRepo := &fossilio.Admin{Repository: filepath.Join(t.TempDir(), "none.fossil")}
	if err := notRepo.SetCaps(ctx, "alice", "i"); err == nil {
		t.Error("SetCaps on a missing repository succeeded")
	}
	loose := filepath.Join(t.TempDir(), "password")
	os.WriteFile(loose, []byte("secret\n"), 0o644)
	if _, err := fossilio.ReadPasswordFile(loose); !errors.Is(err, fossilio.ErrBadInput) {
		t.Errorf("a password file others may read: %v", err)
	}
}

func TestWriteRefusals(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	var re *fossilio.RefusedError
	wrong := n.client("alice")
	wrong.Password = "not-alice-pw"
	if _, err := wrong.NewThread(ctx, "t", "x"); !errors.As(err, &re) || re.Reason != "login failed" {
		t.Errorf("wrong password: %v", err)
	}
	if _, err := n.client("dave").NewThread(ctx, "t", "x"); !errors.As(err, &re) || re.Reason != "not authorized to write" {
		t.Errorf("no capability i: %v", err)
	}
	// The shared secret logs in whatever the project code; the push card
	// then names another project.
	other := n.client("alice")
	other.Password = fossilio.SharedSecret(n.srv.ProjectCode, "alice", "alice-pw")
	other.ProjectCode = strings.Repeat("a", 40)
	if _, err := other.NewThread(ctx, "t", "x"); !errors.As(err, &re) || !strings.Contains(re.Reason, "project") {
		t.Errorf("wrong project: %v", err)
	}
	if _, err := n.client("alice").Tag(ctx, firstCheckin(t, n), "cafe", "x"); !errors.Is(err, fossilio.ErrBadInput) {
		t.Errorf("all-hex tag name: %v", err)
	}
	// A tag on an artifact the server lacks is stored, but the server asks
	// for the missing one, which embargoes its hooks: the writer says so.
	if _, err := n.client("alice").Tag(ctx, strings.Repeat("ab", 32), "ci", "x"); !errors.Is(err, fossilio.ErrPhantom) {
		t.Errorf("tag on an unknown check-in: %v", err)
	}
	if _, err := (&fossilio.Client{URL: "http://alice:pw@127.0.0.1:1/", Login: "alice", Password: "x", ProjectCode: n.srv.ProjectCode}).NewThread(ctx, "t", "x"); !errors.Is(err, fossilio.ErrBadInput) {
		t.Errorf("credentials in the URL: %v", err)
	}
	// Nothing refused was stored.
	if c := n.sql("SELECT count(*) FROM event WHERE type='f'"); c != "0" {
		t.Errorf("%s posts stored after refusals", c)
	}
	// The phantom stays: the server asks every later push for it, and
	// embargoes its hooks again each time. A write that names nothing
	// missing is not refused for it.
	h, err := n.client("bob").NewThread(ctx, "after the phantom", "x")
	if err != nil {
		t.Errorf("a write while the server keeps an older phantom: %v", err)
	}
	if s := n.senderByFossil(h); s != "bob" {
		t.Errorf("the write after the phantom: sender %q", s)
	}
	if st := n.sql("SELECT count(*) FROM config WHERE name='hook-embargo' AND value+0>now()"); st != "1" {
		t.Errorf("no hook embargo after a push the server answered with gimme (%s)", st)
	}
}

func TestWriteWithSharedSecret(t *testing.T) {
	n := newNode(t)
	c := n.client("bob")
	c.Password = fossilio.SharedSecret(n.srv.ProjectCode, "bob", "bob-pw")
	h, err := c.NewThread(n.ctx, "secret", "written with the shared secret")
	if err != nil {
		t.Fatal(err)
	}
	if s := n.senderByFossil(h); s != "bob" {
		t.Fatalf("sender %q", s)
	}
	// The admin made by fossil init writes too (its password is hashed by
	// the harness, as fossilio.Admin does for every login).
	if _, err := n.client(n.srv.AdminLogin).NewThread(n.ctx, "admin", "x"); err != nil {
		t.Fatal(err)
	}
}

func TestNotesWriter(t *testing.T) {
	n := newNode(t)
	w := &fossilio.Notes{URL: n.srv.URL, ProjectCode: n.srv.ProjectCode, Password: func(login string) (string, error) {
		if pw, ok := n.pw[login]; ok {
			return pw, nil
		}
		return "", errors.New("no password")
	}}
	root, err := w.WriteNote(n.ctx, fossilio.NoteWrite{Login: "alice", Title: "Workspace", Text: "```json\n{\"ocx\": \"workspace\"}\n```\n"})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := w.WriteNote(n.ctx, fossilio.NoteWrite{Login: "bob", Thread: root, ReplyTo: root, Text: "```json\n{\"ocx\": \"launch\"}\n```\n"})
	if err != nil {
		t.Fatal(err)
	}
	_, ticket, err := n.client("alice").NewTicket(n.ctx, fossilio.Field{Name: "title", Value: "t"})
	if err != nil {
		t.Fatal(err)
	}
	tn, err := w.WriteNote(n.ctx, fossilio.NoteWrite{Login: "bob", Ticket: ticket, Text: "```json\n{\"ocx\": \"end\"}\n```\n"})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := n.repo.Classify(n.ctx, root, reply, tn)
	if err != nil {
		t.Fatal(err)
	}
	if infos[0].Sender != "alice" || infos[1].Sender != "bob" || infos[1].InReplyTo != root || infos[2].Ticket != ticket || infos[2].Sender != "bob" {
		t.Fatalf("notes: %+v", infos)
	}
	if _, err := w.WriteNote(n.ctx, fossilio.NoteWrite{Login: "bob", Thread: root, Text: "x"}); !errors.Is(err, fossilio.ErrBadInput) {
		t.Fatalf("a note with no place: %v", err)
	}
	if _, err := w.WriteNote(n.ctx, fossilio.NoteWrite{Login: "zed", Title: "x", Text: "x"}); err == nil {
		t.Fatal("a note by a login without password was written")
	}
}

// hookLog installs OCX's hook as a script that appends what it reads to a
// file, and returns the file.
func (n *node) installLoggingHook(name string) string {
	n.t.Helper()
	dir := n.t.TempDir()
	log := filepath.Join(dir, name+".log")
	script := filepath.Join(dir, name+".sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncat >> "+log+"\necho done >> "+log+"\n"), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := n.admin().InstallHook(n.ctx, script+" %R"); err != nil {
		n.t.Fatal(err)
	}
	return log
}

// waitFor polls a file until it holds want (hooks run after the backoffice
// returns, since Fossil does not wait for them).
func waitFor(t *testing.T, path, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q; it holds %q", path, want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHookInstallRunsOnceFromTheNextReceipt(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	a := n.admin()
	old, err := n.client("alice").NewThread(ctx, "before the hook", "x")
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's hook, which OCX must keep.
	if _, err := n.srv.Fossil("hook", "add", "--type", "after-receive", "--command", "true other-hook", "-R", n.srv.Repo); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveHook(ctx); err != nil {
		t.Fatal(err)
	}
	log := n.installLoggingHook("first")
	st, err := a.Hook(ctx)
	if err != nil || !st.Installed || st.Others != 1 || !strings.HasSuffix(st.Command, "first.sh %R") {
		t.Fatalf("hook status %+v %v", st, err)
	}
	// Installing again replaces; the entry count stays.
	log2 := n.installLoggingHook("second")
	st, _ = a.Hook(ctx)
	if !strings.HasSuffix(st.Command, "second.sh %R") || st.Others != 1 {
		t.Fatalf("after replacing: %+v", st)
	}
	if c := n.sql("SELECT json_array_length(value) FROM config WHERE name='hooks'"); c != "2" {
		t.Fatalf("hooks setting holds %s entries, want 2", c)
	}
	// The repository reader sees the same, as the daemon's hook watch and
	// its status read it.
	if rs, err := n.repo.Hook(ctx); err != nil || rs != st {
		t.Fatalf("Repo.Hook = %+v, %v; Admin.Hook %+v", rs, err, st)
	}
	if cmd, ok, err := n.repo.OCXHook(ctx); err != nil || !ok || cmd != st.Command {
		t.Fatalf("OCXHook = %q, %v, %v; want %q installed", cmd, ok, err, st.Command)
	}
	before, err := n.repo.NewestReceipt(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := n.client("bob")
	c.Backoffice = a.Backoffice
	h1, err := c.NewThread(ctx, "after the hook", "y")
	if err != nil {
		t.Fatal(err)
	}
	if after, err := n.repo.NewestReceipt(ctx); err != nil || after != before+1 {
		t.Fatalf("newest receipt after one write: %d, %v; want %d", after, err, before+1)
	}
	// The watch's one read says the same, and that the writer's backoffice
	// (run before NewThread returned) launched the hooks for it.
	if l, err := n.repo.HookLook(ctx, 0); err != nil || !l.Installed || l.Command != st.Command || l.Newest != before+1 || l.Fossil != before+1 {
		t.Fatalf("HookLook = %+v, %v; want %q installed, newest and Fossil's %d", l, err, st.Command, before+1)
	}
	got := waitFor(t, log2, "done")
	if !strings.Contains(got, h1+" forum-post") || strings.Contains(got, old) {
		t.Fatalf("the first run got %q; want %s and not %s", got, h1, old)
	}
	if _, err := os.Stat(log); err == nil {
		t.Fatal("the replaced hook ran")
	}
	// A second write within the server's 60 s lease reaches the hook at
	// once through the backoffice the writer runs.
	h2, err := c.Reply(ctx, h1, h1, "z")
	if err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, log2, h2)
	if strings.Count(got, h1) != 1 {
		t.Fatalf("the hook saw %s again: %q", h1, got)
	}

	if err := a.RemoveHook(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveHook(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ = a.Hook(ctx)
	if st.Installed || st.Others != 1 {
		t.Fatalf("after removing: %+v", st)
	}
	if rs, err := n.repo.Hook(ctx); err != nil || rs != st {
		t.Fatalf("Repo.Hook after removing = %+v, %v; Admin.Hook %+v", rs, err, st)
	}
	if cmd, ok, err := n.repo.OCXHook(ctx); err != nil || ok {
		t.Fatalf("OCXHook after removing = %q, %v, %v; want none", cmd, ok, err)
	}
	if l, err := n.repo.HookLook(ctx, 0); err != nil || l.Installed || l.Command != "" {
		t.Fatalf("HookLook after removing = %+v, %v; want no hook", l, err)
	}
	if out, _ := n.srv.Fossil("hook", "list", "-R", n.srv.Repo); !strings.Contains(out, "other-hook") {
		t.Fatalf("the other hook is gone: %s", out)
	}
}

func TestGitExport(t *testing.T) {
	n := newNode(t)
	ctx := n.ctx
	a := n.admin()
	// Without a mirror, nothing happens.
	if err := a.GitExport(ctx); err != nil {
		t.Fatal(err)
	}
	mirror := filepath.Join(t.TempDir(), "mirror")
	if _, err := n.srv.Fossil("git", "export", mirror, "--mainbranch", "main", "-R", n.srv.Repo); err != nil {
		t.Fatal(err)
	}
	ws := n.workspace("alice", "trunk")
	ci := ws.commit("a.txt", "1\n", "mirrored", "")
	if err := a.GitExport(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := n.srv.Fossil("git", "status", "-R", n.srv.Repo)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "up-to-date") {
		t.Fatalf("mirror not current after GitExport: %s", out)
	}
	gitLog, err := exec.Command("git", "-C", mirror, "log", "--format=%B", "main").CombinedOutput()
	if err != nil {
		t.Fatalf("git log: %v: %s", err, gitLog)
	}
	if !strings.Contains(string(gitLog), "FossilOrigin-Name: "+ci) {
		t.Fatalf("the mirror lacks %s:\n%s", ci, gitLog)
	}
}

// TestUseWAL switches a served repository to write-ahead logging: the mode
// lasts, and a push succeeds while a reader holds a transaction open, which
// under the rollback journal a new repository starts with it would not.
func TestUseWAL(t *testing.T) {
	n := newNode(t)
	if mode := n.sql("PRAGMA journal_mode"); mode != "'delete'" {
		t.Fatalf("a new repository's journal mode is %s; want 'delete'", mode)
	}
	mode, err := n.admin().UseWAL(n.ctx)
	if err != nil || mode != "wal" {
		t.Fatalf("UseWAL: %q %v", mode, err)
	}
	if mode := n.sql("PRAGMA journal_mode"); mode != "'wal'" {
		t.Fatalf("after UseWAL the journal mode is %s", mode)
	}
	// A reader in the middle of a transaction, as the hook or the status may be.
	db, err := sql.Open("sqlite", "file:"+n.srv.Repo+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(n.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var count int
	if err := tx.QueryRow("SELECT count(*) FROM blob").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if _, err := n.client("alice").NewThread(n.ctx, "while a reader reads", "hello"); err != nil {
		t.Fatalf("a push while a reader holds a transaction: %v", err)
	}
	// Again is harmless.
	if mode, err := n.admin().UseWAL(n.ctx); err != nil || mode != "wal" {
		t.Fatalf("UseWAL again: %q %v", mode, err)
	}
	// A file that is not a repository is refused, untouched.
	bad := filepath.Join(t.TempDir(), "not.fossil")
	if err := os.WriteFile(bad, []byte("not a repository"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&fossilio.Admin{Repository: bad}).UseWAL(n.ctx); !errors.Is(err, fossilio.ErrNotRepository) {
		t.Fatalf("UseWAL on a file that is not a repository: %v", err)
	}
}
