package consolepage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ocx-go/ocx/messages/wire"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

// ServedByHeader says which process rendered a page: "daemon" (D71) or
// "console", an `ocx console` of its own. Fossil passes it on.
const ServedByHeader = "X-Ocx-Served-By"

// ServePage renders the page a GET or HEAD asks for (Serve), with the
// environment Fossil gave its CGI, in the daemon (D71): the request has no
// body, and the process's own environment is left as it is. It returns
// the whole CGI reply; ok is false, and nothing is rendered, when the page
// is not one of this package's (a form, the releases, the tools), which
// `ocx console` serves.
func ServePage(environ []string, layout host.Layout, cfg *messages.NodeConfig, reads Reads, key []byte, log *slog.Logger) (out []byte, ok bool) {
	w := NewCGIWriter()
	w.Header().Set(ServedByHeader, "daemon")
	if r, f, read := CGIRequest(w, environ); read {
		if m := r.Method; m != http.MethodGet && m != http.MethodHead {
			return nil, false
		}
		ctx, cancel := context.WithTimeout(r.Context(), PageBound)
		defer cancel()
		if p, ok := Begin(ctx, w, r, f); ok && p.Open(layout, cfg, reads, key, log) && !p.Serve(wire.ConsolePath(f.Path)) {
			return nil, false
		}
	}
	var b bytes.Buffer
	w.Flush(&b)
	return b.Bytes(), true
}

// PageBound bounds one request's work.
const PageBound = 2 * time.Minute

// CGIRequest reads the request from Fossil's environment, its body none;
// a request that does not read is failed on w.
func CGIRequest(w *cgiWriter, environ []string) (*http.Request, Fossil, bool) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	f, err := fossilFromEnv(func(k string) string { return env[k] })
	if err != nil {
		w.Fail(http.StatusBadRequest, err.Error())
		return nil, f, false
	}
	// Fossil sets no SERVER_PROTOCOL (fossil-2.21.md §5, VERIFIED by dumping
	// ext/env), which net/http/cgi requires.
	if env["SERVER_PROTOCOL"] == "" {
		env["SERVER_PROTOCOL"] = "HTTP/1.1"
	}
	r, err := cgi.RequestFromMap(env)
	if err != nil {
		w.Fail(http.StatusBadRequest, "console: the request does not read: "+err.Error())
		return nil, f, false
	}
	r.Body = http.NoBody
	return r, f, true
}

// cgiWriter is an http.ResponseWriter that keeps the reply whole and writes
// it as a CGI reply: a Status line, the headers (each well under the 1000
// bytes Fossil reads a header line into), a blank line, the body.
type cgiWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func NewCGIWriter() *cgiWriter { return &cgiWriter{header: http.Header{}} }

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

func (w *cgiWriter) Fail(code int, msg string) {
	w.header.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	w.body.WriteString(msg + "\n")
}

// Flush writes the reply. A reply without a Content-Type is sent as plain
// text, never sniffed: Fossil wraps text/html in its skin only when it
// begins with the console's div, and passes anything else through.
func (w *cgiWriter) Flush(out io.Writer) int {
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
