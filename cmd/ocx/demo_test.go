package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
)

func TestDemoRunsUntilInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"demo", "--dir", dir}, pw, &stderr)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var out []string
	for lines.Scan() {
		out = append(out, lines.Text())
		if strings.HasPrefix(lines.Text(), "ready") {
			break
		}
	}
	if len(out) == 0 || !strings.HasPrefix(out[len(out)-1], "ready") {
		t.Fatalf("the demo never said ready:\n%s\n%s", strings.Join(out, "\n"), stderr.String())
	}
	text := strings.Join(out, "\n")
	for _, want := range []string{"url:         http://127.0.0.1:", "admin login: admin", "agent login: agent-demo", "(sent by agent-demo)"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	repo := filepath.Join(dir, "demo.fossil")
	r, err := fossilio.OpenNode(repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	hashes, _, err := r.Received(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := r.Classify(ctx, hashes...)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	var posts int
	for _, i := range infos {
		if i.Kind == fossilio.KindPost {
			posts++
			if i.Sender != "agent-demo" {
				t.Errorf("the demo's thread was sent by %q", i.Sender)
			}
		}
	}
	if posts != 1 {
		t.Errorf("%d posts in the demo repository, want 1", posts)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if code := <-done; code != 0 {
		t.Fatalf("demo exited %d: %s", code, stderr.String())
	}
	if out, _ := exec.Command("pgrep", "-f", repo).Output(); len(out) > 0 {
		for _, p := range strings.Fields(string(out)) {
			t.Errorf("process %s naming the demo repository is still alive", p)
			if pid, err := strconv.Atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func TestUsage(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), nil, &out, &out); code != 2 || !strings.Contains(out.String(), "demo") {
		t.Fatalf("no arguments: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"nope"}, &out, &out); code != 2 || !strings.Contains(out.String(), `unknown command "nope"`) {
		t.Fatalf("unknown command: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"demo", "--project", "../x"}, &out, &out); code != 2 {
		t.Fatalf("bad project: %d %q", code, out.String())
	}
}
