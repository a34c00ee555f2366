package session

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// TestTailBufferKeepsTheEnd: whatever is written, in whatever pieces, the
// buffer gives the last max bytes and counts exactly the rest.
func TestTailBufferKeepsTheEnd(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		max := rapid.IntRange(1, 64).Draw(t, "max")
		tb := &tailBuffer{max: max}
		var all []byte
		for _, p := range rapid.SliceOf(rapid.SliceOfN(rapid.Byte(), 0, 200)).Draw(t, "writes") {
			n, err := tb.Write(p)
			if n != len(p) || err != nil {
				t.Fatalf("Write: %d %v", n, err)
			}
			all = append(all, p...)
			if len(tb.buf) > 2*max {
				t.Fatalf("the buffer holds %d bytes, more than twice %d", len(tb.buf), max)
			}
		}
		out := tb.Output()
		keep := min(len(all), max)
		if !bytes.Equal(out.Tail, all[len(all)-keep:]) || out.Dropped != int64(len(all)-keep) {
			t.Fatalf("tail %q dropped %d; wrote %q", out.Tail, out.Dropped, all)
		}
	})
}

func TestWakeQueueKeepsOrder(t *testing.T) {
	q := newWakeQueue()
	for _, l := range []string{"a", "b", "c"} {
		q.push(l)
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("a push does not signal")
	}
	var got []string
	for {
		l, ok := q.pop()
		if !ok {
			break
		}
		got = append(got, l)
	}
	if len(got) != 3 || got[0] != "a" || got[2] != "c" {
		t.Fatalf("popped %v", got)
	}
	var nilQueue *wakeQueue
	if _, ok := nilQueue.pop(); ok {
		t.Fatal("a missing queue gives a line")
	}
}
