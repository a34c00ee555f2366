package tools_test

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// Issue 22 item 3 (D47): the restrictions of an agent's record come from
// the node's repository and the artifacts' own bytes, never from the
// agent's clone or workspace.

// fossilIn runs fossil on a clone, as the agent could on its own.
func (f *fix) fossilIn(dir string, args ...string) string {
	f.T.Helper()
	cmd := exec.Command("fossil", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "FOSSIL_HOME=" + dir, "USER=" + agent}
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.T.Fatalf("fossil %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestToolPostOwnThreadFromTheNode: the agent's record is found on the
// node, not through its listening files: with them gone, a post outside
// its thread is still refused.
func TestToolPostOwnThreadFromTheNode(t *testing.T) {
	f := newFix(t)
	other := f.OK(f.N.Thread(f.Ctx, node.PostInput{Title: "Elsewhere", Text: "another thread"}))
	record, agentC := f.agentRecord("agent-2", runmsg.Restrict{NoPassword: true, OwnThread: true})
	if err := os.RemoveAll(filepath.Join(f.Agents, "agent-2", "projects", "demo", "session", "listening")); err != nil {
		t.Fatal(err)
	}
	before := f.count()
	f.Refused(f.call(agentC, "post", `{"to": "`+*other.Result+`", "text": "no file holds me"}`), "outside the thread of record "+record, "restrict own_thread")
	if f.count() != before {
		t.Errorf("a refused post wrote")
	}
	f.OK(f.call(agentC, "post", `{"to": "`+record+`", "text": "in my thread"}`))
}

// trunkTip is the newest check-in of the fixture's repository.
func (f *fix) trunkTip() string {
	f.T.Helper()
	tip, err := f.Repo().Checkins(f.Ctx)
	if err != nil || len(tip) == 0 {
		f.T.Fatal(err)
	}
	return tip[len(tip)-1].Hash
}

// TestToolPushRefusesAControlArtifactFile: push reads each file it sends
// from its own bytes; one that is a tag change (a control artifact Fossil
// would apply, sent by the agent: here closing trunk's tip) is refused,
// naming its hash and what it is, and nothing is pushed.
func TestToolPushRefusesAControlArtifactFile(t *testing.T) {
	f := newFix(t)
	trunk := f.trunkTip()
	// A file whose bytes are a tag change closing trunk's tip.
	_, ctl := f.agentRecord("agent-3", runmsg.Restrict{NoPassword: true})
	closing, err := fossilio.ControlDraft{Date: time.Now(), User: "agent-3", Tags: []fossilio.Tag{{Op: fossilio.TagAdd, Name: "closed", Target: trunk}}}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f.commit("agent-3", "close.txt", string(closing))
	before := f.count()
	f.Refused(f.call(ctl, "push", `{}`), fossilio.HashOf(closing), "a tag change (a control artifact)", "nothing pushed")
	if f.count() != before {
		t.Errorf("a refused push wrote")
	}
}

// TestToolPushRefusesAManifestTaggingAnother: a check-in whose manifest
// tags another artifact (trunk's tip, closed), put in the clone as the
// agent can (the bytes, then Fossil's own cross-link), is refused.
func TestToolPushRefusesAManifestTaggingAnother(t *testing.T) {
	f := newFix(t)
	trunk := f.trunkTip()
	_, tagger := f.agentRecord("agent-4", runmsg.Restrict{NoPassword: true})
	ws := filepath.Join(f.Agents, "agent-4", "projects", "demo")
	cards := "C a\\scheck-in\nD 2024-01-01T00:00:00\nP " + trunk + "\nT +closed " + trunk + "\nU agent-4\n"
	sum := md5.Sum([]byte(cards))
	manifest := cards + "Z " + hex.EncodeToString(sum[:]) + "\n"
	file := filepath.Join(t.TempDir(), "manifest")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	f.fossilIn(filepath.Join(ws, "tree"), "test-content-put", file)
	f.fossilIn(filepath.Join(ws, "tree"), "test-crosslink", fossilio.HashOf([]byte(manifest)))
	before := f.count()
	f.Refused(f.call(tagger, "push", `{}`), "checkin "+fossilio.HashOf([]byte(manifest)), "tags another artifact", "nothing pushed")
	if f.count() != before {
		t.Errorf("a refused push wrote")
	}
}

// TestToolPushBranchFromTheManifest: a check-in's branch is its
// manifest's; the clone's tagxref, rewritten to say "feature" of a
// check-in on "other", is not believed.
func TestToolPushBranchFromTheManifest(t *testing.T) {
	f := newFix(t)
	_, held := f.agentRecord("agent-5", runmsg.Restrict{NoPassword: true, Branch: "feature"})
	ci := f.commit("agent-5", "o.txt", "o\n", "--branch", "other")
	ws := filepath.Join(f.Agents, "agent-5", "projects", "demo")
	f.fossilIn(filepath.Join(ws, "tree"), "sql", "UPDATE tagxref SET value='feature' WHERE value='other'")
	before := f.count()
	f.Refused(f.call(held, "push", `{}`), "checkin "+ci, `is on branch "other", not "feature"`, "nothing pushed")
	if f.count() != before {
		t.Errorf("a refused push wrote")
	}
}

// TestLoginRotateHoldsToTheNode: rotate never gives a no_password clone
// the password; it writes no clone that is a link (here to the node's own
// repository), and takes the server's URL from the node, not from the
// workspace's binding.json.
func TestLoginRotateHoldsToTheNode(t *testing.T) {
	f := newFix(t)
	f.agentRecord("agent-6", runmsg.Restrict{NoPassword: true})
	f.OK(f.N.LoginRotate(f.Ctx, "agent-6", false))
	if rem, err := fossilio.Remembered(f.Ctx, filepath.Join(f.Agents, "agent-6", "projects", "demo", "clone")); !errors.Is(err, fossilio.ErrNoPassword) {
		t.Errorf("the no_password clone remembers %+v (%v) after a rotation", rem, err)
	}

	f.AddWorkspace()
	clone := filepath.Join(f.WS(), "clone")
	if err := os.Rename(clone, clone+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.Srv.Repo, clone); err != nil {
		t.Fatal(err)
	}
	a := f.OK(f.N.LoginRotate(f.Ctx, agent, false))
	if !strings.Contains(strings.Join(a.Log, "\n"), "symbolic link") {
		t.Errorf("rotate through a link: %q", a.Log)
	}
	if _, ok, _ := f.Repo().Config(f.Ctx, "last-sync-pw"); ok {
		t.Errorf("rotate wrote the node's repository through the link")
	}
	if err := os.Remove(clone); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(clone+".real", clone); err != nil {
		t.Fatal(err)
	}
	binding := filepath.Join(f.WS(), "binding.json")
	data, err := os.ReadFile(binding)
	if err != nil {
		t.Fatal(err)
	}
	b, err := messages.DecodeBinding(data)
	if err != nil {
		t.Fatal(err)
	}
	b.Remote = "http://127.0.0.1:9/elsewhere"
	if data, err = b.Encode(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(binding, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f.OK(f.N.LoginRotate(f.Ctx, agent, false))
	pw, err := fossilio.ReadPasswordFile(filepath.Join(f.Agents, agent, "password"))
	if err != nil {
		t.Fatal(err)
	}
	rem, err := fossilio.Remembered(f.Ctx, clone)
	if err != nil || rem.URL != f.Srv.URL || rem.Login != agent || rem.Password != fossilio.SharedSecret(f.Srv.ProjectCode, agent, pw) {
		t.Errorf("the clone remembers %+v (%v); want %s as %s with the new password", rem, err, f.Srv.URL, agent)
	}
}
