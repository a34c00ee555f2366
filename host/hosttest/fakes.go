package hosttest

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/messages"
)

var (
	_ host.Clock     = (*Clock)(nil)
	_ host.Spawner   = (*Spawner)(nil)
	_ host.Signaler  = (*Spawner)(nil)
	_ host.Watcher   = (*Spawner)(nil)
	_ host.ProcTable = (*ProcTable)(nil)
	_ host.Locker    = (*Locker)(nil)
	_ host.Pipe      = (*Pipe)(nil)
	_ host.Files     = (*Files)(nil)
)

// Clock is a manual clock: time moves only with Advance, which runs the
// timers that fall due, in order, on the caller's goroutine, so a test
// decides exactly when each fires.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*timer
}

type timer struct {
	at   time.Time
	seq  int
	f    func()
	done bool
}

// NewClock starts a clock at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc calls f when Advance moves the clock d past now.
func (c *Clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.done {
			return false
		}
		t.done = true
		return true
	}
}

// Advance moves the clock by d, firing each timer that falls due at its own
// time, earliest first.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		sort.SliceStable(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		var due *timer
		for _, t := range c.timers {
			if !t.done && !t.at.After(end) {
				due = t
				break
			}
		}
		if due == nil {
			break
		}
		due.done = true
		if due.at.After(c.now) {
			c.now = due.at
		}
		c.mu.Unlock()
		due.f()
		c.mu.Lock()
	}
	c.now = end
	live := c.timers[:0]
	for _, t := range c.timers {
		if !t.done {
			live = append(live, t)
		}
	}
	c.timers = live
	c.mu.Unlock()
}

// Pending counts the timers not yet fired or stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}

// Spawned is one process the fake spawner started.
type Spawned struct {
	ID   messages.ProcID
	Spec host.SpawnSpec
}

// Sent is one signal the fake sent.
type Sent struct {
	ID  messages.ProcID
	Sig host.Signal
}

// Spawner fakes the launcher: Spawner, Signaler and Watcher in one, since a
// process's start, signals and end are one story. Processes end only when
// the test calls End (or a signal handler it set does); exits are delivered
// on the caller's goroutine, never during Spawn.
type Spawner struct {
	mu      sync.Mutex
	next    int
	start   uint64
	spawned []Spawned
	sent    []Sent
	running map[messages.ProcID]func(host.Exit)
	failing error
	// OnSignal, when set, is called (outside the fake's lock) after a signal
	// was recorded: a test makes a process end on TERM by calling End there.
	OnSignal func(id messages.ProcID, sig host.Signal)
	// SignalErr, when set for an identity, is what Signal returns for it.
	SignalErr map[messages.ProcID]error
}

// NewSpawner numbers processes from firstPID, with start times from 1000.
func NewSpawner(firstPID int) *Spawner {
	return &Spawner{next: firstPID, start: 1000, running: map[messages.ProcID]func(host.Exit){}, SignalErr: map[messages.ProcID]error{}}
}

// FailNext makes the next Spawn fail with err.
func (s *Spawner) FailNext(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = err
}

// Spawn records spec and "starts" a process.
func (s *Spawner) Spawn(spec host.SpawnSpec, onExit func(host.Exit)) (messages.ProcID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing != nil {
		err := s.failing
		s.failing = nil
		return messages.ProcID{}, err
	}
	if onExit == nil || spec.Path == "" || len(spec.Args) == 0 {
		return messages.ProcID{}, fmt.Errorf("hosttest: spawn: incomplete spec %+v", spec)
	}
	id := messages.ProcID{PID: s.next, Start: s.start}
	s.next++
	s.start += 10
	s.spawned = append(s.spawned, Spawned{ID: id, Spec: spec})
	s.running[id] = onExit
	return id, nil
}

// Watch follows a process not spawned here; End reports it.
func (s *Spawner) Watch(id messages.ProcID, onExit func(host.Exit)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.running[id]; ok {
		return fmt.Errorf("hosttest: watch %s: already followed", id)
	}
	s.running[id] = onExit
	return nil
}

