package itest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/itest/harness"
)

// TestSessionLogLiveInTheBrowser (issue 44 item 1): a session's page in
// Debian's chromium follows the session's log live: a post answered while
// the page is open shows its "answered" line without a reload, well
// before a long poll's wait ends; with the daemon stopped and started
// again meanwhile (the page's ask cut, then asked again from where it
// left off), the next answer shows too, and the page's log is the log's
// own bytes from where the page began, each line once.
func TestSessionLogLiveInTheBrowser(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := consoleNode(t)
	n.must("", "hook", "install")
	n.must("", "login", "add", agent)
	record := n.result(n.srv.AdminLogin, "workspace", "add", "--login", agent, "--project", "demo", "--branch", "trunk")
	n.result(n.srv.AdminLogin, "session", "start", key(agent), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)
	n.waitFor("the session to listen", func() bool {
		st := n.status()
		return len(st.Sessions) == 1 && st.Sessions[0].Listening
	})
	b := harness.StartBrowser(t)
	browserLogin(t, b, n, person)
	b.Navigate(n.srv.URL+"ext/console/session/"+agent, "#ocx-session-log")
	var from string
	b.Eval(`document.getElementById('ocx-session-log').getAttribute('data-ocx-from')`, &from)
	logPath := n.workspaceDir(agent) + "/session/log"
	if _, err := os.Stat(logPath); err != nil {
		t.Fatalf("the session's log: %v", err)
	}

	// answered waits for the log file's line for post, then for the page's.
	answered := func(post string) time.Duration {
		t.Helper()
		var inFile time.Time
		n.waitFor("the answered line in the session's log", func() bool {
			b, _ := os.ReadFile(logPath)
			if strings.Contains(string(b), "event=answered post="+post) {
				inFile = time.Now()
				return true
			}
			return false
		})
		waitText(t, b, "#ocx-session-log", "the answered line on the page", func(s string) bool { return strings.Contains(s, "event=answered post="+post) })
		return time.Since(inFile)
	}
	hello := n.result(person, "post", "--to", record, "--text", "hello")
	took := answered(hello)
	t.Logf("the answer's line on the page %s after it was in the log", took.Round(time.Millisecond))
	if took > 4*time.Second {
		t.Errorf("the answer's line came %s after it was in the log: the page did not follow it live", took)
	}
	b.Screenshot("live-log")

	// `ocx logs -f` follows the same log from the command line: its end
	// first, then what comes.
	follow := n.command(nil, program("ocx"), "logs", "-f", key(agent))
	follow.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + n.agents, "LANG=C.UTF-8", "OCX_AGENTS=" + n.agents}
	var followed lockedBuffer
	follow.Stdout, follow.Stderr = &followed, &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		follow.Process.Signal(syscall.SIGINT)
		follow.Wait()
	}()
	n.waitFor("ocx logs -f to print the log's end", func() bool { return strings.Contains(followed.String(), "event=answered post="+hello) })

	// The daemon stopped while the page waits on it, then started again by
	// the next post's hook.
	pid := n.daemonPID()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n.waitFor("the daemon to end", func() bool { return n.daemonPID() != pid })
	again := n.result(person, "post", "--to", record, "--text", "again")
	answered(again)

	n.waitFor("ocx logs -f to print the second answer", func() bool { return strings.Contains(followed.String(), "event=answered post="+again) })
	for _, post := range []string{hello, again} {
		if c := strings.Count(followed.String(), "event=answered post="+post); c != 1 {
			t.Errorf("ocx logs -f printed post %s answered %d times:\n%s", post[:10], c, followed.String())
		}
	}

	var page string
	b.Eval(`document.getElementById('ocx-session-log').textContent`, &page)
	file, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	start, err := strconv.Atoi(from)
	if err != nil || start > len(file) {
		t.Fatalf("the page began at %q of a %d-byte log", from, len(file))
	}
	since := string(file[start:])
	if !strings.HasSuffix(page, since) {
		t.Errorf("the page's log does not end with the log's own bytes from %d on:\npage:\n%s\nlog from %d:\n%s", start, page, start, since)
	}
	for _, post := range []string{hello, again} {
		if c := strings.Count(page, "event=answered post="+post); c != 1 {
			t.Errorf("the page shows post %s answered %d times", post[:10], c)
		}
	}
	b.NoErrors()
}
