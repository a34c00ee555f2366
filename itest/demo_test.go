package itest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// TestDemo runs the README's first command as a newcomer would (the
// release's `ocx demo`), follows what it prints: logs in as the person on the
// web, replies in the thread through Fossil's own form, and finds the
// session's answer; then interrupts the demo and finds every process it
// started gone, and the session's stopped and end notes on the record.
func TestDemo(t *testing.T) {
	needs(t, "ocxd", "workspace")
	demoEndToEnd(t, program("ocx"), nil, "agent-demo heard: hello from the web")
}

// TestDemoWithAModel is issue 15 item 9: with the environment naming a
// model server (here a stand-in on 127.0.0.1, as a local ollama would be),
// the demo's session is an llm session on ocx-runner-native, and the
// person's post is answered by the model.
func TestDemoWithAModel(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	model := &chatModel{t: t, replies: []string{chatText("the model says hello back")}}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	demoEndToEnd(t, filepath.Join(llmRoot, "current", "ocx"), []string{"OCX_DEMO_MODEL_URL=" + srv.URL, "OCX_DEMO_MODEL=llama3.2"},
		"the model says hello back")
	if reqs := model.requests(); len(reqs) != 1 || !strings.Contains(string(reqs[0].Messages[len(reqs[0].Messages)-1]), "hello from the web") {
		t.Errorf("the model saw %d requests; the last message of the first: %s", len(reqs), reqs[0].Messages[len(reqs[0].Messages)-1])
	}
}

// demoEndToEnd is TestDemo with the release's ocx at ocx, the environment
// added to, and the answer expected from the session.
func demoEndToEnd(t *testing.T, ocx string, env []string, want string) {
	dir := t.TempDir()
	cmd := exec.Command(ocx, "demo", "--dir", dir)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8"}, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	// stderrAtExit is what the demo wrote on its standard error, read once
	// it has exited: cmd.Wait returns only after os/exec's copier has
	// written all of it into the buffer, and reading the buffer any earlier
	// (while that goroutine may still write) is a data race. A demo still
	// running is interrupted first, then killed if it does not end.
	stderrAtExit := func() string {
		_ = cmd.Process.Signal(syscall.SIGINT)
		kill := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer kill.Stop()
		for range lines {
		}
		err := <-exited
		exited <- err
		return stderr.String()
	}
	t.Cleanup(func() {
		// Interrupted first, so that a demo a failed check leaves running
		// ends what it started by itself; killed if it does not end.
		_ = cmd.Process.Signal(syscall.SIGINT)
		kill := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		defer kill.Stop()
		for range lines {
		}
		<-exited
		for _, pid := range naming(dir) {
			t.Errorf("a process naming the demo's directory is left: %d %s", pid, cmdline(pid))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	said := map[string]string{}
	var out []string
	deadline := time.After(3 * time.Minute)
	for ready := false; !ready; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended before it was ready:\n%s\n%s", strings.Join(out, "\n"), stderrAtExit())
			}
			out = append(out, line)
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				said[k] = strings.TrimSpace(v)
			}
			ready = strings.HasPrefix(line, "ready")
			said["_lines"] += line + "\n"
		case <-deadline:
			t.Fatalf("the demo was not ready in 3 minutes:\n%s\n%s", strings.Join(out, "\n"), stderrAtExit())
		}
	}
	base := strings.TrimSpace(said["url"])
	thread := said["thread"]
	root := thread[strings.LastIndex(thread, "/")+1:]
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasPrefix(said["log in as"], "pat  password: pat") || !strings.Contains(strings.Join(out, "\n"), "post --to "+root[:10]) {
		t.Fatalf("the demo did not say what to open and type:\n%s", strings.Join(out, "\n"))
	}

	// The console it prints answers, in the repository's skin, with the
	// demo's session listening on its Sessions page.
	console := said["console"]
	if console != base+"ext/console/" {
		t.Fatalf("the demo printed the console at %q, want %sext/console/", console, base)
	}
	resp, err := http.Get(console + "sessions")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `data-ocx-session="agent-demo/demo"`) || !strings.Contains(string(page), `class="mainmenu"`) {
		t.Fatalf("the demo's console: %d\n%s", resp.StatusCode, page)
	}
	// Served by the daemon through the small console (D71), not the slow
	// path through `ocx console`: the demo's release holds every program
	// a node runs (issue 42 item 4).
	if by := resp.Header.Get("X-Ocx-Served-By"); by != "daemon" {
		t.Errorf("the demo's Sessions page was served by %q, want the daemon", by)
	}
	for _, name := range []string{host.HookProgram, host.ConsoleProgram} {
		if _, err := os.Stat(filepath.Join(dir, "release", "current", name)); err != nil {
			t.Errorf("the demo's release lacks %s: %v", name, err)
		}
	}

	// Everything else the guide and the console's pages show (issue 27
	// item 8): each thing the demo printed is there.
	demoShowsEveryFeature(t, ocx, said, dir)
	demoRunsItsPattern(t, said, dir)

	// As the person, on the web: log in, then reply through the forum's
	// own form.
	jar, _ := cookiejar.New(nil)
	web := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: time.Minute}
	form(t, web, base+"login", base+"login", url.Values{"u": {"pat"}, "p": {"pat"}, "in": {"Login"}})
	form(t, web, base+"forume2", base+"forumedit", url.Values{"fpid": {root}, "reply": {"1"}, "mimetype": {"text/x-markdown"}, "content": {"hello from the web"}, "submit": {"Submit"}})

	repoPath := filepath.Join(dir, "demo.fossil")
	var reply, posted string
	for start := time.Now(); reply == ""; time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > 60*time.Second {
			hook, _ := os.ReadFile(filepath.Join(dir, "agents", "hook.log"))
			t.Fatalf("no answer from the session in 60 s\nhook.log:\n%s", lastLines(hook, 30))
		}
		for _, p := range threadOf(t, repoPath, root) {
			if p.Sender == "pat" && strings.Contains(p.Text, "hello from the web") {
				posted = p.Hash
			}
			if posted != "" && p.InReplyTo == posted && p.Sender == "agent-demo" {
				reply = p.Text
			}
		}
	}
	if !strings.Contains(reply, want) {
		t.Errorf("the session answered %q", reply)
	}

	// Ctrl-C: the demo stops everything it started.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("the demo exited with %v\n%s", err, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the demo did not end within 2 minutes of Ctrl-C")
	}
	var stopped, ended bool
	for _, p := range threadOf(t, repoPath, root) {
		switch p.Note.(type) {
		case *messages.StoppedNote:
			stopped = p.Sender == "agent-demo"
		case *messages.EndNote:
			ended = p.Sender == "ocx"
		}
	}
	if !stopped || !ended {
		t.Errorf("after Ctrl-C: stopped note %v, end note %v", stopped, ended)
	}
	for _, pid := range naming(dir) {
		t.Errorf("the demo left a process naming its directory: %d %s", pid, cmdline(pid))
	}
}

