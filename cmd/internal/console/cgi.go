package console

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/consolepage"
	"github.com/ocx-go/ocx/host/nodesock"
	"github.com/ocx-go/ocx/messages/wire"
)

// ServeCGI answers one request as Fossil's CGI extension: environ is the
// environment Fossil gave, stdin the request's body (Fossil does not close
// it: exactly CONTENT_LENGTH bytes are read), stdout the reply. The
// process's own environment is then cleared of Fossil's variables (a
// `fossil` the actions run must not take GATEWAY_INTERFACE for a CGI
// request, nor FOSSIL_USER for its user) and given a PATH. It returns the
// exit status: 0 whenever a reply was written.
func ServeCGI(agents string, stdin io.Reader, stdout io.Writer, environ []string) int {
	w := consolepage.NewCGIWriter()
	w.Header().Set(consolepage.ServedByHeader, "console")
	r, f, ok := consolepage.CGIRequest(w, environ)
	if !ok {
		return w.Flush(stdout)
	}
	// Fossil reads a request's body for its CGI only when the request
	// names its type (src/cgi.c cgi_init); without one it passes
	// CONTENT_LENGTH and no body, and a read of it would wait until
	// Fossil's own timeout (10 minutes). So such a request has none.
	if r.ContentLength > 0 && r.Header.Get("Content-Type") != "" {
		r.Body = io.NopCloser(io.LimitReader(stdin, r.ContentLength))
	} else {
		r.ContentLength = 0
	}
	scrubEnv(agents)
	c, err := open(agents)
	if err != nil {
		w.Fail(http.StatusInternalServerError, err.Error())
		return w.Flush(stdout)
	}
	if why := envValue(environ, wire.ConsoleFallbackEnv); why != "" {
		// ocx-console found the daemon taking no ask (D75): asked again,
		// it would hold this page as long.
		c.Node.Ask = func(context.Context, *wire.Ask) (*wire.Reply, error) {
			return nil, notTaken(why)
		}
	}
	c.Serve(w, r, f)
	return w.Flush(stdout)
}

// notTaken is ocx-console's finding that the daemon took no ask
// (nodesock.ErrNotTaken), in its words.
type notTaken string

func (e notTaken) Error() string { return string(e) }

func (notTaken) Is(target error) bool { return target == nodesock.ErrNotTaken }

// envValue is the value of name in environ, "" when it has none.
func envValue(environ []string, name string) string {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// scrubEnv leaves the process only what its children need.
func scrubEnv(agents string) {
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		os.Unsetenv(k)
	}
	os.Setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
	os.Setenv("HOME", agents)
	os.Setenv("LANG", "C.UTF-8")
}
