package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// ThreadStatus is a thread's status (seed 002, "answer a thread's
// status"): the sessions whose own record it is, the listeners on it, and
// the queues of the reviewers whose own record it is (D42).
type ThreadStatus struct {
	Thread    string                   `json:"thread"`
	Sessions  []messages.SessionStatus `json:"sessions"`
	Listeners []messages.Listener      `json:"listeners"`
	Reviews   []messages.ReviewStatus  `json:"reviews,omitzero"`
}

// thread answers a thread's status, named by any of its posts (a full
// hash or a unique prefix of at least 10 digits).
func (q *request) thread(hash string) {
	if len(hash) < 10 || len(hash) > 64 || strings.Trim(strings.ToLower(hash), "0123456789abcdef") != "" {
		q.jsonError(http.StatusBadRequest, fmt.Errorf("thread %q: name it by a post's hash, at least its first 10 hex digits", hash))
		return
	}
	r, err := q.n.OpenRepo(q.project)
	if err != nil {
		q.jsonError(http.StatusInternalServerError, err)
		return
	}
	info, err := r.Info(q.ctx, strings.ToLower(hash))
	r.Close()
	if err != nil {
		q.jsonError(http.StatusNotFound, err)
		return
	}
	if info.Kind != fossilio.KindPost {
		q.jsonError(http.StatusNotFound, fmt.Errorf("%s is a %s, not a post of a thread", info.Hash, info.Kind))
		return
	}
	st, err := q.status()
	if err != nil {
		q.jsonError(http.StatusInternalServerError, err)
		return
	}
	out := ThreadStatus{Thread: info.Root, Sessions: []messages.SessionStatus{}, Listeners: []messages.Listener{}}
	for _, s := range st.Sessions {
		if s.Project == q.project && s.Record == info.Root {
			out.Sessions = append(out.Sessions, s)
		}
	}
	for _, l := range st.Listeners {
		if l.Project == q.project && l.Kind == messages.ListenThread && l.Names == info.Root {
			out.Listeners = append(out.Listeners, l)
		}
	}
	for _, r := range st.Reviews {
		if r.Project == q.project && r.Record == info.Root {
			out.Reviews = append(out.Reviews, r)
		}
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		q.jsonError(http.StatusInternalServerError, err)
		return
	}
	q.jsonBody(append(data, '\n'))
}

// git serves a fetch of the repository's git mirror (seed 002, "serve a
// git fetch") over git's smart HTTP, by `git http-backend`: read-only, the
// upload-pack service alone, to a viewer who may read.
func (q *request) git(rest []string) {
	if q.c.InDaemon {
		// wire.NotByDaemon keeps every git path from the daemon; a
		// path that reached it anyway runs no git there.
		q.plain(http.StatusInternalServerError, "the daemon runs no git: a fetch of the git mirror is served by ocx console")
		return
	}
	sub := strings.Join(rest, "/")
	service := q.r.URL.Query().Get("service")
	switch {
	case q.r.Method == http.MethodGet && sub == "info/refs" && service == "git-upload-pack":
	case q.r.Method == http.MethodPost && sub == "git-upload-pack":
	default:
		q.plain(http.StatusForbidden, fmt.Sprintf("the git mirror serves fetches only (git-upload-pack over smart HTTP): %s %s is refused", q.r.Method, "git/"+sub))
		return
	}
	r, err := q.n.OpenRepo(q.project)
	if err != nil {
		q.plain(http.StatusInternalServerError, err.Error())
		return
	}
	mirror, ok, err := r.Config(q.ctx, "last-git-export-repo")
	r.Close()
	if err != nil {
		q.plain(http.StatusInternalServerError, err.Error())
		return
	}
	if !ok || mirror == "" || !filepath.IsAbs(mirror) {
		q.plain(http.StatusNotFound, "this repository has no git mirror (fossil git export DIR makes one, and the hook keeps it current)")
		return
	}
	if st, err := os.Stat(mirror); err != nil || !st.IsDir() {
		q.plain(http.StatusNotFound, fmt.Sprintf("the git mirror %s is not there: %v", mirror, err))
		return
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		q.plain(http.StatusInternalServerError, "git is not installed on the node: "+err.Error())
		return
	}
	h := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Root: "/git",
		Dir:  filepath.Dir(mirror),
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Dir(mirror),
			"GIT_HTTP_EXPORT_ALL=1",
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"HOME=" + q.n.Agents,
			"GIT_CONFIG_NOSYSTEM=1",
			// The mirror serves no push, whoever asks.
			"GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=false",
			"GIT_CONFIG_KEY_1=safe.directory", "GIT_CONFIG_VALUE_1=*",
		},
		InheritEnv: nil,
	}
	req := q.r.Clone(q.ctx)
	req.URL.Path = "/git/" + filepath.Base(mirror) + "/" + sub
	req.URL.RawPath = ""
	h.ServeHTTP(q.w, req)
}
