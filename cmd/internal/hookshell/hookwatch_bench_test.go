package hookshell

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ocx-go/ocx/actors/hookwatch"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/itest/harness"
)

// BenchmarkHookWatchLook measures what the hook watch costs the daemon per
// repository and look (D24), with the hook caught up, against what a person
// would run to see the same: `fossil hook status`.
func BenchmarkHookWatchLook(b *testing.B) {
	srv := harness.StartServer(b, harness.Options{})
	ctx := context.Background()
	if err := (&fossilio.Admin{Repository: srv.Repo}).InstallHook(ctx, "true %R"); err != nil {
		b.Fatal(err)
	}
	repo, err := fossilio.OpenNode(srv.Repo, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer repo.Close()
	newest, err := repo.NewestReceipt(ctx)
	if err != nil {
		b.Fatal(err)
	}
	agents := b.TempDir()
	layout, err := host.NewLayout(agents)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(layout.HookMark("demo"), host.HookMarkContent(newest), 0o600); err != nil {
		b.Fatal(err)
	}
	root, err := unixhost.OpenRoot(agents)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	w := &Watch{layout: layout, root: root, projects: map[string]string{"demo": srv.Repo}, fossil: harness.FossilPath,
		repo: func(string) (*fossilio.Repo, error) { return repo, nil },
		log:  slog.New(slog.NewTextHandler(io.Discard, nil))}

	b.Run("watch-look", func(b *testing.B) {
		var r hookwatch.LookResult
		for b.Loop() {
			r, _ = w.look(ctx, "demo")
		}
		if !r.Installed || !r.HasMark || r.Held || r.Mark != r.Newest || r.Newest != newest {
			b.Fatalf("the watch saw a lag where the hook is caught up: %v", r)
		}
	})
	b.Run("fossil-hook-status", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(harness.FossilPath, "hook", "status", "-R", srv.Repo)
			cmd.Env = srv.Env()
			cmd.Dir = filepath.Dir(srv.Repo)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("fossil hook status: %v\n%s", err, out)
			}
		}
	})
}
