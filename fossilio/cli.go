package fossilio

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// defaultCommandTimeout bounds one fossil command when the context has no
// deadline of its own.
const defaultCommandTimeout = 10 * time.Minute

// Fossil runs the fossil command-line program in a clean, private
// environment: no CGI variables, no FOSSIL_USER, and HOME and FOSSIL_HOME set
// to Home, so a command never reads or writes a shared global config.
type Fossil struct {
	// Exe is the fossil executable; default "fossil" on PATH.
	Exe string
	// Home is HOME and FOSSIL_HOME for the command (required): Fossil records
	// clones and check-outs in $FOSSIL_HOME/.fossil.
	Home string
	// User is USER for the command: the CLI user when nothing else names
	// one. Empty leaves USER unset.
	User string
	// Dir is the working directory; default the current one.
	Dir string
	// Proxy, when set, is the HTTP proxy Pull and Push reach the server
	// through (fossil's --proxy): the clone's remembered URL and password
	// are used as they are, and the proxy carries the request. A session
	// sets it to its relay to the node's sync socket (D49).
	Proxy string
}

// Env is the environment every fossil command gets: its PATH, its home,
// and the trust store OpenSSL is told of (SSL_CERT_FILE, SSL_CERT_DIR),
// so that a server behind https whose certificate a CA of the operator's
// own signed is trusted by fossil as by the node's own programs (D81).
func (f *Fossil) Env() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path, "HOME=" + f.Home, "FOSSIL_HOME=" + f.Home, "LANG=C.UTF-8"}
	if f.User != "" {
		env = append(env, "USER="+f.User)
	}
	for _, k := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR"} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Run runs fossil with args and returns what it printed (stdout then
// stderr). A non-zero exit is a *CommandError carrying the output. secrets
// are masked in the error's copy of the arguments.
func (f *Fossil) Run(ctx context.Context, args []string, secrets ...string) (string, error) {
	return f.run(ctx, args, "", secrets)
}

func (f *Fossil) run(ctx context.Context, args []string, dir string, secrets []string) (string, error) {
	if f.Home == "" {
		return "", fmt.Errorf("%w: fossil command without a private home (Fossil.Home)", ErrBadInput)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCommandTimeout)
		defer cancel()
	}
	exe := f.Exe
	if exe == "" {
		exe = "fossil"
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = f.Env()
	cmd.Dir = f.Dir
	if dir != "" {
		cmd.Dir = dir
	}
	// Standard input is never a terminal, so fossil never prompts.
	cmd.Stdin = nil
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String() + stderr.String()
	if err != nil {
		return out, &CommandError{Args: mask(args, secrets), Output: strings.TrimSpace(out), Err: err}
	}
	return out, nil
}

// syncFailure finds the failure a fossil sync, push, pull or clone printed;
// those commands exit 0 on a refused login or write.
func syncFailure(out string) string {
	for _, line := range strings.Split(out, "\n") {
		l := strings.TrimSpace(line)
		low := strings.ToLower(l)
		switch {
		case strings.HasPrefix(low, "error:"),
			strings.HasPrefix(low, "server says:"),
			strings.Contains(low, "login failed"),
			strings.Contains(low, "not authorized"),
			strings.Contains(low, "missing or incorrect password"),
			strings.Contains(low, "wrong project"),
			// It could not reach the server at all, and still says
			// "Pull done ... remote: " and exits 0.
			strings.HasPrefix(low, "cannot connect to host"),
			strings.Contains(low, "unable to"):
			return l
		}
	}
	return ""
}

func mask(args, secrets []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for _, s := range secrets {
			if s != "" {
				a = strings.ReplaceAll(a, s, "***")
			}
		}
		out[i] = a
	}
	return out
}
