package console

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// git serves a fetch of the repository's git mirror (seed 002, "serve a
// git fetch") over git's smart HTTP, by `git http-backend`: read-only, the
// upload-pack service alone, to a viewer who may read.
func (q *request) git(rest []string) {
	sub := strings.Join(rest, "/")
	service := q.R.URL.Query().Get("service")
	switch {
	case q.R.Method == http.MethodGet && sub == "info/refs" && service == "git-upload-pack":
	case q.R.Method == http.MethodPost && sub == "git-upload-pack":
	default:
		q.Plain(http.StatusForbidden, fmt.Sprintf("the git mirror serves fetches only (git-upload-pack over smart HTTP): %s %s is refused", q.R.Method, "git/"+sub))
		return
	}
	r, err := q.n.OpenRepo(q.Project)
	if err != nil {
		q.Plain(http.StatusInternalServerError, err.Error())
		return
	}
	mirror, ok, err := r.Config(q.Ctx, "last-git-export-repo")
	r.Close()
	if err != nil {
		q.Plain(http.StatusInternalServerError, err.Error())
		return
	}
	if !ok || mirror == "" || !filepath.IsAbs(mirror) {
		q.Plain(http.StatusNotFound, "this repository has no git mirror (fossil git export DIR makes one, and the hook keeps it current)")
		return
	}
	if st, err := os.Stat(mirror); err != nil || !st.IsDir() {
		q.Plain(http.StatusNotFound, fmt.Sprintf("the git mirror %s is not there: %v", mirror, err))
		return
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		q.Plain(http.StatusInternalServerError, "git is not installed on the node: "+err.Error())
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
	req := q.R.Clone(q.Ctx)
	req.URL.Path = "/git/" + filepath.Base(mirror) + "/" + sub
	req.URL.RawPath = ""
	h.ServeHTTP(q.W, req)
}
