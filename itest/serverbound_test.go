package itest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// discardModel is a chat model that reads each request's body as it
// comes, holding none of it, and answers a short completion. It counts
// the bodies it read whole and those that broke off.
type discardModel struct {
	whole, broken atomic.Int64
	bytes         atomic.Int64
}

func (m *discardModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	m.bytes.Add(n)
	if err != nil {
		m.broken.Add(1)
		return
	}
	m.whole.Add(1)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, chatUsage(chatText("read"), 1, 1))
}

// mcpServerOf is the PID of the MCP server (`ocx mcp serve LOGIN/demo`)
// of n's workspace of login, 0 when none runs.
func mcpServerOf(n *testNode, login string) int {
	want := []byte("\x00mcp\x00serve\x00" + login + "/demo\x00")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, want) && bytes.Contains(b, []byte(n.agents)) {
			return pid
		}
	}
	return 0
}

// huge is a 31 MiB run of one letter, the bulk of each hostile request.
var huge = sync.OnceValue(func() []byte { return bytes.Repeat([]byte("x"), 31<<20) })

// postModel posts a chat request to the model socket at sock on a
// connection of its own: messages holding 31 MiB, then the model named
// (after the bulk). It returns the status and the proxy's error, if any.
func postModel(sock, model string) (int, string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	head := `{"messages": [{"role": "user", "content": "`
	tail := `"}], "model": "` + model + `"}`
	body := io.MultiReader(strings.NewReader(head), bytes.NewReader(huge()), strings.NewReader(tail))
	req, _ := http.NewRequest("POST", "http://model/v1/chat/completions", body)
	req.ContentLength = int64(len(head) + len(huge()) + len(tail))
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct{ Error string }
	json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error, nil
}

// mcpConn is one raw connection to an MCP socket, a JSON-RPC line at a
// time.
type mcpConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialMCP(sock string) (*mcpConn, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	return &mcpConn{c: c, r: bufio.NewReader(c)}, nil
}

// reply reads the next line within 30 s: one JSON-RPC message.
func (m *mcpConn) reply() (map[string]any, error) {
	m.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := m.r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("no reply (%q): %w", line, err)
	}
	var v map[string]any
	if err := json.Unmarshal(line, &v); err != nil {
		return nil, fmt.Errorf("the reply %q: %w", line, err)
	}
	return v, nil
}

// errorOf is a JSON-RPC reply's error message, "" when it has none.
func errorOf(v map[string]any) string {
	if e, ok := v["error"].(map[string]any); ok {
		s, _ := e["message"].(string)
		return s
	}
	return ""
}

// The bounds on the connections a session's sockets serve at once
// (cmd/internal/mcp.MaxConns, host/model.MaxConns).
const (
	mcpMaxConns   = 16
	modelMaxConns = 32
)