// End ends a running process with e (its ID is set to id), calling its
// onExit once, on this goroutine.
func (s *Spawner) End(id messages.ProcID, e host.Exit) error {
	s.mu.Lock()
	onExit, ok := s.running[id]
	delete(s.running, id)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("hosttest: end %s: %w", id, host.ErrGone)
	}
	e.ID = id
	onExit(e)
	return nil
}

// Signal records the signal; ErrGone for a process that is not running.
func (s *Spawner) Signal(id messages.ProcID, sig host.Signal) error {
	s.mu.Lock()
	if err, ok := s.SignalErr[id]; ok {
		s.mu.Unlock()
		return err
	}
	_, ok := s.running[id]
	if ok {
		s.sent = append(s.sent, Sent{ID: id, Sig: sig})
	}
	h := s.OnSignal
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("hosttest: signal %s %s: %w", id, sig, host.ErrGone)
	}
	if h != nil {
		h(id, sig)
	}
	return nil
}

// Spawned lists what was spawned, in order.
func (s *Spawner) Spawned() []Spawned {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Spawned(nil), s.spawned...)
}

// Sent lists the signals sent, in order.
func (s *Spawner) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Running lists the processes not yet ended.
func (s *Spawner) Running() []messages.ProcID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]messages.ProcID, 0, len(s.running))
	for id := range s.running {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// ProcTable is a table the test sets.
type ProcTable struct {
	mu    sync.Mutex
	table host.Table
	err   error
}

// Set replaces the table.
func (p *ProcTable) Set(t host.Table) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.table = t
}

// SetErr makes Scan and Naming fail with err (nil to stop).
func (p *ProcTable) SetErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// Scan returns the table.
func (p *ProcTable) Scan() (host.Table, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.table, p.err
}

// Naming answers from the table, as host.Table.Naming does.
func (p *ProcTable) Naming(k messages.WorkspaceKey) (host.Verdict, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return host.Verdict{Key: k}, p.err
	}
	return p.table.Naming(k), nil
}

// Locker holds locks in memory; Holder marks a path held by another process.
type Locker struct {
	mu   sync.Mutex
	held map[string]bool
}

type lock struct {
	l    *Locker
	path string
	once sync.Once
}

// Holder marks path as held (or not) by some other process.
func (l *Locker) Holder(path string, held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[string]bool{}
	}
	l.held[path] = held
}

// Acquire takes the lock, or ErrLocked.
func (l *Locker) Acquire(path string) (host.Lock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[string]bool{}
	}
	if l.held[path] {
		return nil, &fs.PathError{Op: "lock", Path: path, Err: host.ErrLocked}
	}
	l.held[path] = true
	return &lock{l: l, path: path}, nil
}

// Held says whether the lock is held.
func (l *Locker) Held(path string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[path], nil
}

func (k *lock) Release() error {
	k.once.Do(func() {
		k.l.mu.Lock()
		delete(k.l.held, k.path)
		k.l.mu.Unlock()
	})
	return nil
}

// Pipe keeps the lines sent to each path; a path nobody listens to refuses
// them with ErrNoReader, as a named pipe without a reader does.
type Pipe struct {
	mu        sync.Mutex
	listening map[string]bool
	lines     map[string][]string
}

// Listen makes path a pipe with a reader (or without one).
func (p *Pipe) Listen(path string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listening == nil {
		p.listening = map[string]bool{}
	}
	p.listening[path] = on
}

// Send checks the line as the real writer does and keeps it.
func (p *Pipe) Send(path, line string) error {
	if strings.Contains(line, "\n") {
		return &fs.PathError{Op: "write pipe", Path: path, Err: fmt.Errorf("the line holds a newline")}
	}
	if len(line)+1 > host.PipeBuf {
		return &fs.PathError{Op: "write pipe", Path: path, Err: host.ErrLineTooLong}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.listening[path] {
		return &fs.PathError{Op: "open pipe", Path: path, Err: host.ErrNoReader}
	}
	if p.lines == nil {
		p.lines = map[string][]string{}
	}
	p.lines[path] = append(p.lines[path], line)
	return nil
}

// Lines returns the lines sent to path.
func (p *Pipe) Lines(path string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines[path]...)
}

