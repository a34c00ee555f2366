package fossilio_test

import (
	"sync"
	"testing"
	"time"

	"github.com/ocx-go/ocx/fossilio"
)

// TestConcurrentFirstReads: many reads at once on a repository just opened,
// each preparing its statements, all finish. With every connection held by
// a reader waiting for another connection to prepare a statement, they
// would all wait for ever (the daemon met this with a burst of posts).
func TestConcurrentFirstReads(t *testing.T) {
	n := newNode(t)
	root, err := n.client("alice").NewThread(n.ctx, "many readers", "hello")
	if err != nil {
		t.Fatal(err)
	}
	// A repository of its own, just opened: none of its statements is
	// prepared yet. It is closed only if the reads finish (Close would wait
	// for them).
	repo, err := fossilio.OpenNode(n.srv.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	const readers = 24
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := repo.Info(n.ctx, root)
			errs <- err
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%d concurrent reads did not finish in a minute: they wait on each other", readers)
	}
	repo.Close()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
