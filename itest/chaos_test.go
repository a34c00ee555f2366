package itest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// chaosSeconds is how long TestChaos posts and breaks things:
// OCX_CHAOS_SECONDS, default 60 (issue 38).
func chaosSeconds(t *testing.T) time.Duration {
	if v := os.Getenv("OCX_CHAOS_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("OCX_CHAOS_SECONDS=%q is not a whole number of seconds", v)
		}
		return time.Duration(n) * time.Second
	}
	return 60 * time.Second
}

// chaosSession is one of TestChaos's sessions.
type chaosSession struct {
	login, record string
	mu            sync.Mutex
	launch        string // the launch it runs now
}

func (s *chaosSession) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.launch
}

// TestChaos (issue 38): five `stays` sessions, and a person posting in
// their threads through `ocx post`, Fossil's web form and the sync
// protocol, for a minute, while the test kills the daemon outright, takes
// the Fossil server down and up, kills sessions (and starts them again),
// and stops the daemon with SIGSTOP, at random (the seed is logged).
// Afterwards every post that reached the record was answered once by its
// session, or noted unheard once, never both; and each session process
// (PID and start time) has exactly one end note.
func TestChaos(t *testing.T) {
	needs(t, "ocxd", "workspace")
	n := newNode(t)
	startDaemon(t, n, program("ocxd"))
	admin := n.srv.AdminLogin
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("OCX_CHAOS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("chaos seed %d (OCX_CHAOS_SEED=%d repeats it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	var sessions []*chaosSession
	for i := 1; i <= 5; i++ {
		login := fmt.Sprintf("chaos-%d", i)
		n.must("", "login", "add", login)
		record := n.result(admin, "workspace", "add", "--login", login, "--project", "demo", "--branch", "trunk")
		launch := n.result(admin, "session", "start", login+"/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", echoScript)
		sessions = append(sessions, &chaosSession{login: login, record: record, launch: launch})
	}
	n.waitFor("the five sessions to listen", func() bool {
		listening := 0
		for _, s := range n.status().Sessions {
			if s.Listening {
				listening++
			}
		}
		return listening == 5
	})

	// The person's three ways in.
	jar, _ := cookiejar.New(nil)
	web := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form(t, web, n.srv.URL+"login", n.srv.URL+"login", url.Values{"u": {person}, "p": {n.pw[person]}, "in": {"Login"}})
	// The server's address, read once: it stays the same across Down and
	// Up, which write the server's fields from the test's goroutine.
	base := n.srv.URL
	syncClient := &fossilio.Client{URL: base, Login: person, Password: n.pw[person], ProjectCode: n.srv.ProjectCode}

	var (
		stop   = make(chan struct{})
		posted sync.WaitGroup
		tried  = map[string]int{} // way -> posts tried
		failed = map[string]int{} // way -> posts that said they failed
		triedM sync.Mutex
	)
	posted.Add(1)
	go func() {
		defer posted.Done()
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			s := sessions[k%len(sessions)]
			way := []string{"ocx", "web", "sync"}[(k/len(sessions))%3]
			text := fmt.Sprintf("chaos %d by %s", k, way)
			var err error
			switch way {
			case "ocx":
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				cmd := n.command(ctx, program("ocx"), "post", "--to", s.record, "--text", text)
				cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + n.agents, "LANG=C.UTF-8", "OCX_AGENTS=" + n.agents,
					"OCX_USER=" + person, "OCX_PASSWORD=" + n.pw[person]}
				var out []byte
				if out, err = cmd.CombinedOutput(); err != nil {
					err = fmt.Errorf("%w: %s", err, out)
				}
				cancel()
			case "web":
				err = postForm(web, base+"forume2", base+"forumedit", url.Values{"fpid": {s.record}, "reply": {"1"},
					"mimetype": {"text/x-markdown"}, "content": {text}, "submit": {"Submit"}})
			case "sync":
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err = syncClient.Reply(ctx, s.record, s.record, text)
				cancel()
			}
			triedM.Lock()
			tried[way]++
			if err != nil {
				failed[way]++
			}
			triedM.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()

	// The chaos, in the test's goroutine.
	var stopped int // a daemon stopped with SIGSTOP, continued at the end whatever happens
	defer func() {
		if stopped > 0 {
			syscall.Kill(stopped, syscall.SIGCONT)
		}
	}()
	// restart starts a killed session again: a new launch on its record.
	restart := func(s *chaosSession) {
		a, r := n.answer(admin, "session", "start", s.login+"/demo", "--hears", person, "--kind", "mechanical", "--lifetime", "stays", "--", "/bin/sh", "-c", echoScript)
		if a.Result == nil {
			var naming []string
			for _, l := range strings.Split(psForest(), "\n") {
				if strings.Contains(l, "/"+s.login+"/") {
					naming = append(naming, l)
				}
			}
			t.Logf("a session started again after its kill was refused: %s\nprocesses naming it:\n%s", r, strings.Join(naming, "\n"))
			return
		}
		s.mu.Lock()
		s.launch = *a.Result
		s.mu.Unlock()
	}
	counts := map[string]int{}
	end := time.Now().Add(chaosSeconds(t))
	for time.Now().Before(end) {
		time.Sleep(time.Duration(1000+rng.IntN(3000)) * time.Millisecond)
		switch what := rng.IntN(5); what {
		case 0: // the daemon killed outright; the next hook or tool starts one
			if pid := n.daemonPID(); pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
				counts["daemon killed"]++
			}
		case 1: // the Fossil server down, then up
			n.srv.Down()
			time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
			n.srv.Up()
			counts["server restarted"]++
		case 2: // a session killed outright, then started again
			s := sessions[rng.IntN(len(sessions))]
			if pid, ok := n.serving(s.current()); ok {
				syscall.Kill(pid, syscall.SIGKILL)
				counts["session killed"]++
				time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
				restart(s)
			}
		case 4: // the daemon and a session killed together: the session
			// ends while no daemon runs, and the next daemon records it
			s := sessions[rng.IntN(len(sessions))]
			if pid, ok := n.serving(s.current()); ok {
				if d := n.daemonPID(); d > 0 {
					syscall.Kill(d, syscall.SIGKILL)
				}
				syscall.Kill(pid, syscall.SIGKILL)
				counts["daemon and session killed"]++
				time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
				restart(s)
			}
		case 3: // the daemon stopped, then continued
			if pid := n.daemonPID(); pid > 0 {
				syscall.Kill(pid, syscall.SIGSTOP)
				stopped = pid
				time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
				syscall.Kill(pid, syscall.SIGCONT)
				stopped = 0
				counts["daemon stopped"]++
			}
		}
	}
	close(stop)
	posted.Wait()
	t.Logf("chaos: %v; posts tried %v, of them said failed %v", counts, tried, failed)

	// A daemon again, should the last kill have left none.
	if n.daemonPID() == 0 {
		startDaemon(t, n, program("ocxd"))
	}
	// Every post on the record answered or noted unheard: the record is
	// read until it holds an outcome for each.
	type outcome struct {
		record, text     string
		answers, unheard int
	}
	read := func() map[string]*outcome {
		out := map[string]*outcome{}
		for _, s := range sessions {
			thread := n.thread(s.record)
			for _, p := range thread {
				if p.Sender == person && strings.HasPrefix(p.Text, "chaos ") {
					out[p.Hash] = &outcome{record: s.record, text: p.Text}
				}
			}
			for _, p := range thread {
				if p.Sender != s.login {
					continue
				}
				if o, ok := out[p.InReplyTo]; ok && strings.Contains(p.Text, "echo: "+o.text) {
					o.answers++
				}
				if u, ok := p.Note.(*messages.UnheardNote); ok {
					for _, h := range u.All() {
						if o, ok := out[h]; ok {
							o.unheard++
						}
					}
				}
			}
		}
		return out
	}
	var got map[string]*outcome
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got = read()
		pending := 0
		for _, o := range got {
			if o.answers+o.unheard == 0 {
				pending++
			}
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var bad []string
	answered, unheard := 0, 0
	for h, o := range got {
		switch {
		case o.answers == 1 && o.unheard == 0:
			answered++
		case o.answers == 0 && o.unheard == 1:
			unheard++
		default:
			bad = append(bad, fmt.Sprintf("%s %q in %s: answered %d times, noted unheard %d times", h[:10], o.text, o.record[:10], o.answers, o.unheard))
		}
	}
	sort.Strings(bad)
	t.Logf("%d posts reached the record: %d answered once, %d noted unheard once", len(got), answered, unheard)
	if len(got) < 50 {
		t.Errorf("only %d posts reached the record; the chaos left too little to judge", len(got))
	}
	if len(bad) > 0 {
		// What the node's logs say of each post at fault.
		var said []string
		hookLog, _ := os.ReadFile(filepath.Join(n.agents, "hook.log"))
		logs := map[string][]byte{"ocxd.log": []byte(n.daemonLog()), "hook.log": hookLog}
		for _, s := range sessions {
			b, _, _ := unixhost.Below(n.agents).ReadTail(filepath.Join(n.agents, s.login, "projects", "demo", "session", "log"), 1<<20)
			logs[s.login+" session log"] = b
		}
		for _, b := range bad {
			short := b[:10]
			for name, text := range logs {
				for _, l := range strings.Split(string(text), "\n") {
					if strings.Contains(l, short) {
						said = append(said, name+": "+l)
					}
				}
			}
		}
		sort.Strings(said)
		t.Errorf("%d posts not answered once or noted unheard once:\n%s\nwhat the logs say of them:\n%s", len(bad), strings.Join(bad, "\n"), strings.Join(said, "\n"))
	}

	// One end note per session process, by PID and start time, once the
	// processes the chaos killed are all recorded.
	for _, s := range sessions {
		cur := s.current()
		for _, p := range n.thread(s.record) {
			if l, ok := p.Note.(*messages.LaunchNote); ok && p.Hash != cur && l != nil {
				n.waitFor("an end note of launch "+p.Hash[:10], func() bool { return len(n.endsOf(s.record, p.Hash)) > 0 })
			}
		}
		ends := map[string]int{}
		for _, e := range notesOn[*messages.EndNote](n, s.record) {
			ends[fmt.Sprintf("%d@%d", e.Note.PID, e.Note.StartTime)]++
		}
		for id, c := range ends {
			if c != 1 {
				t.Errorf("session %s: process %s has %d end notes, want 1", s.login, id, c)
			}
		}
	}
	for _, s := range sessions {
		n.ocx(admin, "session", "stop", s.login+"/demo")
	}
	n.waitFor("the sessions to end", func() bool { return !n.anyServing() })
}
