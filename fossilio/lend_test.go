package fossilio_test

import (
	"testing"

	"github.com/ocx-go/ocx/fossilio"
)

// TestLendOutlivesItsClose: a Lend's Close leaves its owner open and
// reading; the owner's Close ends both.
func TestLendOutlivesItsClose(t *testing.T) {
	r, err := fossilio.OpenNode(newRepoFile(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := r.ProjectCode(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l := r.Lend()
		if got, err := l.ProjectCode(t.Context()); err != nil || got != want {
			t.Fatalf("a lend reads %q, %v; want %q", got, err, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := r.ProjectCode(t.Context()); err != nil || got != want {
		t.Fatalf("after its lends closed, the owner reads %q, %v", got, err)
	}
	l := r.Lend()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Received(t.Context(), 0); err == nil {
		t.Fatal("a lend still reads after its owner closed")
	}
}
