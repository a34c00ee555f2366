package itest

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// leakScript prints, on both streams, what a run's process can learn of
// its password: the obscured form its clone ($1) remembers once it has
// pulled (Fossil obscures it afresh, with a salt of its own), and that form
// undone (Fossil's obscure: a salt byte, then each byte XORed with the
// salt and a fixed key), which is the shared secret the server checks. It
// prints a token naming its run ($2) too, and lines keep.match does not
// keep, then fails so that its STDOUT is kept.
const leakScript = `fossil pull -R "$1" >/dev/null 2>&1 || echo "ERROR: the pull failed"
o=$(fossil sql -R "$1" "SELECT value FROM config WHERE name='last-sync-pw'" | tr -d "'")
p=$(perl -e '@b = map { hex } unpack("(A2)*", $ARGV[0]); $s = shift @b;
@k = (0xa7,0x21,0x31,0xe3,0x2a,0x50,0x2c,0x86,0x4c,0xa4,0x52,0x25,0xff,0x49,0x35,0x85);
print join("", map { chr($b[$_] ^ $k[$_ & 15] ^ $s) } 0..$#b)' "$o")
echo "noise: a line keep.match drops"
echo "ERROR: remembered $o"
echo "ERROR: password $p"
echo "fine: password $p"
echo "ERROR: token tok-$2"
echo "ERROR: password $p" >&2
echo "noise $p" >&2
printf "ERROR: cut $p"
exit 3
`

// TestRunKeptLogsFiltered is D98 end to end, on the real daemon, holder
// and Fossil server: a run whose password step takes a fresh password,
// whose process prints what it can learn of it (the form its clone
// remembers and the shared secret behind it) on STDOUT and STDERR, a
// token keep.mask names through a value, and lines keep.match does not
// match. The kept logs hold only the lines matched, each secret masked;
// no artifact of the repository holds any secret, nor a part of one of
// 12 characters, nor the token; nor do the workspace's kept log files,
// `ocx run status` or the daemon's log.
func TestRunKeptLogsFiltered(t *testing.T) {
	needs(t, "ocxd", "ocx")
	n := newNodeWith(t, harness.User{Login: "runner", Password: "runner-pw-1", Caps: fossilio.AgentCaps})
	admin := n.srv.AdminLogin
	node := n.nodeUser()
	script := filepath.Join(t.TempDir(), "leak.sh")
	if err := os.WriteFile(script, []byte(leakScript), 0o644); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, n, program("ocxd"))
	run := fmt.Sprintf(`{"ocx": 1, "kind": "run", "node": %q, "objective": "Print the password, and keep only the errors.",
"workspace": [
  {"step": "directory", "at": "$$root$$/$$user$$/projects/$$project$$/$$run$$"},
  {"step": "password"},
  {"step": "clone", "into": "$$workspace$$/clone"}
],
"process": {"user": "runner", "command": ["sh", %q, "$$clone$$", "$$run$$"],
  "env": {"PATH": "/usr/bin:/bin", "HOME": "$$workspace$$"},
  "keep": {"mask": ["tok-$$run$$"], "match": "^ERROR"}}}`, node, script)
	root := n.result(admin, "thread", "--title", "Keep the errors", "--text", block(run))
	n.waitFor("the run's ended", func() bool { return n.endedOf(root) != nil })
	if e := n.endedOf(root); e.Outcome != runmsg.RunExited || e.Exit == nil || *e.Exit != 3 {
		t.Fatalf("ended %+v, want exited 3", e)
	}
	st := n.startedOf(root)
	ws := st.Values["workspace"]

	// The secrets: what the clone remembers, and the shared secret behind
	// it, which is what the server holds for runner now.
	obscured, err := n.srv.Fossil("sql", "-R", filepath.Join(ws, "clone"), "SELECT value FROM config WHERE name='last-sync-pw'")
	if err != nil {
		t.Fatal(err)
	}
	obscured = strings.Trim(strings.TrimSpace(obscured), "'")
	shared := fossilio.Unobscure(obscured)
	onServer, err := n.srv.Fossil("sql", "-R", n.srv.Repo, "SELECT pw FROM user WHERE login='runner'")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Trim(strings.TrimSpace(onServer), "'") != shared || len(shared) != 40 {
		t.Fatalf("the clone remembers %q, the server holds %q for runner: the process did not print the password", shared, onServer)
	}
	// The token is masked whole; the run's hash in it is no secret.
	token := "tok-" + root
	secrets := []string{obscured, shared}

	// The kept logs: the lines matched, the secrets masked.
	var kept string
	for _, p := range n.runThread(root) {
		if p.Msg == nil && p.Sender == node {
			kept = p.Text
		}
	}
	t.Logf("the kept logs:\n%s", kept)
	for _, want := range []string{
		"```stderr\nERROR: password ***\n```",
		"```stdout\nERROR: remembered ***\nERROR: password ***\nERROR: token ***\nERROR: cut ***\n```",
		"exit: 3",
	} {
		if !strings.Contains(kept, want) {
			t.Errorf("the kept logs hold no %q", want)
		}
	}
	for _, gone := range []string{"noise", "fine:"} {
		if strings.Contains(kept, gone) {
			t.Errorf("the kept logs hold %q, a line keep.match does not match", gone)
		}
	}

	// No artifact holds a secret, whole or 12 characters of it.
	out, err := n.srv.Fossil("sql", "-R", n.srv.Repo, "SELECT hex(content(uuid)) FROM blob WHERE size>=0")
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	count := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		b, err := hex.DecodeString(strings.Trim(strings.TrimSpace(l), "'"))
		if err != nil {
			t.Fatalf("an artifact's content: %v", err)
		}
		all.Write(b)
		all.WriteByte(0)
		count++
	}
	if !strings.Contains(all.String(), "ERROR: password ***") {
		t.Errorf("the %d artifacts read do not hold the kept logs", count)
	}
	leaks := func(where, text string) {
		if strings.Contains(text, token) {
			t.Errorf("%s holds the token %q keep.mask names", where, token)
		}
		for _, s := range secrets {
			for i := 0; i+12 <= len(s); i++ {
				if strings.Contains(text, s[i:i+12]) {
					t.Errorf("%s holds %q, part of the secret %q", where, s[i:i+12], s)
					break
				}
			}
		}
	}
	leaks(fmt.Sprintf("the repository's %d artifacts", count), all.String())
	for _, f := range []string{"stdout.log", "stderr.log"} {
		b, err := os.ReadFile(filepath.Join(ws, f))
		if err != nil {
			t.Errorf("the workspace's %s: %v", f, err)
		}
		leaks("the workspace's "+f, string(b))
	}
	status := n.must("", "run", "status", root).stdout
	if !strings.Contains(status, "ended") {
		t.Errorf("run status: %s", status)
	}
	leaks("ocx run status", status)
	dlog, _ := os.ReadFile(n.seen(filepath.Join(n.agents, "ocxd.log")))
	leaks("the daemon's log", string(dlog))
}
