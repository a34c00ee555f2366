package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
	"github.com/ocx-go/ocx/messages"
)

// hostileProgram builds testdata/hostile, static, into a directory of
// the test's own, which the hostile agent's sandbox sees read-only.
func hostileProgram(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hostile")
	build := exec.Command("go", "build", "-o", out, "./testdata/hostile")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/hostile: %v: %s", err, b)
	}
	return out
}

// takeTheNode is the shell command the hostile agent's model has Claude
// Code run: every process of it in the agent's own sandbox, in a session
// of its own so that the tool's end leaves it running (the command waits
// until that session is made: Claude Code ends its shell's process group
// with the tool), each writing what it got under /tmp/h (the sandbox's
// own /tmp, which the full disk leaves writable):
//   - issue 39's look-alike: bash as `bwrap`, forking 20 times a second,
//     its command line binding 20,000 made-up workspaces of the agents
//     root;
//   - inotify instances and watches, until the kernel refuses them;
//   - 5,000 processes;
//   - dd until the workspace's disk is full.
func takeTheNode(agents, hostile string) string {
	return `mkdir -p /tmp/h && cd "$HOME" && setsid bash -c '
touch /tmp/h/up
(ulimit -s unlimited 2>/dev/null || ulimit -s 65536
args=(); for ((i = 0; i < 20000; i++)); do args+=(--bind "$1/u$i/projects/p" /x); done
exec -a bwrap bash -c "while :; do sleep 0.05 & wait; done" x "${args[@]}") 2>/tmp/h/fork.err &
"$2" inotify /tmp/h/inotify.out &
"$2" procs 5000 /tmp/h/procs.out &
dd if=/dev/zero of="$HOME/fill" bs=64k 2>/tmp/h/dd.err; echo done > /tmp/h/dd.out
wait' _ ` + agents + ` ` + hostile + ` </dev/null >/dev/null 2>&1 &
until [ -e /tmp/h/up ]; do sleep 0.05; done; echo taking`
}

// readInSandbox reads a file of the hostile sandbox's own /tmp through the
// root of its process pid ("" when it is not there yet).
func readInSandbox(pid int, p string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/root%s", pid, p))
	return string(b)
}

