// Package harness runs a real `fossil server` for tests, on a free port of
// 127.0.0.1, over a fresh repository in its own temporary directory, with a
// private FOSSIL_HOME, not jailed (so the backoffice and hooks run), and with
// users of chosen capabilities; it ends everything it started, by PID.
//
//	srv := harness.StartServer(t, harness.Options{Users: []harness.User{{Login: "alice", Password: "pw", Caps: "i"}}})
//	srv.URL, srv.Repo, srv.ProjectCode, srv.AdminLogin, srv.AdminPassword
//	out, err := srv.Fossil("tag", "add", "-R", srv.Repo, ...) // the private environment
//	err = srv.Backoffice()                                    // fossil backoffice --nolease REPO
//	harness.Track(t, pid)                                     // pid must be gone at the test's end
//
// At the test's end the server's process group is ended, then every process
// whose command line names the server's directory (the backoffice it forked,
// hooks naming %R); a test fails if any of them, or a tracked process, is
// still alive after that.
package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// User is a login to create on the test repository.
type User struct {
	Login    string
	Password string
	Caps     string // capability letters, stored verbatim
}

// Options choose what StartServer sets up.
type Options struct {
	// Users are created on the repository before the server starts.
	Users []User
	// Project names the repository file (PROJECT.fossil); default "demo".
	Project string
	// Dir is the directory to work in; default a fresh t.TempDir().
	Dir string
	// Settings are repository settings (fossil settings NAME VALUE) applied
	// before the server starts, e.g. {"backoffice-nodelay": "1"}.
	Settings map[string]string
	// Setup, when not nil, runs after the repository and users are made and
	// before the server starts.
	Setup func(s *Server) error
	// ExtRoot, when set, is served as the CGI extensions' root
	// (fossil server --extroot DIR): what /ext/NAME runs.
	ExtRoot string
	// Host, when set, is where the server and every fossil command run
	// (Host.Command): a host sharing the test's network whose file
	// system differs (a node's agents root on a small disk of its own),
	// so that the hooks the server runs see what the node sees.
	Host *Host
}

// Server is a running fossil server over a fresh repository.
type Server struct {
	URL           string // http://127.0.0.1:PORT/
	Port          int
	Repo          string // the repository file
	Dir           string // the server's own directory (holds Repo and Home)
	Home          string // FOSSIL_HOME and HOME of every fossil process run here
	ProjectCode   string
	AdminLogin    string
	AdminPassword string
	PID           int // the fossil server process
	ExtRoot       string

	t       testing.TB
	host    *Host
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	stopped bool
}

// FossilPath is the fossil executable the harness runs.
var FossilPath = "fossil"

// StartServer makes a repository and starts `fossil server` over it. It
// fails the test (t.Fatal) when anything goes wrong; cleanup ends the server.
func StartServer(t testing.TB, opts Options) *Server {
	t.Helper()
	exe, err := exec.LookPath(FossilPath)
	if err != nil {
		t.Fatalf("harness: fossil is not installed (make deps installs it): %v", err)
	}
	dir := opts.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	project := opts.Project
	if project == "" {
		project = "demo"
	}
	s := &Server{
		Dir:           dir,
		Home:          filepath.Join(dir, "home"),
		Repo:          filepath.Join(dir, project+".fossil"),
		AdminLogin:    "admin",
		AdminPassword: randomText(12),
		t:             t,
		logPath:       filepath.Join(dir, "server.log"),
		ExtRoot:       opts.ExtRoot,
		host:          opts.Host,
	}
	if err := os.MkdirAll(s.Home, 0o700); err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(s.cleanup)
	s.mustFossil("init", "-A", s.AdminLogin, s.Repo)
	// fossil init stores the admin's first password in clear; setting it
	// again stores the shared secret, as for every other user.
	s.mustFossil("user", "password", s.AdminLogin, s.AdminPassword, "-R", s.Repo)
	for _, u := range opts.Users {
		s.mustFossil("user", "new", u.Login, u.Login+"@example.invalid", u.Password, "-R", s.Repo)
		s.mustFossil("user", "capabilities", u.Login, u.Caps, "-R", s.Repo)
	}
	for name, value := range opts.Settings {
		s.mustFossil("settings", name, value, "-R", s.Repo)
	}
	info := s.mustFossil("info", "-R", s.Repo)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "project-code:"); ok {
			s.ProjectCode = strings.TrimSpace(v)
		}
	}
	if len(s.ProjectCode) < 40 {
		t.Fatalf("harness: no project code in `fossil info`:\n%s", info)
	}
	if opts.Setup != nil {
		if err := opts.Setup(s); err != nil {
			t.Fatalf("harness: setup: %v", err)
		}
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if lastErr = s.start(exe); lastErr == nil {
			return s
		}
	}
	t.Fatalf("harness: fossil server did not start: %v\n%s", lastErr, s.log())
	return nil
}

