package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ocx-go/ocx/fossilio"
)

func init() {
	register(command{name: "demo", summary: "run a demo node on 127.0.0.1 until interrupted", run: runDemo})
}

// The demo's agent login and the thread it writes.
const (
	demoAgent = "agent-demo"
	demoAdmin = "admin"
)

// runDemo starts a Fossil server on 127.0.0.1 over a demo repository,
// provisions an agent login, writes a thread as that login through
// fossilio, prints where to look, and runs until interrupted; then it ends
// the server by PID.
func runDemo(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	dir := fs.String("dir", "", "directory for the demo node (default: a new temporary one, removed at the end)")
	port := fs.Int("port", 0, "port on 127.0.0.1 (default: a free one)")
	project := fs.String("project", "demo", "the project (repository) name")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if err := fossilio.CheckLoginName(*project); err != nil {
		return fmt.Errorf("%w: project: %v", errUsage, err)
	}
	root := *dir
	if root == "" {
		tmp, err := os.MkdirTemp("", "ocx-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		root = tmp
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	home := filepath.Join(root, "home")
	agents := filepath.Join(root, "agents")
	for _, d := range []string{home, agents} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	fsl := &fossilio.Fossil{Home: home, User: demoAdmin, Dir: root}
	repo := filepath.Join(root, *project+".fossil")
	adminPw, err := demoRepository(ctx, fsl, repo)
	if err != nil {
		return err
	}
	admin := &fossilio.Admin{Repository: repo, Fossil: fsl}
	pwFile := filepath.Join(agents, demoAgent, "password")
	if err := admin.ProvisionAgent(ctx, demoAgent, pwFile); err != nil {
		return err
	}
	agentPw, err := fossilio.ReadPasswordFile(pwFile)
	if err != nil {
		return err
	}

	srv, err := startServer(ctx, fsl, repo, *port)
	if err != nil {
		return err
	}
	defer srv.stop(e)
	e.log.Info("fossil server started", "pid", srv.pid, "url", srv.url, "repository", repo)

	reader, err := fossilio.OpenNode(repo, nil)
	if err != nil {
		return err
	}
	defer reader.Close()
	code, err := reader.ProjectCode(ctx)
	if err != nil {
		return err
	}
	agent := &fossilio.Client{URL: srv.url, Login: demoAgent, Password: agentPw, ProjectCode: code, Backoffice: admin.Backoffice}
	thread, err := agent.NewThread(ctx, "Hello from "+demoAgent,
		"This thread was written by the agent login `"+demoAgent+"` through fossilio, over Fossil's sync protocol.\n\n"+
			"```json\n{\"ocx\": \"hello\", \"login\": \""+demoAgent+"\"}\n```\n")
	if err != nil {
		return err
	}
	info, err := reader.Info(ctx, thread)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "OCX demo node\n")
	fmt.Fprintf(e.stdout, "  url:         %s\n", srv.url)
	fmt.Fprintf(e.stdout, "  repository:  %s\n", repo)
	fmt.Fprintf(e.stdout, "  admin login: %s  password: %s\n", demoAdmin, adminPw)
	fmt.Fprintf(e.stdout, "  agent login: %s  (password in %s)\n", demoAgent, pwFile)
	fmt.Fprintf(e.stdout, "  thread:      %sforumpost/%s  (sent by %s)\n", srv.url, thread[:fossilio.MinPrefix], info.Sender)
	fmt.Fprintf(e.stdout, "ready; press Ctrl-C to stop\n")

	select {
	case <-ctx.Done():
	case <-srv.exited:
		return fmt.Errorf("fossil server (pid %d) exited by itself", srv.pid)
	}
	return nil
}

// demoRepository makes the demo repository, or reuses one left in the
// directory, and gives the admin a fresh password.
func demoRepository(ctx context.Context, fsl *fossilio.Fossil, repo string) (string, error) {
	if _, err := os.Stat(repo); errors.Is(err, os.ErrNotExist) {
		if _, err := fsl.Run(ctx, []string{"init", "-A", demoAdmin, repo}); err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}
	pw := fossilio.NewPassword()
	if _, err := fsl.Run(ctx, []string{"user", "password", demoAdmin, pw, "-R", repo}, pw); err != nil {
		return "", err
	}
	return pw, nil
}

// server is a running fossil server, in a process group of its own.
type server struct {
	pid    int
	url    string
	argv   []string
	exited chan struct{}
}

// startServer starts `fossil server` on 127.0.0.1, unjailed so that the
// backoffice and hooks run (reference 4.5), and waits until it accepts
// connections.
func startServer(ctx context.Context, fsl *fossilio.Fossil, repo string, port int) (*server, error) {
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	exe := fsl.Exe
	if exe == "" {
		exe = "fossil"
	}
	cmd := exec.Command(exe, "server", "--port", strconv.Itoa(port), "--localhost", "--nojail", repo)
	cmd.Env = fsl.Env()
	cmd.Dir = filepath.Dir(repo)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fossil server: %w", err)
	}
	s := &server{pid: cmd.Process.Pid, url: fmt.Sprintf("http://127.0.0.1:%d/", port), argv: cmd.Args, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("fossil server on port %d exited: %s", port, strings.TrimSpace(out.String()))
		case <-ctx.Done():
			s.stop(nil)
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop(nil)
			return nil, fmt.Errorf("fossil server on port %d did not accept connections in 15 s", port)
		}
	}
}

// stop ends the server's process group by its PID: TERM, then KILL. The
// backoffice the server forks leaves its group (setsid) and may sleep for up
// to a minute waiting for its lease; it has the server's own command line,
// so each such process is ended by its PID too.
func (s *server) stop(e *env) {
	_ = syscall.Kill(-s.pid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		<-s.exited
	}
	_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	for _, pid := range pidsWithArgv(s.argv) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if e != nil {
		e.log.Info("fossil server stopped", "pid", s.pid)
	}
}

// pidsWithArgv lists the processes whose command line is exactly argv.
func pidsWithArgv(argv []string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err == nil && string(b) == want {
			pids = append(pids, pid)
		}
	}
	return pids
}