// TestSessionServersBounded is issue 39 item 4 on the real daemon,
// sandbox and an llm session's MCP server and model proxy (D80), each
// item a subtest: cgroup, the server runs in a cgroup below its
// session's (so the session's memory and processes limits count it);
// load, 12 connections each sending a 31 MiB body to its model socket
// (the model named after the bulk: half the session's, forwarded whole
// to the model as they are read, half another, refused once read and
// never whole at the model) and 12 each sending a 16 MiB line to its MCP
// socket (each answered with a JSON-RPC error naming the bound and its
// id, the connection then serving on) leave the server's peak resident
// set under 100 MB (1.5 GB before), and the daemon's; connections, a
// connection past the bound of each socket is refused with an answer
// that says so; end, the session's end ends its server and removes
// their cgroups.
func TestSessionServersBounded(t *testing.T) {
	needs(t, "ocxd", "workspace", "llm ocx-runner-native")
	n := newNodeOn(t, llmRoot)
	up := &discardModel{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	if err := os.WriteFile(filepath.Join(n.agents, "model.json"), []byte(`{"api": "openai", "base_url": "`+srv.URL+`", "models": ["standin-chat"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const login = "native-b1"
	in := filepath.Join(t.TempDir(), "create.json")
	if err := os.WriteFile(in, []byte(`{"objective": "Be there.", "user": "`+login+`", "runner": "native", "hears": ["`+person+`"], "budget": {"wall": "1h"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	record := n.result(n.srv.AdminLogin, "tool", "create", "--input", in)
	ws, err := n.layoutWorkspace(login)
	if err != nil {
		t.Fatal(err)
	}
	var server int
	n.waitFor("the session's MCP server serving", func() bool {
		// Its log says it serves once it has joined its cgroup, if it does.
		b, _ := os.ReadFile(ws.MCPLog)
		server = mcpServerOf(n, login)
		return server > 0 && bytes.Contains(b, []byte("mcp serving"))
	})
	t.Logf("the MCP server: pid %d, resident %d KiB and %d threads at its start", server, procStatusKiB(t, server, "VmRSS:"), procStatusKiB(t, server, "Threads:"))

	t.Run("cgroup", func(t *testing.T) {
		cg := unixhost.HostCgroups()
		if cg.Why() != "" {
			t.Skipf("no cgroup here: %s", cg.Why())
		}
		l, _ := host.NewLayout(n.agents)
		want := "/" + l.SessionCgroup(messages.WorkspaceKey{Login: login, Project: "demo"}) + "/" + host.MCPCgroupName
		b, err := os.ReadFile("/proc/" + strconv.Itoa(server) + "/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		for _, ctl := range []string{"memory", "pids"} {
			if !hasCgroupLine(string(b), ctl, want) {
				t.Errorf("the MCP server is not in %s for %s:\n%s", want, ctl, b)
			}
		}
	})

	t.Run("load", func(t *testing.T) {
		var wg sync.WaitGroup
		type modelResult struct {
			model  string
			status int
			msg    string
			err    error
		}
		models := make([]modelResult, 12)
		lines := make([]string, 12)
		for i := range 12 {
			model := "standin-chat"
			if i%2 == 1 {
				model = "the-expensive-one"
			}
			wg.Go(func() {
				code, msg, err := postModel(ws.ModelSocket(), model)
				models[i] = modelResult{model, code, msg, err}
			})
			wg.Go(func() { lines[i] = hugeLine(ws.MCPSocket(), i) })
		}
		wg.Wait()
		for _, r := range models {
			switch {
			case r.err != nil:
				t.Errorf("a 31 MiB body naming %s: %v", r.model, r.err)
			case r.model == "standin-chat" && r.status != http.StatusOK:
				t.Errorf("a 31 MiB body naming the session's model after it: %d %s", r.status, r.msg)
			case r.model != "standin-chat" && (r.status != http.StatusForbidden || !strings.Contains(r.msg, `"the-expensive-one"`)):
				t.Errorf("a 31 MiB body naming another model after it: %d %s, want 403 naming it", r.status, r.msg)
			}
		}
		for i, l := range lines {
			if l != "" {
				t.Errorf("the 16 MiB line of connection %d: %s", i, l)
			}
		}
		if w := up.whole.Load(); w != 6 {
			t.Errorf("the model read %d bodies whole (%d broke off), want the 6 naming its model", w, up.broken.Load())
		}
		peak := procStatusKiB(t, server, "VmHWM:")
		dpeak := procStatusKiB(t, n.daemonPID(), "VmHWM:")
		t.Logf("after 12 bodies of 31 MiB and 12 lines of 16 MiB: the MCP server's peak resident set %d KiB (now %d KiB), the daemon's %d KiB; the model read %d MiB",
			peak, procStatusKiB(t, server, "VmRSS:"), dpeak, up.bytes.Load()>>20)
		if peak > 100<<10 || dpeak > 100<<10 {
			t.Errorf("peak resident sets: the MCP server %d KiB, the daemon %d KiB; want each under 100 MB", peak, dpeak)
		}
	})

	t.Run("connections", func(t *testing.T) {
		// The session may hold some of its sockets' places itself.
		var open []net.Conn
		defer func() {
			for _, c := range open {
				c.Close()
			}
		}()
		refused := ""
		for range mcpMaxConns + 1 {
			m, err := dialMCP(ws.MCPSocket())
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, m.c)
			io.WriteString(m.c, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
			v, err := m.reply()
			if err != nil {
				t.Fatal(err)
			}
			if refused = errorOf(v); refused != "" {
				break
			}
		}
		if want := fmt.Sprintf("at most %d connections", mcpMaxConns); !strings.Contains(refused, want) {
			t.Errorf("%d connections to the MCP socket: the last answered %q, want a refusal saying %q", len(open), refused, want)
		}
		refused = ""
		for range modelMaxConns + 1 {
			c, err := net.Dial("unix", ws.ModelSocket())
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, c)
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: model\r\n\r\n", "/ocx/model")
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				refused = resp.Status + " " + string(b)
				break
			}
		}
		if want := fmt.Sprintf("at most %d connections", modelMaxConns); !strings.Contains(refused, "503") || !strings.Contains(refused, want) {
			t.Errorf("connections to the model socket: the last answered %q, want 503 saying %q", refused, want)
		}
	})

	t.Run("end", func(t *testing.T) {
		// The session's end ends its server and removes their cgroups.
		n.must(n.srv.AdminLogin, "tool", "stop", "--record", record)
		n.waitFor("the session's end note", func() bool { return len(notesOn[*messages.EndNote](n, record)) > 0 })
		n.waitFor("the MCP server to end", func() bool { return mcpServerOf(n, login) == 0 })
		cg := unixhost.HostCgroups()
		if cg.Why() != "" {
			return
		}
		l, _ := host.NewLayout(n.agents)
		if _, err := cg.Open(l.SessionCgroup(messages.WorkspaceKey{Login: login, Project: "demo"})); err == nil {
			t.Errorf("the session's cgroup is left after its end")
		}
		for _, ll := range n.logLines() {
			if strings.Contains(ll.Msg, "cgroup was not closed") {
				t.Errorf("the daemon: %s", ll.Msg)
			}
		}
	})
}

// hasCgroupLine says whether /proc/PID/cgroup's content b puts the
// process in the cgroup path for controller ctl (v1), or, on v2, in it.
func hasCgroupLine(b, ctl, path string) bool {
	for _, l := range strings.Split(b, "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if (f[1] == "" || strings.Contains(","+f[1]+",", ","+ctl+",")) && strings.HasSuffix(f[2], path) {
			return true
		}
	}
	return false
}

// hugeLine sends a tools/call of 16 MiB on a connection of its own to
// the MCP socket at sock, then a ping: "" when the first is answered
// with an error naming the bound and its id, and the ping answered after
// it, else what went wrong.
func hugeLine(sock string, i int) string {
	m, err := dialMCP(sock)
	if err != nil {
		return err.Error()
	}
	defer m.c.Close()
	id := fmt.Sprintf(`"huge-%d"`, i)
	go func() {
		w := bufio.NewWriterSize(m.c, 1<<20)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"post","arguments":{"text":"`, id)
		for range 16 {
			w.Write(huge()[:1<<20])
		}
		w.WriteString("\"}}}\n")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":"after-%d","method":"ping"}`+"\n", i)
		w.Flush()
	}()
	v, err := m.reply()
	if err != nil {
		return "the huge line: " + err.Error()
	}
	if got, _ := json.Marshal(v["id"]); string(got) != id || !strings.Contains(errorOf(v), "bytes") {
		return fmt.Sprintf("the huge line was answered %v, want an error naming the bound, with id %s", v, id)
	}
	v, err = m.reply()
	if err != nil {
		return "the ping after it: " + err.Error()
	}
	if v["id"] != fmt.Sprintf("after-%d", i) {
		return fmt.Sprintf("the ping after it was answered %v", v)
	}
	return ""
}
