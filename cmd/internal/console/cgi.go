package console

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"sort"
	"strconv"
	"strings"

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
	w := newCGIWriter()
	w.header.Set(ServedByHeader, "console")
	r, f, ok := cgiRequest(w, environ)
	if !ok {
		return w.flush(stdout)
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
	c, err := Open(agents)
	if err != nil {
		w.fail(http.StatusInternalServerError, err.Error())
		return w.flush(stdout)
	}
	if why := envValue(environ, wire.ConsoleFallbackEnv); why != "" {
		// ocx-console found the daemon taking no ask (D75): asked again,
		// it would hold this page as long.
		c.Node.Ask = func(context.Context, *wire.Ask) (*wire.Reply, error) {
			return nil, notTaken(why)
		}
	}
	c.Serve(w, r, f)
	return w.flush(stdout)
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

// ServedByHeader says which process rendered a page: "daemon" (D71) or
// "console", an `ocx console` of its own. Fossil passes it on.
const ServedByHeader = "X-Ocx-Served-By"

// ServePage answers one page asked by GET or HEAD with the environment
// Fossil gave its CGI, in the daemon (D71): the request has no body, and
// the process's own environment is left as it is. It returns the whole
// CGI reply.
func (c *Console) ServePage(environ []string) []byte {
	w := newCGIWriter()
	w.header.Set(ServedByHeader, "daemon")
	if r, f, ok := cgiRequest(w, environ); ok {
		c.Serve(w, r, f)
	}
	var out bytes.Buffer
	w.flush(&out)
	return out.Bytes()
}

// cgiRequest reads the request from Fossil's environment, its body none;
// a request that does not read is failed on w.
func cgiRequest(w *cgiWriter, environ []string) (*http.Request, Fossil, bool) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	f, err := FossilFromEnv(func(k string) string { return env[k] })
	if err != nil {
		w.fail(http.StatusBadRequest, err.Error())
		return nil, f, false
	}
	// Fossil sets no SERVER_PROTOCOL (fossil-2.21.md §5, VERIFIED by dumping
	// ext/env), which net/http/cgi requires.
	if env["SERVER_PROTOCOL"] == "" {
		env["SERVER_PROTOCOL"] = "HTTP/1.1"
	}
	r, err := cgi.RequestFromMap(env)
	if err != nil {
		w.fail(http.StatusBadRequest, "console: the request does not read: "+err.Error())
		return nil, f, false
	}
	r.Body = http.NoBody
	return r, f, true
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

// cgiWriter is an http.ResponseWriter that keeps the reply whole and writes
// it as a CGI reply: a Status line, the headers (each well under the 1000
// bytes Fossil reads a header line into), a blank line, the body.
type cgiWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newCGIWriter() *cgiWriter { return &cgiWriter{header: http.Header{}} }

func (w *cgiWriter) Header() http.Header { return w.header }

func (w *cgiWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

func (w *cgiWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *cgiWriter) fail(code int, msg string) {
	w.header.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	w.body.WriteString(msg + "\n")
}

// flush writes the reply. A reply without a Content-Type is sent as plain
// text, never sniffed: Fossil wraps text/html in its skin only when it
// begins with the console's div, and passes anything else through.
func (w *cgiWriter) flush(out io.Writer) int {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.header.Get("Content-Type") == "" {
		w.header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	b := bufio.NewWriter(out)
	fmt.Fprintf(b, "Status: %d %s\r\n", w.status, http.StatusText(w.status))
	keys := make([]string, 0, len(w.header))
	for k := range w.header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range w.header[k] {
			v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
			fmt.Fprintf(b, "%s: %s\r\n", k, v)
		}
	}
	if w.header.Get("Content-Length") == "" {
		fmt.Fprintf(b, "Content-Length: %s\r\n", strconv.Itoa(w.body.Len()))
	}
	b.WriteString("\r\n")
	b.Write(w.body.Bytes())
	if err := b.Flush(); err != nil {
		return 1
	}
	return 0
}
