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
// reader that takes no lock (`ocx hook status`, a node's status, the hook
// watch) never finds the file empty: the mark is written over in place,
// never emptied first (issue 38). A read may see part of one write (the
// kernel copies a write into the page as a read copies out, unlocked):
// readers use host.ReadHookMark, which tells it by the next read
// (TestReadHookMark), and do once the writes pause.
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
			if len(b) == 0 {
				bad.Store("the mark read empty")
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
	if v, _, ok := host.ReadHookMark(func() ([]byte, error) { return os.ReadFile(p) }); !ok || v != 19999 {
		t.Fatalf("ReadHookMark once the writes pause: %d, %v", v, ok)
	}
}
