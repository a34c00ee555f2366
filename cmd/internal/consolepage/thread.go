package consolepage

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// threadStatus is a thread's status (seed 002, "answer a thread's
// status"): the sessions whose own record it is, the listeners on it, and
// the queues of the reviewers whose own record it is (D42).
type threadStatus struct {
	Thread    string                   `json:"thread"`
	Sessions  []messages.SessionStatus `json:"sessions"`
	Listeners []messages.Listener      `json:"listeners"`
	Reviews   []messages.ReviewStatus  `json:"reviews,omitzero"`
}

// thread answers a thread's status, named by any of its posts (a full
// hash or a unique prefix of at least 10 digits).
func (p *Page) thread(hash string) {
	if len(hash) < 10 || len(hash) > 64 || strings.Trim(strings.ToLower(hash), "0123456789abcdef") != "" {
		p.JSONError(http.StatusBadRequest, fmt.Errorf("thread %q: name it by a post's hash, at least its first 10 hex digits", hash))
		return
	}
	r, err := p.Reads.Repo(p.Project)
	if err != nil {
		p.JSONError(http.StatusInternalServerError, err)
		return
	}
	info, err := r.Info(p.Ctx, strings.ToLower(hash))
	r.Close()
	if err != nil {
		p.JSONError(http.StatusNotFound, err)
		return
	}
	if info.Kind != fossilio.KindPost {
		p.JSONError(http.StatusNotFound, fmt.Errorf("%s is a %s, not a post of a thread", info.Hash, info.Kind))
		return
	}
	st, err := p.status()
	if err != nil {
		p.JSONError(http.StatusInternalServerError, err)
		return
	}
	out := threadStatus{Thread: info.Root, Sessions: []messages.SessionStatus{}, Listeners: []messages.Listener{}}
	for _, s := range st.Sessions {
		if s.Project == p.Project && s.Record == info.Root {
			out.Sessions = append(out.Sessions, s)
		}
	}
	for _, l := range st.Listeners {
		if l.Project == p.Project && l.Kind == messages.ListenThread && l.Names == info.Root {
			out.Listeners = append(out.Listeners, l)
		}
	}
	for _, rv := range st.Reviews {
		if rv.Project == p.Project && rv.Record == info.Root {
			out.Reviews = append(out.Reviews, rv)
		}
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		p.JSONError(http.StatusInternalServerError, err)
		return
	}
	p.JSONBody(append(data, '\n'))
}