// cgroupMembers lists the processes whose pids cgroup is cg or below it.
func cgroupMembers(cg string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.SplitN(l, ":", 3)
			if len(f) == 3 && (f[1] == "" || strings.Contains(","+f[1]+",", ",pids,")) &&
				(strings.HasSuffix(f[2], "/"+cg) || strings.Contains(f[2], "/"+cg+"/")) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// postAnthropic posts a Messages request to the model socket at sock on
// a connection of its own: messages holding body, then the model named.
func postAnthropic(sock, model string, maxTokens int, body io.Reader, size int64) (int, string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	head := `{"max_tokens": ` + strconv.Itoa(maxTokens) + `, "messages": [{"role": "user", "content": "`
	tail := `"}], "model": "` + model + `"}`
	req, _ := http.NewRequest("POST", "http://model/v1/messages", io.MultiReader(strings.NewReader(head), body, strings.NewReader(tail)))
	req.ContentLength = int64(len(head)) + size + int64(len(tail))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestHostileLoad is issue 39's hostile load, with the real binaries: a
// Claude Code session (create's, limits.tokens 2000) on a node whose
// session limits give each workspace a disk of 64 MiB and 8192
// processes, whose model, told so by the stand-in, has its Bash tool take
// what it can of the node from inside its sandbox at once: the look-alike
// with 20,000 binds forking 20 times a second, inotify instances and
// watches to the kernel's limit, 5,000 processes, dd until its disk is
// full. Meanwhile the test sends its sockets 100 concurrent requests
// asking 4,096 tokens each (the model holding those it is sent), 12
// bodies of 31 MiB to its model proxy and 12 lines of 16 MiB to its MCP
// server. All the while another agent's session answers a post within
// 5 s, `ocx status` answers within 200 ms (median of five), a third
// agent's session starts and stops within 2 s each, the daemon's and the
// MCP server's peak resident sets stay under 100 MB, and the node's file
// system loses nothing. Once the model answers, the budget ends the
// session, overspent by at most one reply's capped max_tokens, its end
// note saying what was spent against what was allowed; every process of
// the sandbox is gone with it, and the node's logs dropped nothing.
func TestHostileLoad(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-claude")
	if why := unixhost.DiskWhy(); why != "" {
		t.Skipf("this host makes no disks (%s): TestDiskRefusedWhereItCannotBeGiven tests the refusal", why)
	}
	hostile := hostileProgram(t)
	n := newNodeOnTmpfsOf(t, "768m", llmRoot)
	c := cliNodeOf(t, n, filepath.Dir(hostile))
	{
		l, _ := host.NewLayout(n.agents)
		p := n.seen(l.NodeJSON())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := messages.DecodeNodeConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		procs := uint64(8192)
		cfg.SessionLimits = &messages.NodeSessionLimits{Memory: "4G", Processes: &procs, Disk: "64M"}
		if b, err = cfg.Encode(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startDaemon(t, n, program("ocxd"))
	admin := n.srv.AdminLogin

	const a2, a3, bad = "agent-2", "agent-3", "claude-h"
	records := map[string]string{}
	for _, login := range []string{a2, a3} {
		n.must("", "login", "add", login)
		records[login] = n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
	}
	n.result(admin, "session", "start", key(a2), "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--command", echoScript)

	// The stand-in: the hostile turn's Bash call; the spending requests
	// held until the test has measured, each then writing all it may.
	release := make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	args, _ := json.Marshal(map[string]string{"command": takeTheNode(n.agents, hostile), "description": "take the node"})
	c.model.setReply(func(q *modelRequest) modelReply {
		switch {
		case strings.Contains(q.User, "spend it all"):
			<-release
			return modelReply{Text: "spent", Input: 20, Output: q.MaxTokens}
		case q.Results["take_the_node"] != "":
			return modelReply{Text: "took: " + strings.TrimSpace(q.Results["take_the_node"]), Input: 1, Output: 1}
		case strings.HasSuffix(q.User, "take the node"):
			return modelReply{Tool: "Bash", Args: string(args), ID: "take_the_node", Input: 1, Output: 1}
		}
		return modelReply{Text: "ok", Input: 1, Output: 1}
	})
	record := c.createAgentWithBudget(bad, "claude", "sonnet", `{}`, `{"wall": "1h", "tokens": 2000}`)
	ws, err := n.layoutWorkspace(bad)
	if err != nil {
		t.Fatal(err)
	}
	// The sockets as the test sees them, outside the node's mount
	// namespace.
	modelSock, mcpSock := n.seen(ws.ModelSocket()), n.seen(ws.MCPSocket())
	l, _ := host.NewLayout(n.agents)
	cg := l.SessionCgroup(messages.WorkspaceKey{Login: bad, Project: "demo"})

	// Before: what the node gives everyone.
	statusTimes := func() []time.Duration {
		var ds []time.Duration
		for range 5 {
			t0 := time.Now()
			n.must("", "status", "--json")
			ds = append(ds, time.Since(t0))
		}
		return ds
	}
	answerTime := func(text string) time.Duration {
		t0 := time.Now()
		p := n.result(person, "post", "--to", records[a2], "--text", text)
		if r := n.awaitReplyBy(a2, records[a2], p); !strings.Contains(r.Text, "echo: "+text) {
			t.Errorf("agent-2's answer to %q: %q", text, r.Text)
		}
		return time.Since(t0)
	}
	root := n.seen(n.agents)
	_, freeBefore, _ := fsOf(t, root)
	status0 := statusTimes()
	answer0 := answerTime("before")
	start0, stop0 := n.timeStartStop(a3, records[a3])

	// The agent takes the node.
	// Claude Code may end its turn in failure once its Bash tool has
	// started all this (exit 1 "after a successful result", once in a few
	// runs): what the agent took is looked for below.
	t.Logf("the hostile turn's answer: %q", c.turn(bad, record, "take the node"))
	var fake int
	n.waitFor("the look-alike with 20,000 binds", func() bool {
		fake = manyBinds(n.agents)
		return fake != 0
	})
	var seenAt time.Time
	n.waitFor("the sandbox's processes, inotify and dd to have taken all they can", func() bool {
		if time.Since(seenAt) > 10*time.Second {
			seenAt = time.Now()
			t.Logf("in the sandbox so far: procs %q, inotify %q, dd %q %q, fork %q", readInSandbox(fake, "/tmp/h/procs.out"), readInSandbox(fake, "/tmp/h/inotify.out"),
				readInSandbox(fake, "/tmp/h/dd.out"), readInSandbox(fake, "/tmp/h/dd.err"), readInSandbox(fake, "/tmp/h/fork.err"))
		}
		return strings.HasPrefix(readInSandbox(fake, "/tmp/h/procs.out"), "done") &&
			strings.HasPrefix(readInSandbox(fake, "/tmp/h/inotify.out"), "done") &&
			strings.HasPrefix(readInSandbox(fake, "/tmp/h/dd.out"), "done")
	})
	procsOut, inotifyOut := readInSandbox(fake, "/tmp/h/procs.out"), readInSandbox(fake, "/tmp/h/inotify.out")
	t.Logf("in the sandbox: %s; %s; dd: %s", strings.TrimSpace(procsOut), strings.TrimSpace(inotifyOut), strings.TrimSpace(readInSandbox(fake, "/tmp/h/dd.err")))
	if !strings.Contains(readInSandbox(fake, "/tmp/h/dd.err"), "No space left on device") {
		t.Errorf("dd filling the agent's disk was not told ENOSPC: %q", readInSandbox(fake, "/tmp/h/dd.err"))
	}
	if m := regexp.MustCompile(`instances=(\d+) .*watches=(\d+)`).FindStringSubmatch(inotifyOut); m == nil {
		t.Errorf("the sandbox's inotify: %q", inotifyOut)
	} else if i, _ := strconv.Atoi(m[1]); i > int(host.DefaultUserNSLimits.InotifyInstances) || !strings.Contains(inotifyOut, `instance_error="too many open files"`) {
		t.Errorf("the sandbox took %s inotify instances, want at most its %d, then refused: %s", m[1], host.DefaultUserNSLimits.InotifyInstances, inotifyOut)
	} else if w, _ := strconv.Atoi(m[2]); w > int(host.DefaultUserNSLimits.InotifyWatches) || !strings.Contains(inotifyOut, `watch_error="no space left on device"`) {
		t.Errorf("the sandbox took %s inotify watches, want at most its %d, then refused: %s", m[2], host.DefaultUserNSLimits.InotifyWatches, inotifyOut)
	}
	members := cgroupMembers(cg)
	if len(members) < 5000 {
		t.Errorf("the hostile session's cgroup holds %d processes, want its 5,000 sleeps and more", len(members))
	}
	if !slices.Contains(members, fake) {
		t.Errorf("the look-alike %d is not in its session's cgroup %s", fake, cg)
	}

	// At once: 100 requests spending, 12 bodies of 31 MiB, 12 lines of 16
	// MiB, while the test measures what the others get.
	server := mcpServerOf(n, bad)
	var wg sync.WaitGroup
	codes := make([]int, 100)
	bodies := make([]string, 100)
	for i := range 100 {
		wg.Go(func() {
			code, body, err := postAnthropic(modelSock, "sonnet", 4096, strings.NewReader("spend it all"), int64(len("spend it all")))
			if err != nil {
				body = err.Error()
			}
			if closedEarly(err) {
				// Refused past the connections, as the body was sent.
				code = http.StatusServiceUnavailable
			}
			codes[i], bodies[i] = code, body
		})
	}
	// The 31 MiB bodies are waited for apart from the lines: one that
	// takes a connection waits for one of the session's slots, which the
	// spending requests hold until the model answers them (letGo).
	var big, sent sync.WaitGroup
	bigCodes := make([]string, 12)
	lines := make([]string, 12)
	for i := range 12 {
		sent.Go(func() {
			code, body, err := postAnthropic(modelSock, "the-expensive-one", 16, bytes.NewReader(huge()), int64(len(huge())))
			if closedEarly(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				bigCodes[i] = "closed " + err.Error()
				return
			}
			bigCodes[i] = fmt.Sprintf("%d %v %.200s", code, err, body)
		})
		big.Go(func() { lines[i] = hugeLine(mcpSock, i) })
	}
	status1 := statusTimes()
	answer1 := answerTime("during")
	start1, stop1 := n.timeStartStop(a3, records[a3])
	big.Wait()
	status2 := statusTimes()
	daemonPeak := procStatusKiB(t, n.daemonPID(), "VmHWM:")
	serverPeak := int64(-1)
	if server > 0 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", server)); err == nil && bytes.Contains(b, []byte("VmHWM:")) {
			serverPeak = procStatusKiB(t, server, "VmHWM:")
		}
	}
	if !harness.Alive(fake) {
		t.Error("the look-alike ended before the load did: the test measured less than it says")
	}
	// The model answers: the budget ends the session.
	letGo()
	sent.Wait()
	// Refused: read to its model and answered 403 naming it (or once the
	// budget is spent, 403 saying so), 503 past the socket's connections
	// (the answer then comes while the body is being written, and the
	// client may see the connection closed instead), or closed with the
	// session its budget ended; never at the model.
	for i, b := range bigCodes {
		if !strings.HasPrefix(b, "403 ") && !strings.HasPrefix(b, "503 ") && !strings.HasPrefix(b, "closed ") {
			t.Errorf("a 31 MiB body naming another model (%d): %s; want it refused", i, b)
		}
	}
	for _, q := range c.model.seen() {
		if q.Model == "the-expensive-one" || len(q.Body) > 1<<20 {
			t.Errorf("the model was sent a request naming %q, of %d bytes", q.Model, len(q.Body))
		}
	}
	for i, l := range lines {
		if l != "" {
			t.Errorf("the 16 MiB line of connection %d: %s", i, l)
		}
	}

	t.Logf("ocx status before the load %v, during %v, after the lines %v", status0, status1, status2)
	t.Logf("agent-2 answered before in %v, during in %v; agent-3 started in %v and stopped in %v before, %v and %v during", answer0, answer1, start0, stop0, start1, stop1)
	t.Logf("peak resident sets: the daemon %d KiB, the hostile session's MCP server %d KiB", daemonPeak, serverPeak)
	if m := median(status1); m > 200*time.Millisecond {
		t.Errorf("ocx status took %v (median of %v) under the hostile load; want within 200 ms", m, status1)
	}
	if answer1 > 5*time.Second {
		t.Errorf("agent-2 answered in %v under the hostile load; want within 5 s", answer1)
	}
	if start1 > 2*time.Second || stop1 > 2*time.Second {
		t.Errorf("agent-3's session started in %v and stopped in %v under the hostile load; want within 2 s each", start1, stop1)
	}
	if daemonPeak > 100<<10 || serverPeak > 100<<10 {
		t.Errorf("peak resident sets: the daemon %d KiB, the MCP server %d KiB; want each under 100 MB", daemonPeak, serverPeak)
	}

	wg.Wait()
	forwarded, refused := 0, 0
	for i, code := range codes {
		switch code {
		case http.StatusOK:
			forwarded++
		case http.StatusForbidden, http.StatusServiceUnavailable:
			refused++
		default:
			t.Errorf("spending request %d: %d %.200s", i, code, bodies[i])
		}
	}
	capped, spent := 0, 0
	for _, q := range c.model.seen() {
		if strings.Contains(q.User, "spend it all") {
			spent += q.MaxTokens
			capped = max(capped, q.MaxTokens)
		}
	}
	launches := notesOn[*messages.LaunchNote](n, record)
	var end *messages.EndNote
	n.waitFor("the hostile session's end past its budget", func() bool {
		if ends := n.endsOf(record, launches[len(launches)-1].P.Hash); len(ends) > 0 {
			end = ends[0]
		}
		return end != nil
	})
	t.Logf("spending: %d forwarded (the model allowed %d tokens, at most %d by one), %d refused; the end note: %s", forwarded, spent, capped, refused, end.Note)
	if forwarded == 0 || forwarded+refused != 100 {
		t.Errorf("of 100 spending requests %d were forwarded and %d refused", forwarded, refused)
	}
	if end.Budget != messages.LimitTokens || end.Usage == nil || end.Usage.Model == nil || end.Usage.Limit != 2000 {
		t.Fatalf("the end note: budget %q, usage %+v: %s", end.Budget, end.Usage, end.Note)
	}
	if total := end.Usage.Model.Total(); total > 2000+uint64(capped) || spent > 2000 {
		t.Errorf("the session spent %d tokens (the model allowed %d) under limits.tokens of 2000; want at most one reply's capped max_tokens (%d) over", total, spent, capped)
	}
	if want := fmt.Sprintf("%d of its 2000 tokens", end.Usage.Model.Total()); !strings.Contains(end.Note, want) {
		t.Errorf("the end note does not say %q:\n%s", want, end.Note)
	}

	// Gone with it: every process of the sandbox; nothing outside changed.
	n.waitFor("every process of the hostile sandbox to end", func() bool { return len(cgroupMembers(cg)) == 0 && !harness.Alive(fake) })
	if got := answerTime("after"); got > 5*time.Second {
		t.Errorf("agent-2 answered in %v after the load", got)
	}
	_, freeAfter, _ := fsOf(t, root)
	t.Logf("the node's file system: %d bytes free before, %d after", freeBefore, freeAfter)
	if freeAfter+(1<<20) < freeBefore {
		t.Errorf("the node's file system lost %d bytes to the hostile agent", freeBefore-freeAfter)
	}
	for _, log := range []string{"ocxd.log", "hook.log"} {
		if d := droppedIn(t, n.seen(filepath.Join(n.agents, log))); d != 0 {
			t.Errorf("%s dropped %d records", log, d)
		}
	}
	n.must("", "session", "stop", key(a2))
}

// closedEarly says whether a request failed because the server closed
// the connection while it was being sent: the model socket answers a
// connection past its bound 503 at once and closes it.
func closedEarly(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}
