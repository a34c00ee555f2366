package runhold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/keptlog"
	"golang.org/x/sys/unix"
)

// newPipeRun is a run whose command is on pipes (process.terminal false).
func newPipeRun(t *testing.T, argv ...string) run {
	r := newRun(t, argv...)
	r.opts.Terminal = false
	return r
}

// Seed 004 §8.1 without a terminal: STDIN the first line, then closed for
// a run that does not feed; STDOUT and STDERR pipes whose ends are kept;
// the holder exits as the command did. No terminal to join, no line to type.
func TestHolderRunsTheCommandOnPipes(t *testing.T) {
	r := newPipeRun(t, "/bin/sh", "-c", `test -t 0 || test -t 1 || echo pipes:yes
read l; echo got:$l; if read m; then echo more:$m; else echo eof; fi; echo err >&2; exit 3`)
	r.opts.FirstLine = `{"run":"f00d","objective":"say hi"}`
	p := r.start(t)
	if code := exitOf(t, p.Pid); code != 3 {
		t.Fatalf("holder exited %d, want the command's 3", code)
	}
	want := "pipes:yes\ngot:{\"run\":\"f00d\",\"objective\":\"say hi\"}\neof\n"
	if got := readFile(t, r.opts.StdoutLog); got != want {
		t.Errorf("stdout.log %q, want %q", got, want)
	}
	if got := readFile(t, r.opts.StderrLog); got != "err\n" {
		t.Errorf("stderr.log %q", got)
	}
	if st, err := ReadStatus(r.opts.Status); err != nil || st != (Status{Exit: 3, StdoutBytes: int64(len(want)), StderrBytes: 4}) {
		t.Errorf("status %+v, %v", st, err)
	}
	if _, err := os.Stat(r.opts.Socket); err == nil {
		t.Error("the socket is still there")
	}
}

// A run that does not feed refuses lines, naming why; a terminal to join
// is refused too, and the run goes on.
func TestHolderOnPipesRefusesLinesAndAttach(t *testing.T) {
	r := newPipeRun(t, "/bin/sh", "-c", `read l; echo never:$l; exec sleep 600`)
	p := r.start(t)
	i, err := Query(r.opts.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killReap(i.PID) })
	err = Type(r.opts.Socket, `{"post":"abc"}`)
	if err == nil || !strings.Contains(err.Error(), "input is closed") {
		t.Errorf("a line typed into a run that does not feed: %v", err)
	}
	ans, err := request(r.opts.Socket, "attach")
	if err != nil || !strings.Contains(ans, "has no terminal") {
		t.Errorf("attach answered %q, %v", ans, err)
	}
	if !alive(p.Pid) || !alive(i.PID) {
		t.Fatal("the run ended")
	}
	killReap(p.Pid)
}

// A session that feeds (--feed): its input stays open, and each line typed
// reaches it whole, in order, after the first.
func TestHolderFeedsLinesOnPipes(t *testing.T) {
	r := newPipeRun(t, "/bin/sh", "-c", `while read l; do echo "[$l]"; [ "$l" = end ] && exit 0; done; echo eof`)
	r.opts.Feed, r.opts.KeepStdout = true, 1<<20
	r.opts.FirstLine = `{"run":"f00d","objective":"o"}`
	p := r.start(t)
	long := strings.Repeat("x", 70<<10) // past a pipe's buffer and a terminal's line
	for _, l := range []string{`{"post":"a"}`, long, "end"} {
		if err := Type(r.opts.Socket, l); err != nil {
			t.Fatalf("type %.20q: %v", l, err)
		}
	}
	if code := exitOf(t, p.Pid); code != 0 {
		t.Fatalf("holder exited %d", code)
	}
	want := "[{\"run\":\"f00d\",\"objective\":\"o\"}]\n[{\"post\":\"a\"}]\n[" + long + "]\n[end]\n"
	if got := readFile(t, r.opts.StdoutLog); got != want {
		t.Errorf("stdout.log holds %d bytes, want %d (%.60q...)", len(got), len(want), got)
	}
}