// demoShowsEveryFeature checks what the demo printed beyond its session
// (issue 27 item 8): the git mirror clones into a fresh directory with the
// command printed; CI and the reviewer are branch listeners on trunk in
// the status; the check-in the demo made carries CI's green tag and the
// reviewer's verdict; the two templates are offered, and picked, on the
// console's forms without an error.
func demoShowsEveryFeature(t *testing.T, ocx string, said map[string]string, dir string) {
	t.Helper()
	base := said["url"]
	// The git mirror: the printed command, into a directory of the test's.
	clone := strings.Fields(said["git mirror"])
	if len(clone) != 4 || clone[0] != "git" || clone[1] != "clone" || clone[2] != base+"ext/console/git" {
		t.Fatalf("the demo printed no git clone of its mirror: %q", said["git mirror"])
	}
	dst := filepath.Join(t.TempDir(), clone[3])
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "GIT_TERMINAL_PROMPT=0"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := git("clone", clone[2], dst); err != nil {
		t.Fatalf("%s: %v\n%s", said["git mirror"], err, out)
	}
	if out, err := git("-C", dst, "log", "--oneline"); err != nil || !strings.Contains(out, "initial empty check-in") {
		t.Errorf("the mirror's history: %v\n%s", err, out)
	}

	// CI and the reviewer: each a branch listener on trunk, in the status.
	agents := said["agents root"]
	status := func() *messages.NodeState {
		cmd := exec.Command(ocx, "status", "--json")
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8", "OCX_AGENTS=" + agents}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ocx status: %v\n%s", err, out)
		}
		st, err := messages.DecodeState(out)
		if err != nil {
			t.Fatalf("the status: %v\n%s", err, out)
		}
		return st
	}
	st := status()
	for _, k := range []string{"ci", "reviewer"} {
		login, _, _ := strings.Cut(said[k], " ")
		found := false
		for _, l := range st.Listeners {
			found = found || (l.Login == login && l.Kind == messages.ListenBranch && l.Names == "trunk")
		}
		if login == "" || !found {
			t.Errorf("the demo printed %s %q, and the status lists no branch listener of it on trunk: %+v", k, said[k], st.Listeners)
		}
	}

	// The demo's check-in: CI's green tag and the reviewer's verdict on it.
	info := strings.Fields(said["check-in"])
	if len(info) == 0 || !strings.HasPrefix(info[0], base+"info/") {
		t.Fatalf("the demo printed no check-in: %q", said["check-in"])
	}
	checkin := strings.TrimPrefix(info[0], base+"info/")
	ci, _, _ := strings.Cut(said["ci"], " ")
	rev, _, _ := strings.Cut(said["reviewer"], " ")
	repo := filepath.Join(dir, "demo.fossil")
	var tags []fossilio.TagChange
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		r, err := fossilio.OpenNode(repo, nil)
		if err != nil {
			t.Fatal(err)
		}
		tags, err = r.CheckinTags(context.Background(), checkin)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		green, okCI := fossilio.LatestTag(tags, "ci", ci)
		verdict, okRev := fossilio.LatestTag(tags, messages.AuditedTag, rev)
		if okCI && okRev {
			if !strings.HasPrefix(green.Value, "green") || !strings.HasPrefix(verdict.Value, "pass") {
				t.Errorf("the check-in's tags: ci %q, audited %q; want green and pass", green.Value, verdict.Value)
			}
			break
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("no ci tag of %s and verdict of %s on the demo's check-in %s in 90 s: %+v", ci, rev, checkin, tags)
		}
	}

	// A check-in of the newcomer's own, with the command printed: pushed,
	// exported to the mirror by the hook, tagged by CI.
	var own string
	for i, l := range strings.Split(said["_lines"], "\n") {
		if strings.HasPrefix(l, "A check-in of your own") {
			own = strings.TrimSpace(strings.Split(said["_lines"], "\n")[i+1])
		}
	}
	if !strings.HasPrefix(own, "fossil clone ") {
		t.Fatalf("the demo printed no command for a check-in of one's own:\n%s", said["_lines"])
	}
	sh := exec.Command("/bin/sh", "-c", own)
	sh.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir()}
	if out, err := sh.CombinedOutput(); err != nil || strings.Contains(string(out), "incorrect password") {
		t.Fatalf("%s: %v\n%s", own, err, out)
	}
	in := exec.Command("fossil", "info", "current")
	in.Dir = filepath.Join(dir, "mine")
	in.Env = sh.Env
	out, err := in.Output()
	mine := ""
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "hash" && len(strings.Fields(v)) > 0 {
			mine = strings.Fields(v)[0]
		}
	}
	if err != nil || mine == "" {
		t.Fatalf("fossil info in the newcomer's check-out: %v\n%s", err, out)
	}
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		r, err := fossilio.OpenNode(repo, nil)
		if err != nil {
			t.Fatal(err)
		}
		tags, err := r.CheckinTags(context.Background(), mine)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if green, ok := fossilio.LatestTag(tags, "ci", ci); ok {
			if !strings.HasPrefix(green.Value, "green") {
				t.Errorf("CI on the newcomer's check-in: %q", green.Value)
			}
			break
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("no ci tag on the newcomer's check-in %s in 90 s", mine)
		}
	}
	if out, err := git("-C", dst, "pull", "-q"); err != nil {
		t.Fatalf("git pull of the mirror: %v\n%s", err, out)
	}
	if out, err := git("-C", dst, "log", "--oneline"); err != nil || !strings.Contains(out, " hi") {
		t.Errorf("the mirror lacks the newcomer's check-in after it: %v\n%s", err, out)
	}

	// The console's other pages it names.
	for _, u := range strings.Fields(said["releases"]) {
		if !strings.HasPrefix(u, "http") {
			continue
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", u, resp.StatusCode)
		}
	}

	// The templates, offered and picked on the console's forms.
	for _, k := range []string{"workspace template", "session template"} {
		u := said[k]
		name := u[strings.LastIndex(u, "=")+1:]
		if !strings.HasPrefix(u, base+"ext/console/") || name == "" {
			t.Fatalf("the demo printed %s %q", k, u)
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), `<option value="`+name+`" selected>`) || strings.Contains(string(page), "ocx-template-error") {
			t.Errorf("%s %s: %d, not picked or with an error:\n%s", k, u, resp.StatusCode, page)
		}
	}
}

