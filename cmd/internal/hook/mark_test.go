package hook

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ocx-go/ocx/host"
)

// TestMarkNeverEmpty: while the hook stores its mark again and again, a
// reader that takes no lock (`ocx hook status`, a node's status) reads a
// mark each time, never an empty file: the mark is written over in place,
// never emptied first (issue 38).
func TestMarkNeverEmpty(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hook.mark.demo")
	if err := os.WriteFile(p, host.HookMarkContent(9), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := &mark{f: f, ok: true, value: 9}
	var stop atomic.Bool
	var bad atomic.Value
	var reads atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			b, err := os.ReadFile(p)
			if err != nil {
				bad.Store("read: " + err.Error())
				return
			}
			reads.Add(1)
			if _, ok := host.ParseHookMark(b); !ok {
				bad.Store("a mark read as " + string(b) + "|")
				return
			}
		}
	}()
	for v := int64(10); v < 20000 && bad.Load() == nil; v++ {
		if err := m.store(v); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if b := bad.Load(); b != nil {
		t.Fatalf("%s (after %d reads)", b, reads.Load())
	}
	if b, _ := os.ReadFile(p); string(b) != "19999\n" {
		t.Fatalf("the mark is %q, want 19999", b)
	}
}