// The holder killed outright hangs its run up on pipes as a terminal's
// closed master would: nothing of the run goes on unseen.
func TestAKilledHolderHangsUpItsRunOnPipes(t *testing.T) {
	r := newPipeRun(t, "/bin/sh", "-c", `trap 'echo hup > "$0.hup"; exit 9' HUP; : > "$0.ready"; while :; do sleep 0.05; done`, "")
	r.opts.Argv[3] = filepath.Join(r.dir, "cmd")
	p := r.start(t)
	i, err := Query(r.opts.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killReap(i.PID) })
	// Its trap is set once it says so: a HUP before would end it 129.
	eventually(t, "the command's trap set", func() bool {
		_, err := os.Stat(filepath.Join(r.dir, "cmd.ready"))
		return err == nil
	})
	killReap(p.Pid)
	if code := exitOf(t, i.PID); code != 9 {
		t.Errorf("the command exited %d, not its HUP trap's 9", code)
	}
	if got := readFile(t, filepath.Join(r.dir, "cmd.hup")); got != "hup\n" {
		t.Errorf("the trap wrote %q", got)
	}
}

// A spec file (the daemon's): the run's own environment exactly, its
// directory, and a sandbox with limits on a terminal, in place before the
// command's first instruction (seed 004 §7; row 8 no longer refuses
// limits on a terminal).
func TestHolderStartsASpecWithSandboxAndLimits(t *testing.T) {
	if _, err := os.Stat("/usr/bin/bwrap"); err != nil {
		t.Fatal("bwrap is not installed: make deps installs it")
	}
	r := newRun(t)
	r.opts.Spec = filepath.Join(r.dir, "spec.json")
	sb := host.RunSandbox{UID: 1000, GID: 1000, ReadOnly: []string{"/usr", "/bin", "/lib", "/lib64"},
		Proc: "/proc", Dev: "/dev", Tmp: "/tmp", Files: []host.RunFile{{At: "/etc/greeting", Text: "hello from the spec\n"}}}
	spec := Spec{Command: []string{"sh", "-c", `test -t 0 && echo tty:yes; echo env:$(env | sort | tr '\n' ' '); pwd; cat /etc/greeting; id -u; grep -E "^Max (cpu time|processes)" /proc/self/limits`},
		Env: []string{"PATH=/usr/bin:/bin", "ONLY=this"}, Dir: "/usr", Sandbox: &sb, Limits: host.RunLimits{CPU: 7}}
	if os.Geteuid() != 0 {
		spec.Limits.Processes = 50
	}
	if err := WriteSpec(r.opts.Spec, spec); err != nil {
		t.Fatal(err)
	}
	p := r.start(t)
	if code := exitOf(t, p.Pid); code != 0 {
		t.Fatalf("holder exited %d: %s / %s", code, readFile(t, r.opts.Status), readLog(r.opts.StderrLog))
	}
	out := strings.ReplaceAll(readFile(t, r.opts.StdoutLog), "\r\n", "\n")
	for _, want := range []string{"tty:yes\n", "env:ONLY=this PATH=/usr/bin:/bin PWD=/usr\n", "/usr\n",
		"hello from the spec\n", "1000\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the command printed %q, without %q", out, want)
		}
	}
	cpu := false
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(strings.TrimPrefix(l, "Max cpu time")); strings.HasPrefix(l, "Max cpu time") && len(f) >= 2 {
			cpu = f[0] == "7" && f[1] == "8"
		}
	}
	if !cpu {
		t.Errorf("limits.cpu not in place: %q", out)
	}
}

func readLog(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// A spec file is read strictly, naming what is wrong.
func TestDecodeSpec(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{`{"command":["x"],"dir":"/","env":[],"limits":{}}`, ""},
		{`{"command":[],"dir":"/"}`, "no command"},
		{`{"command":["x"],"dir":"rel"}`, `dir "rel" is not an absolute path`},
		{`{"command":["x"],"dir":"/","shell":true}`, `unknown field "shell"`},
		{`{"command":["x"],"dir":"/"} {}`, "text after the object"},
		{`{"command":["x"],"dir":"/"} x`, "text after the object"},
		{`{"command":["x"],"dir":"/","keep":{"mask":["pw"],"match":"^E"}}`, ""},
		{`{"command":["x"],"dir":"/","keep":{"match":"(E"}}`, "keep: keptlog: match"},
		{`{"command":["x"],"dir":"/","keep":{"mask":["a\nb"]}}`, "keep: keptlog: mask 0 holds a newline"},
		{`{"command":["x"],"dir":"/","keep":{"grep":"x"}}`, `unknown field "grep"`},
	} {
		_, err := decodeSpec([]byte(c.in))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want %q", c.in, err, c.err)
		}
	}
}

