package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	ocxmcp "github.com/ocx-go/ocx/cmd/internal/mcp"
	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/tools"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/toolio"
)

// procsOf lists the processes whose command line satisfies match, by PID.
func procsOf(match func(argv []string) bool) map[int][]string {
	out := map[int][]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if match(argv) {
			out[pid] = argv
		}
	}
	return out
}

// sessionBwrap is the bwrap command line the daemon started the session
// of workspace ws with, up to its "--", without its status descriptor:
// the same sandbox, for another program to run in.
func sessionBwrap(t testing.TB, ws host.Workspace) []string {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for _, argv := range procsOf(func(a []string) bool {
			return filepath.Base(a[0]) == "bwrap" && slices.Contains(a, ws.Dir) && slices.Contains(a, ws.MCPDir)
		}) {
			var out []string
			for i := 0; i < len(argv); i++ {
				switch argv[i] {
				case "--json-status-fd":
					i++
					continue
				case "--":
					return out
				}
				out = append(out, argv[i])
			}
		}
	}
	t.Fatalf("no bwrap runs the session of %s", ws.Key)
	return nil
}

// inSandbox runs argv inside the sandbox bw with stdin, and returns its
// standard output and error.
func inSandbox(t *testing.T, bw []string, stdin string, argv ...string) (string, string, error) {
	t.Helper()
	args := append(slices.Clone(bw[1:]), "--setenv", host.MCPSocketEnv, host.MCPSocketInside, "--")
	cmd := exec.Command("bwrap", append(args, argv...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// createAgent creates a record for the stand-in runner as the admin and
// returns the record's hash and the agent's workspace.
func createAgent(t testing.TB, tn *toolNode, login, restrict string) (string, host.Workspace) {
	t.Helper()
	in := `{"objective": "Answer what is said here.", "user": "` + login + `", "runner": "native", "model": "standin-model", "hears": ["` + tn.srv.AdminLogin + `"],
		"budget": {"wall": "1h"}` + restrict + `}`
	a := tools.Of(tn.n).Call(tn.ctx, tn.admin(), "create", json.RawMessage(in))
	if !a.OK() {
		t.Fatalf("create %s stopped: %s\n%s", login, *a.Stopped, strings.Join(a.Log, "\n"))
	}
	ws, err := tn.n.Layout.Workspace(messages.WorkspaceKey{Login: login, Project: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	return *a.Result, ws
}

// mcpServers are the `ocx mcp serve` processes of the agents root.
func mcpServers(agents string) map[int][]string {
	return procsOf(func(a []string) bool {
		return len(a) > 2 && filepath.Base(a[0]) == "ocx" && a[1] == "mcp" && a[2] == "serve" && slices.Contains(a, agents)
	})
}

// endsServers ends the test's sessions and daemon, then wants every MCP
// server they had gone with its session; one left is killed by its PID.
func endsServers(t testing.TB, tn *toolNode) {
	tn.shutdown()
	left := mcpServers(tn.agents)
	for end := time.Now().Add(10 * time.Second); len(left) > 0 && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		left = mcpServers(tn.agents)
	}
	for pid, argv := range left {
		t.Errorf("the MCP server %d %q outlived its session", pid, argv)
		unixhost.Kill(pid, host.SIGKILL)
	}
}

// TestMCPFromInsideTheSandbox: the daemon starts an MCP server beside each
// session; from inside the session's own bwrap sandbox (its command line
// as the daemon gave it) the SDK's client lists the tools and calls post,
// dry and for real, as the session's agent login and no other; another
// session's directory and socket are not in the sandbox at all.
func TestMCPFromInsideTheSandbox(t *testing.T) {
	tn := newToolNode(t)
	rec1, ws1 := createAgent(t, tn, "native-1", "")
	_, ws2 := createAgent(t, tn, "native-2", "")
	defer endsServers(t, tn)
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{{ws1.MCPDir, os.ModeDir | 0o700}, {ws1.MCPSocket(), os.ModeSocket | 0o600}} {
		var st os.FileInfo
		var err error
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if st, err = os.Lstat(p.path); err == nil {
				break
			}
		}
		if err != nil || st.Mode() != p.mode {
			t.Fatalf("%s: %v %v, want %v", p.path, st.Mode(), err, p.mode)
		}
	}
	bw := sessionBwrap(t, ws1)
	ocx := filepath.Join(tn.rel, "ocx")

	out, errs, err := inSandbox(t, bw, "", ocx, "mcp", "tools")
	if err != nil {
		t.Fatalf("mcp tools: %v\n%s", err, errs)
	}
	var listed []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatal(err)
	}
	// The SDK lists the tools by name; each has the registry's schema.
	var names []string
	for _, tl := range listed {
		names = append(names, tl.Name)
		for _, rt := range tools.Tools() {
			var want, got any
			json.Unmarshal(rt.InputSchema, &want)
			json.Unmarshal(tl.InputSchema, &got)
			if rt.Name == tl.Name && !jsonEqual(want, got) {
				t.Errorf("%s: the schema over MCP differs from the registry's", tl.Name)
			}
		}
	}
	if want := slices.Sorted(slices.Values(toolio.ToolNames)); !slices.Equal(names, want) {
		t.Fatalf("tools over MCP: %v, want %v", names, want)
	}

	call := func(in string) (*node.Answer, string) {
		out, errs, err := inSandbox(t, bw, in, ocx, "mcp", "call", "post")
		a, derr := ocxmcp.DecodeAnswer([]byte(out))
		if derr != nil {
			t.Fatalf("mcp call post: %v (%v)\n%s", derr, err, errs)
		}
		return a, errs
	}
	dry, _ := call(`{"to": "` + rec1 + `", "text": "a dry reply over MCP", "dry_run": true}`)
	t.Logf("dry post over MCP: %s", normal(dry))
	if !dry.OK() || !dry.DryRun || dry.Result != nil {
		t.Fatalf("dry post: %+v", dry)
	}
	real, _ := call(`{"to": "` + rec1[:12] + `", "text": "a reply over MCP"}`)
	if !real.OK() || real.Result == nil {
		t.Fatalf("post: %+v", real)
	}
	p, err := tn.repo().Post(tn.ctx, *real.Result)
	if err != nil || p.Sender != "native-1" || p.InReplyTo != rec1 || !strings.Contains(p.Text, "a reply over MCP") {
		t.Fatalf("the post %s: sender %q, in reply to %q, %q (%v)", *real.Result, p.Sender, p.InReplyTo, p.Text, err)
	}

	// Another session's socket: not in this sandbox, not even its
	// directory; the sandbox's own mount holds its own sockets only (its
	// MCP socket and its sync socket, D49).
	out, errs, err = inSandbox(t, bw, "", "/bin/sh", "-c",
		`ls -A `+host.MCPMount+`; for p in "$1" "$2" "$3"; do test -e "$p" && echo "present: $p"; done; exit 0`,
		"sh", ws2.MCPSocket(), ws2.MCPDir, filepath.Dir(ws2.Dir))
	if err != nil || strings.TrimSpace(out) != host.MCPSocketName+"\n"+host.SyncSocketName {
		t.Fatalf("inside the sandbox: %q %v\n%s", out, err, errs)
	}
	a, errs, err := inSandbox(t, bw, `{"to": "`+rec1+`", "text": "x"}`, ocx, "mcp", "call", "post", "--socket", ws2.MCPSocket(), "--wait", "0")
	if err == nil || a != "" || !strings.Contains(errs, "no such file or directory") {
		t.Fatalf("another session's socket from inside: %q %v\n%s", a, err, errs)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// BenchmarkMCPPost: a post round trip over a session's real MCP socket,
// dry and real, beside the same post by `ocx tool post` as a process on
// the host, one per call. "sandbox" runs the client inside the session's
// own bwrap (its command line as the daemon gave it): this test binary,
// copied into the workspace, holds one SDK connection as a runner does,
// times N calls and writes each call's time to a file in the workspace
// (mcpBenchClient). "in-process" is the same client in the test
// process. Each case reports its p50 and mean per call (p50-µs, mean-µs).
func BenchmarkMCPPost(b *testing.B) {
	tn := newToolNode(b)
	rec, ws := createAgent(b, tn, "native-1", "")
	defer endsServers(b, tn)
	cs, err := ocxmcp.Connect(tn.ctx, ws.MCPSocket(), 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	input := func(dry bool) json.RawMessage {
		return json.RawMessage(`{"to": "` + rec + `", "text": "a benchmark reply", "dry_run": ` + strconv.FormatBool(dry) + `}`)
	}
	post := func(b *testing.B, dry bool) {
		in := input(dry)
		var times []time.Duration
		for b.Loop() {
			t0 := time.Now()
			res, err := cs.CallTool(tn.ctx, &mcp.CallToolParams{Name: "post", Arguments: in})
			if err != nil {
				b.Fatal(err)
			}
			if a, err := ocxmcp.AnswerOf(res); err != nil || !a.OK() {
				b.Fatalf("%v %v", a, err)
			}
			times = append(times, time.Since(t0))
		}
		reportCalls(b, times)
	}
	b.Run("in-process mcp dry", func(b *testing.B) { post(b, true) })
	b.Run("in-process mcp real", func(b *testing.B) { post(b, false) })

	bw := sessionBwrap(b, ws)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	client := filepath.Join(ws.Dir, "mcp-bench-client")
	if err := copyFile(self, client, 0o755); err != nil {
		b.Fatal(err)
	}
	sandbox := func(b *testing.B, dry bool) {
		spec := mcpBench{Calls: max(b.N, 20), Input: input(dry), Out: filepath.Join(ws.Dir, "mcp-bench.json")}
		specFile := filepath.Join(ws.Dir, "mcp-bench-spec.json")
		if err := writeJSON(specFile, spec); err != nil {
			b.Fatal(err)
		}
		os.Remove(spec.Out)
		args := append(slices.Clone(bw[1:]), "--setenv", host.MCPSocketEnv, host.MCPSocketInside, "--setenv", mcpBenchEnv, specFile,
			"--", client)
		cmd := exec.Command("bwrap", args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("the client inside the sandbox: %v\n%s", err, out)
		}
		var times []time.Duration
		raw, err := os.ReadFile(spec.Out)
		if err == nil {
			err = json.Unmarshal(raw, &times)
		}
		if err != nil || len(times) != spec.Calls {
			b.Fatalf("the client's figures: %d of %d (%v)", len(times), spec.Calls, err)
		}
		reportCalls(b, times)
	}
	b.Run("sandbox mcp dry", func(b *testing.B) { sandbox(b, true) })
	b.Run("sandbox mcp real", func(b *testing.B) { sandbox(b, false) })

	process := func(b *testing.B, dry bool) {
		args := []string{"tool", "post", "--agents", tn.agents, "--agent", "native-1", "--to", rec, "--text", "a benchmark reply"}
		if dry {
			args = append(args, "--dry-run")
		}
		var times []time.Duration
		for b.Loop() {
			t0 := time.Now()
			cmd := exec.Command(filepath.Join(tn.rel, "ocx"), args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tn.agents}
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v\n%s", err, out)
			}
			times = append(times, time.Since(t0))
		}
		reportCalls(b, times)
	}
	b.Run("ocx tool dry", func(b *testing.B) { process(b, true) })
	b.Run("ocx tool real", func(b *testing.B) { process(b, false) })
}

// mcpBenchEnv names the spec file of mcpBenchClient inside a sandbox.
const mcpBenchEnv = "OCX_MCP_BENCH"

// mcpBench is what BenchmarkMCPPost asks of its client inside the sandbox.
type mcpBench struct {
	Calls int             `json:"calls"`
	Input json.RawMessage `json:"input"`
	Out   string          `json:"out"`
}

// mcpBenchClient is BenchmarkMCPPost's client inside a session's sandbox,
// run by TestMain when mcpBenchEnv names its spec: one connection to
// $OCX_MCP_SOCKET, Calls posts, each call's time written to Out.
func mcpBenchClient(specFile string) error {
	var spec mcpBench
	raw, err := os.ReadFile(specFile)
	if err == nil {
		err = json.Unmarshal(raw, &spec)
	}
	if err != nil {
		return err
	}
	ctx := context.Background()
	cs, err := ocxmcp.Connect(ctx, os.Getenv(host.MCPSocketEnv), 10*time.Second)
	if err != nil {
		return err
	}
	defer cs.Close()
	times := make([]time.Duration, 0, spec.Calls)
	for range spec.Calls {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "post", Arguments: spec.Input})
		if err != nil {
			return err
		}
		if a, err := ocxmcp.AnswerOf(res); err != nil || !a.OK() {
			return fmt.Errorf("post over MCP: %v %v", a, err)
		}
		times = append(times, time.Since(t0))
	}
	return writeJSON(spec.Out, times)
}

// reportCalls reports the p50 and the mean of the calls' times.
func reportCalls(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	s := slices.Sorted(slices.Values(times))
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	b.ReportMetric(float64(s[len(s)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(sum.Microseconds())/float64(len(s)), "mean-µs")
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// TestNoPasswordSessionWritesThroughTheNode: a record that restricts
// no_password runs (D39): its clone remembers no password, its session
// reads its launch through the node, and the stopped note stop asks for is
// written through the tools on its MCP socket, as its agent login (itest
// TestToolsAgentEndToEnd has it answer a person's post too).
func TestNoPasswordSessionWritesThroughTheNode(t *testing.T) {
	tn := newToolNode(t)
	rec, ws := createAgent(t, tn, "native-3", `, "restrict": {"no_password": true, "own_thread": true}`)
	defer endsServers(t, tn)

	clone, err := fossilio.OpenClone(ws.Clone, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"last-sync-pw", "parent-project-pw"} {
		if v, ok, err := clone.Config(tn.ctx, name); err != nil || ok {
			t.Errorf("the clone's %s: %q %v %v, want none", name, v, ok, err)
		}
	}
	clone.Close()
	if _, err := fossilio.Remembered(tn.ctx, ws.Clone); !errors.Is(err, fossilio.ErrNoPassword) {
		t.Errorf("the clone remembers: %v", err)
	}

	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(ws.Log); strings.Contains(string(b), "event=ready") {
			break
		}
	}
	slog, _ := os.ReadFile(ws.Log)
	if !strings.Contains(string(slog), "the clone remembers no password: the session reads and writes through the node's tools") {
		t.Errorf("the session log does not say it writes through the node:\n%s", lastLines(slog, 20))
	}
	// No sync socket beside its MCP socket (D49): it has no password to
	// send, and nothing in its sandbox reaches the server with Fossil.
	if _, err := os.Lstat(ws.MCPSocket()); err != nil {
		t.Errorf("the MCP socket: %v", err)
	}
	if _, err := os.Lstat(ws.SyncSocket()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a no_password session's sync socket: %v, want none", err)
	}
	stop := tools.Of(tn.n).Call(tn.ctx, tn.admin(), "stop", json.RawMessage(`{"record": "`+rec+`"}`))
	if !stop.OK() {
		t.Fatalf("stop: %s\n%s", *stop.Stopped, strings.Join(stop.Log, "\n"))
	}
	stopped := 0
	thread, _ := tn.repo().Thread(tn.ctx, rec)
	for _, p := range thread {
		if n, err := messages.ReadPost([]byte(p.Text)); err == nil {
			if _, ok := n.(*messages.StoppedNote); ok && p.Sender == "native-3" {
				stopped++
			}
		}
	}
	if stopped != 1 {
		t.Errorf("%d stopped notes by the agent, want 1", stopped)
	}
}