// File is one entry of Files.
type File struct {
	Data []byte
	Perm fs.FileMode
	Dir  bool
	FIFO bool
}

// Files is an agents root in memory. Like unixhost.Root, it refuses a path
// that is not absolute or not below the root, and a write into a directory
// that was not made.
type Files struct {
	Root    string
	mu      sync.Mutex
	entries map[string]File
}

// NewFiles makes an empty root.
func NewFiles(root string) *Files {
	return &Files{Root: filepath.Clean(root), entries: map[string]File{}}
}

func (f *Files) rel(op, p string) (string, error) {
	c := filepath.Clean(p)
	if !filepath.IsAbs(p) || !strings.HasPrefix(c, f.Root+"/") {
		return "", &fs.PathError{Op: op, Path: p, Err: fmt.Errorf("not below the agents root %s", f.Root)}
	}
	return c, nil
}

func (f *Files) parentOK(op, c string) error {
	dir := filepath.Dir(c)
	if dir == f.Root {
		return nil
	}
	if e, ok := f.entries[dir]; !ok || !e.Dir {
		return &fs.PathError{Op: op, Path: c, Err: fs.ErrNotExist}
	}
	return nil
}

// MkdirAll makes p and its missing parents below the root.
func (f *Files) MkdirAll(p string, perm fs.FileMode) error {
	c, err := f.rel("mkdir", p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for d := c; d != f.Root; d = filepath.Dir(d) {
		if e, ok := f.entries[d]; ok && !e.Dir {
			return &fs.PathError{Op: "mkdir", Path: p, Err: fmt.Errorf("%s is not a directory", d)}
		}
	}
	for d := c; d != f.Root; d = filepath.Dir(d) {
		if _, ok := f.entries[d]; !ok {
			f.entries[d] = File{Dir: true, Perm: perm.Perm()}
		}
	}
	return nil
}

// WriteFile replaces the file whole.
func (f *Files) WriteFile(p string, data []byte, perm fs.FileMode) error {
	c, err := f.rel("write", p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.parentOK("write", c); err != nil {
		return err
	}
	if e, ok := f.entries[c]; ok && e.Dir {
		return &fs.PathError{Op: "write", Path: p, Err: fmt.Errorf("is a directory")}
	}
	f.entries[c] = File{Data: bytes.Clone(data), Perm: perm.Perm()}
	return nil
}

// ReadFile reads a file.
func (f *Files) ReadFile(p string) ([]byte, error) {
	c, err := f.rel("open", p)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[c]
	if !ok || e.Dir || e.FIFO {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return bytes.Clone(e.Data), nil
}

// Remove removes a file or an empty directory; a missing one is no error.
func (f *Files) Remove(p string) error {
	c, err := f.rel("remove", p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.entries {
		if strings.HasPrefix(k, c+"/") {
			return &fs.PathError{Op: "remove", Path: p, Err: fmt.Errorf("directory not empty")}
		}
	}
	delete(f.entries, c)
	return nil
}

// RemoveAll removes p and all below it.
func (f *Files) RemoveAll(p string) error {
	c, err := f.rel("remove", p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.entries {
		if k == c || strings.HasPrefix(k, c+"/") {
			delete(f.entries, k)
		}
	}
	return nil
}

// Mkfifo makes a named pipe; one already there is kept.
func (f *Files) Mkfifo(p string, perm fs.FileMode) error {
	c, err := f.rel("mkfifo", p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.parentOK("mkfifo", c); err != nil {
		return err
	}
	if e, ok := f.entries[c]; ok && !e.FIFO {
		return &fs.PathError{Op: "mkfifo", Path: p, Err: fmt.Errorf("something other than a named pipe is there")}
	}
	f.entries[c] = File{FIFO: true, Perm: perm.Perm()}
	return nil
}

// Stat returns an entry.
func (f *Files) Stat(p string) (File, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[filepath.Clean(p)]
	return e, ok
}