// start picks a free port and starts the server; it returns when the port
// accepts connections, or an error when the server exited first.
func (s *Server) start(exe string) error { return s.startOn(exe, 0) }

// startOn is start on the port given, or a free one for 0.
func (s *Server) startOn(exe string, port int) error {
	var err error
	if port == 0 {
		if port, err = freePort(); err != nil {
			return err
		}
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	args := []string{"server", "--port", strconv.Itoa(port), "--localhost", "--nojail"}
	if s.ExtRoot != "" {
		args = append(args, "--extroot", s.ExtRoot)
	}
	cmd := s.command(nil, exe, append(args, s.Repo)...)
	cmd.Dir = s.Dir
	cmd.Env = s.Env()
	cmd.Stdout, cmd.Stderr = logf, logf
	// A group of its own, so that ending the group ends its request handlers.
	// And the kernel kills it when the test binary dies without running its
	// cleanups (a test timeout panics and exits at once): a test's server,
	// unlike a session, must never outlive the test. Pdeathsig fires when the
	// thread that started the process ends, so that thread is locked to the
	// goroutine that waits for the server, and ends only after it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	exited := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	err = <-started
	logf.Close()
	if err != nil {
		return fmt.Errorf("start fossil server: %w", err)
	}
	s.cmd, s.exited, s.PID, s.Port = cmd, exited, cmd.Process.Pid, port
	s.URL = fmt.Sprintf("http://127.0.0.1:%d/", port)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("fossil server on port %d exited: %v", port, cmd.ProcessState)
		default:
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.endGroup()
	return fmt.Errorf("fossil server on port %d did not accept connections in 15 s", port)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// command is a program run where the server runs: on its host, when it
// has one.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if s.host != nil {
		if p, err := exec.LookPath(name); err == nil {
			name = p
		}
		return s.host.Command(ctx, name, args...)
	}
	if ctx == nil {
		return exec.Command(name, args...)
	}
	return exec.CommandContext(ctx, name, args...)
}

// Env is the private environment of every fossil process the harness runs:
// no CGI or FOSSIL_USER variables leak in, and HOME and FOSSIL_HOME are the
// server's own directory, so nothing touches a shared global config.
func (s *Server) Env() []string {
	return FossilEnv(s.Home, s.AdminLogin)
}

// FossilEnv is a clean environment for the fossil CLI: PATH, HOME,
// FOSSIL_HOME and USER, and nothing else.
func FossilEnv(home, user string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path, "HOME=" + home, "FOSSIL_HOME=" + home, "LANG=C.UTF-8"}
	if user != "" {
		env = append(env, "USER="+user)
	}
	return env
}

