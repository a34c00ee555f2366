package fossiliotest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/fossilio/fossiliotest"
)

func TestReader(t *testing.T) {
	var r fossiliotest.Reader
	a := strings.Repeat("a", 64)
	b := strings.Repeat("a", 20) + strings.Repeat("b", 44)
	r.Add(fossilio.Info{Hash: a, Kind: fossilio.KindPost, Sender: "alice"}, fossilio.Info{Hash: b, Kind: fossilio.KindCheckin})
	ctx := context.Background()
	if got, err := r.Info(ctx, a); err != nil || got.Sender != "alice" {
		t.Fatalf("full hash: %+v %v", got, err)
	}
	if got, err := r.Info(ctx, b[:21]); err != nil || got.Kind != fossilio.KindCheckin {
		t.Fatalf("unique prefix: %+v %v", got, err)
	}
	if _, err := r.Info(ctx, a[:12]); !errors.Is(err, fossilio.ErrAmbiguous) {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	if _, err := r.Info(ctx, strings.Repeat("c", 12)); !errors.Is(err, fossilio.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := r.Info(ctx, "abc"); !errors.Is(err, fossilio.ErrBadHash) {
		t.Fatalf("short: %v", err)
	}
}

func TestWriter(t *testing.T) {
	var w fossiliotest.Writer
	ctx := context.Background()
	n := fossilio.Note{Login: "ocx", Thread: strings.Repeat("a", 64), ReplyTo: strings.Repeat("a", 64), Text: "x"}
	h1, err1 := w.WriteNote(ctx, n)
	h2, err2 := w.WriteNote(ctx, n)
	if err1 != nil || err2 != nil || h1 == h2 || !fossilio.IsHash(h1) {
		t.Fatalf("hashes %q %q, errors %v %v", h1, h2, err1, err2)
	}
	if got := w.Notes(); len(got) != 2 || got[0] != n {
		t.Fatalf("notes %v", got)
	}
	w.Err = errors.New("refused")
	if _, err := w.WriteNote(ctx, n); err == nil || len(w.Notes()) != 2 {
		t.Fatalf("scripted failure: %v, %d notes", err, len(w.Notes()))
	}
}
