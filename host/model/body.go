package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/ocx-go/ocx/messages/modelapi"
)

// prefixLen is how much of a request's body the proxy reads before it
// forwards any of it (D80): a request naming its model in these bytes
// (every CLI names it first) is refused or let go before the API hears of
// it, and one this short is checked whole before. A body whose model comes
// later is forwarded as it is read and checked on the way.
const prefixLen = 64 << 10

// bodyWait bounds how long a request's body may take to arrive: a body
// sent a byte at a time holds a connection no longer.
const bodyWait = 2 * time.Minute

// refusal is a request the proxy refuses: the status it answers and why;
// with a shape, in that API's own error shape (writeAPIError), else the
// proxy's (writeError).
type refusal struct {
	status int
	why    string
	shape  modelapi.APIShape
}

func (r *refusal) Error() string { return r.why }

// checkedBody is a request's body as the proxy forwards it (D80): read as
// it comes, every byte through the scanner (modelapi.ObjectScanner) that
// finds the body's top-level "model" wherever it comes and checks the
// whole is one JSON object, and passed on as it is read, but for its last
// byte, which goes only once the whole has been read and names the
// session's model (Accepts). A body refused, on the way or at its end,
// ends its read with the refusal, so the API never has it whole: its
// request is cut off, and nothing a server reads as a request arrives.
// Memory is bounded whatever the body's size: the scanner keeps the model
// alone, and the bytes read wait only until the API's connection takes
// them.
//
// Behind the session's meter (D79), the scanner is its grant's
// modelapi.OutputCap's too: the body's output bound is read, and capped
// to the grant, as the body passes, a bound that does not read refuses
// the body on the way, and the body read whole goes only once the meter
// keeps what it asks (meter).
type checkedBody struct {
	src  io.Reader
	scan *modelapi.ObjectScanner
	api  API
	only string
	// lift is called once the body is read whole (the read deadline
	// lifted: the reply that follows may take long).
	lift func()
	// cap and meter: the meter's, or nil.
	cap   *modelapi.OutputCap
	meter bodyMeter

	out     []byte // bytes checked, to pass on (in base)
	base    []byte
	passed  []byte // what a read passes on, before it is checked
	held    byte   // the last byte to pass, passed on with the verdict
	holding bool
	err     error // io.EOF once the whole passed, else a *refusal
	rd      [32 << 10]byte
}

// bodyMeter is the session's meter for one request (the meter's ticket):
// the cap its body passes through, and what it says once the body is
// read whole (a refusal, or nil when it goes).
type bodyMeter interface {
	outputCap() *modelapi.OutputCap
	bounded(b modelapi.OutputBound) *refusal
}

// newCheckedBody reads src (at most MaxBodyLen) for a session whose
// definition names only; m, when not nil, meters it.
func newCheckedBody(src io.Reader, api API, only string, lift func(), m bodyMeter) *checkedBody {
	if lift == nil {
		lift = func() {}
	}
	b := &checkedBody{src: src, api: api, only: only, lift: lift, meter: m}
	if m != nil {
		b.cap = m.outputCap()
		b.scan = b.cap.Scanner("model")
	} else {
		b.scan = modelapi.NewObjectScanner("model")
	}
	// What passes of a read: the read, less what is held, and at most
	// a held value's edit and the bound added.
	b.passed = make([]byte, 0, len(b.rd)+modelapi.MaxScanValueLen+64)
	b.base = make([]byte, 0, prefixLen+cap(b.passed)+1)
	b.out = b.base
	return b
}

// start reads the body's first prefixLen bytes, or the whole body when it
// is shorter. It returns the refusal they already say, nil when the
// request may go on.
func (b *checkedBody) start() *refusal {
	for len(b.out) < prefixLen && b.err == nil {
		b.fill()
	}
	var r *refusal
	errors.As(b.err, &r)
	return r
}

// Read passes on what is checked; the last byte comes with the verdict.
func (b *checkedBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.out = b.base[:0]
		b.fill()
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// Close leaves the client's body to the server, which closes it after
// the handler: a body refused on the way is read to its end first
// (drain), so that the client reads the refusal.
func (b *checkedBody) Close() error { return nil }

// drain reads what is left of a body refused, to nothing, so that the
// client, still sending, then reads the refusal (bounded: MaxBodyLen,
// bodyWait).
func (b *checkedBody) drain() {
	io.Copy(io.Discard, b.src)
	b.lift()
}

// fill reads the next bytes from the client and checks them.
func (b *checkedBody) fill() {
	n, err := b.src.Read(b.rd[:])
	if n > 0 {
		b.passed, _ = b.scan.Pass(b.passed[:0], b.rd[:n])
		if r := b.verdict(false); r != nil {
			b.err = r
			return
		}
		if k := len(b.passed); k > 0 {
			if b.holding {
				b.out = append(b.out, b.held)
			}
			b.out = append(b.out, b.passed[:k-1]...)
			b.held, b.holding = b.passed[k-1], true
		}
	}
	switch {
	case err == io.EOF:
		b.lift()
		if r := b.verdict(true); r != nil {
			b.err = r
			return
		}
		if b.holding {
			b.out = append(b.out, b.held)
			b.holding = false
		}
		b.err = io.EOF
	case err != nil:
		b.err = readRefusal(err)
	}
}

// readRefusal is a body that does not read: past MaxBodyLen, too slow, cut
// off.
func readRefusal(err error) *refusal {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return tooLarge()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &refusal{status: http.StatusRequestTimeout, why: fmt.Sprintf("the request is refused: its body did not arrive within %v", bodyWait)}
	}
	return &refusal{status: http.StatusBadRequest, why: fmt.Sprintf("the request is refused: its body does not read: %v", err)}
}

// tooLarge is a body past the API's own bound.
func tooLarge() *refusal {
	return &refusal{status: http.StatusRequestEntityTooLarge, why: fmt.Sprintf("the request is refused: its body is over %d MiB, the most the model's API takes", MaxBodyLen>>20)}
}

// verdict is what the body read so far says: a refusal, or nil while it
// may go on; whole says the body is read to its end.
func (b *checkedBody) verdict(whole bool) *refusal {
	bad := func(why string) *refusal {
		return &refusal{status: http.StatusBadRequest, why: fmt.Sprintf("the request is refused: %s; this session's definition names the model %q, which the request must name", why, b.only)}
	}
	if whole {
		b.scan.Close()
	}
	if b.cap != nil {
		if err := b.cap.Err(); err != nil {
			return &refusal{status: http.StatusBadRequest, why: fmt.Sprintf("the request is refused: %v", err), shape: b.cap.Shape()}
		}
	}
	if err := b.scan.Err(); err != nil {
		return bad(fmt.Sprintf("its body is not a JSON object (%v)", err))
	}
	v := b.scan.Value("model")
	switch {
	case v.Seen > 1:
		return bad(`its body names "model" twice`)
	case v.Long:
		return bad(fmt.Sprintf(`its "model" is longer than %d bytes`, modelapi.MaxScanValueLen))
	case v.Raw != nil:
		var got string
		if json.Unmarshal(v.Raw, &got) != nil {
			return bad(`its "model" is not a string`)
		}
		if !Accepts(b.api, b.only, got) {
			return &refusal{status: http.StatusForbidden, why: fmt.Sprintf("the request names the model %q; this session's definition names %q, the only model its proxy serves", got, b.only)}
		}
	case whole:
		return bad("it names no model")
	}
	if whole && b.meter != nil {
		return b.meter.bounded(b.cap.Bound())
	}
	return nil
}