// demoRunsItsPattern (D84): the demo's run pattern run/echo is shown on
// the console's page printed, and the command printed beside it, run as
// printed, posts section 14's echo written in full, which the daemon
// runs: a reply holding hello, then ended exited 0.
func demoRunsItsPattern(t *testing.T, said map[string]string, dir string) {
	t.Helper()
	line := said["run pattern"]
	page, rest, _ := strings.Cut(line, " ")
	command, ok := strings.CutPrefix(strings.TrimSpace(rest), "(or: ")
	command, ok2 := strings.CutSuffix(command, ")")
	if !strings.HasPrefix(page, said["console"]+"pattern/echo") || !ok || !ok2 || !strings.Contains(command, "run post --pattern echo") {
		t.Fatalf("the demo printed no run pattern and command: %q", line)
	}
	resp, err := http.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `id="ocx-pattern-text"`) || strings.Contains(string(body), "ocx-pattern-problem") || !strings.Contains(string(body), "&#34;echo&#34;") {
		t.Fatalf("the run pattern's page %s: %d\n%s", page, resp.StatusCode, body)
	}
	sh := exec.Command("/bin/sh", "-c", command+" --json")
	sh.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8"}
	out, err := sh.Output()
	var a answer
	if jerr := json.Unmarshal(out, &a); err != nil || jerr != nil || a.Stopped != nil || a.Result == nil {
		t.Fatalf("%s: %v %v\n%s", command, err, jerr, out)
	}
	root := *a.Result
	repo := filepath.Join(dir, "demo.fossil")
	var run *runmsg.Run
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		var hello bool
		var ended *runmsg.RunEnded
		for _, p := range threadOf(t, repo, root) {
			m, err := runmsg.ReadMessage([]byte(p.Text))
			switch m := m.(type) {
			case *runmsg.Run:
				run = m
			case *runmsg.RunEnded:
				ended = m
			}
			hello = hello || (err != nil && strings.Contains(p.Text, "hello"))
		}
		if ended != nil {
			if ended.Outcome != runmsg.RunExited || ended.Exit == nil || *ended.Exit != 0 || !hello {
				t.Fatalf("the run from the demo's pattern ended %+v, a reply holding hello %v", ended, hello)
			}
			break
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("no ended of the run %s from the demo's pattern in 90 s", root)
		}
	}
	if run == nil || strings.Join(run.Process.Command, " ") != "echo hello" || run.Objective != "Say hello." || run.Process.User != "builder" {
		t.Errorf("the run on the record, from the pattern: %+v", run)
	}
}