// Fossil runs the fossil CLI with the private environment in the server's
// directory and returns what it printed (stdout and stderr).
func (s *Server) Fossil(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := s.command(ctx, FossilPath, args...)
	cmd.Dir = s.Dir
	cmd.Env = s.Env()
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("fossil %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

func (s *Server) mustFossil(args ...string) string {
	s.t.Helper()
	out, err := s.Fossil(args...)
	if err != nil {
		s.t.Fatalf("harness: %v", err)
	}
	return out
}

// Backoffice runs the repository's backoffice now, ignoring the lease the
// server's own backoffice holds for 60 s, so hooks see what just arrived.
func (s *Server) Backoffice() error {
	_, err := s.Fossil("backoffice", "--nolease", s.Repo)
	return err
}

// UserURL is the server's URL with a login and password in it, as the fossil
// client takes them.
func (s *Server) UserURL(login, password string) string {
	return fmt.Sprintf("http://%s:%s@127.0.0.1:%d/", escapeUserinfo(login), escapeUserinfo(password), s.Port)
}

func escapeUserinfo(s string) string {
	r := strings.NewReplacer("%", "%25", "@", "%40", ":", "%3a", "/", "%2f")
	return r.Replace(s)
}

// LoginCookie logs in through Fossil's own login page, as a browser does,
// and returns the login cookie it sets (NAME=VALUE, as a browser sends it).
func (s *Server) LoginCookie(login, password string) (string, error) {
	form := url.Values{"u": {login}, "p": {password}, "in": {"Login"}}
	req, err := http.NewRequest(http.MethodPost, s.URL+"login", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Referer", s.URL+"login")
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("harness: log in as %s: %w", login, err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if strings.HasPrefix(ck.Name, "fossil-") && ck.Value != "" {
			return ck.Name + "=" + ck.Value, nil
		}
	}
	return "", fmt.Errorf("harness: log in as %s: %s and no login cookie", login, resp.Status)
}

// Down ends the server's process group, as its host going down: the
// repository stays as the server left it. Up starts it again.
func (s *Server) Down() {
	s.t.Helper()
	s.endGroup()
}

// Up starts a server Down ended, on the same port and URL, trying again
// while the port is not free yet.
func (s *Server) Up() {
	s.t.Helper()
	exe, err := exec.LookPath(FossilPath)
	if err != nil {
		s.t.Fatal(err)
	}
	var lastErr error
	for attempt := 0; attempt < 50; attempt++ {
		if lastErr = s.startOn(exe, s.Port); lastErr == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("harness: fossil server did not start again on port %d: %v\n%s", s.Port, lastErr, s.log())
}

// Stop ends the server now (cleanup does it otherwise).
func (s *Server) Stop() {
	s.t.Helper()
	s.cleanup()
}

func (s *Server) log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// endGroup ends the server's process group: TERM, then KILL if it lingers.
func (s *Server) endGroup() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.PID, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-s.PID, syscall.SIGKILL)
		<-s.exited
	}
	// Request handlers still running in the group get the same end.
	_ = syscall.Kill(-s.PID, syscall.SIGKILL)
	s.cmd = nil
}

func (s *Server) cleanup() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.endGroup()
	// The backoffice leaves the server's group (setsid) and may sleep on
	// deck for up to a minute; hooks run from it. Each names the server's
	// directory on its command line, which is how they are found.
	left := endNaming(s.Dir)
	if len(left) > 0 {
		s.t.Errorf("harness: processes naming %s still alive after being killed: %v", s.Dir, left)
	}
}

// endNaming kills every process whose command line contains dir, by PID,
// and returns those still alive afterwards.
func endNaming(dir string) []int {
	pids := pidsNaming(dir)
	for _, p := range pids {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	var alive []int
	for _, p := range pids {
		if !waitGone(p, 5*time.Second) {
			alive = append(alive, p.pid)
		}
	}
	return alive
}

func randomText(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	// Letters and digits only, never 40 hex digits (which Fossil's client
	// would take for a shared secret).
	return "pw" + hex.EncodeToString(b)[:n]
}

var errGone = errors.New("process gone")