func FuzzDecodeSpec(f *testing.F) {
	f.Add([]byte(`{"command":["sh","-c","x"],"env":["A=b"],"dir":"/w","sandbox":{"UID":1},"limits":{"CPU":3}}`))
	f.Add([]byte(`{"command":["x"],"dir":"/","keep":{"mask":["pw","p*w"],"match":"^E"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSpec(b)
		if err != nil {
			return
		}
		if len(s.Command) == 0 || s.Command[0] == "" || !filepath.IsAbs(s.Dir) {
			t.Fatalf("accepted %+v", s)
		}
		if s.Keep != nil {
			if _, err := s.Keep.Filter(); err != nil {
				t.Fatalf("accepted a keep that makes no filter: %v", err)
			}
		}
	})
}

// A command that never reads its input, given first lines longer than a
// pipe holds: the holder still passes a TERM on and sees it exit, and a
// line typed meanwhile is answered once the holder ends.
func TestHolderSignalledWhileTheFirstLinesWait(t *testing.T) {
	r := newPipeRun(t)
	r.opts.Spec = filepath.Join(r.dir, "spec.json")
	long := strings.Repeat("y", 200<<10)
	ready := filepath.Join(r.dir, "ready")
	if err := WriteSpec(r.opts.Spec, Spec{Command: []string{"/bin/sh", "-c", `trap 'exit 5' TERM; : > "$0"; while :; do sleep 0.05; done`, ready},
		Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Input: []string{long, "after"}}); err != nil {
		t.Fatal(err)
	}
	p := r.start(t)
	i, err := Query(r.opts.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killReap(i.PID) })
	// Its trap is set once it says so: a TERM before would end it 143.
	eventually(t, "the command's trap set", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	typed := make(chan error, 1)
	go func() { typed <- Type(r.opts.Socket, "a delivery") }()
	if err := unix.Kill(p.Pid, unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, p.Pid); code != 5 {
		t.Fatalf("holder exited %d, want the command's 5", code)
	}
	if err := <-typed; err == nil {
		t.Error("a line typed into a command that ended was answered ok")
	}
}

// The kept logs' filter (D98) in the holder: the spec's masks are masked
// and only the lines its match matches kept, on both streams, before the
// tail is cut, so a secret the raw tail would cut in two leaves no part
// of itself; the status counts what passed.
func TestHolderFiltersTheKeptLogs(t *testing.T) {
	r := newPipeRun(t)
	r.opts.Spec = filepath.Join(r.dir, "spec.json")
	r.opts.KeepStdout, r.opts.KeepStderr = 32, 1<<10
	const secret = "S3CR3T-hunter2-S3CR3T"
	// STDOUT's raw end, 32 bytes, would begin inside the secret.
	script := `echo "ERROR: the password is ` + secret + `"; echo "fine"; echo "ERROR: tok-abc ` + secret + `" >&2; echo "ok" >&2; printf "ERROR: ` + secret + `-end"`
	spec := Spec{Command: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/",
		Keep: &keptlog.Spec{Mask: []string{secret, "hunter2", "tok-abc"}, Match: "^ERROR"}}
	if err := WriteSpec(r.opts.Spec, spec); err != nil {
		t.Fatal(err)
	}
	p := r.start(t)
	if code := exitOf(t, p.Pid); code != 0 {
		t.Fatalf("holder exited %d: %s", code, readLog(r.opts.Status))
	}
	wantErr := "ERROR: *** ***\n"
	if got := readFile(t, r.opts.StderrLog); got != wantErr {
		t.Errorf("stderr.log %q, want %q", got, wantErr)
	}
	passed := "ERROR: the password is ***\nERROR: ***-end\n"
	wantOut := passed[len(passed)-32:]
	if got := readFile(t, r.opts.StdoutLog); got != wantOut {
		t.Errorf("stdout.log %q, want %q", got, wantOut)
	}
	if st, err := ReadStatus(r.opts.Status); err != nil || st.StdoutBytes != int64(len(passed)) || st.StderrBytes != int64(len(wantErr)) {
		t.Errorf("status %+v, %v", st, err)
	}
	for _, f := range []string{r.opts.StdoutLog, r.opts.StderrLog} {
		b := readFile(t, f)
		for _, part := range []string{"S3C", "3T", "hunt", "tok-"} {
			if strings.Contains(b, part) {
				t.Errorf("%s holds %q: %q", f, part, b)
			}
		}
	}
}