// cmdline reads a process's command line, for a message.
func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
}

// form posts a form as a browser would (Fossil checks the Referer) and
// expects the redirect Fossil answers a successful form with.
func form(t testing.TB, c *http.Client, to, referer string, v url.Values) {
	t.Helper()
	if err := postForm(c, to, referer, v); err != nil {
		t.Fatal(err)
	}
}

// postForm is form's request: an error unless Fossil answered with its
// redirect, naming Fossil's own message.
func postForm(c *http.Client, to, referer string, v url.Values) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, to, strings.NewReader(v.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Referer", referer)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		msg := string(body)
		if i := strings.Index(msg, "generalError"); i >= 0 {
			msg = msg[i:min(len(msg), i+300)]
		}
		return fmt.Errorf("POST %s: %s, want a redirect: %s", to, resp.Status, msg)
	}
	return nil
}

func threadOf(t *testing.T, repo, root string) []posted {
	t.Helper()
	r, err := fossilio.OpenNode(repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	posts, err := r.Thread(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	var out []posted
	for _, p := range posts {
		note, _ := messages.ReadPost([]byte(p.Text))
		out = append(out, posted{Hash: p.Hash, Sender: p.Sender, InReplyTo: p.InReplyTo, Text: p.Text, Note: note})
	}
	return out
}

// naming lists the live processes whose command line holds s.
func naming(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}
