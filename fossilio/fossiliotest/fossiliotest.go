// Package fossiliotest has in-memory fakes of fossilio's small interfaces,
// for unit tests of pure logic only: every behaviour is also tested against
// a real fossil server.
package fossiliotest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/ocx-go/ocx/fossilio"
)

// Reader answers Info from artifacts added to it.
type Reader struct {
	mu        sync.Mutex
	artifacts map[string]fossilio.Info
}

var _ fossilio.Reader = (*Reader)(nil)

// Add makes the reader know an artifact.
func (r *Reader) Add(infos ...fossilio.Info) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.artifacts == nil {
		r.artifacts = map[string]fossilio.Info{}
	}
	for _, i := range infos {
		r.artifacts[i.Hash] = i
	}
}

// Info resolves a full hash or unique prefix as a repository would.
func (r *Reader) Info(_ context.Context, h string) (fossilio.Info, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(h) < fossilio.MinPrefix {
		return fossilio.Info{}, &fossilio.HashError{Op: "resolve", Repo: "fake", Hash: h, Err: fossilio.ErrBadHash}
	}
	var matches []string
	for full := range r.artifacts {
		if strings.HasPrefix(full, h) {
			matches = append(matches, full)
		}
	}
	switch len(matches) {
	case 0:
		return fossilio.Info{}, &fossilio.HashError{Op: "resolve", Repo: "fake", Hash: h, Err: fossilio.ErrNotFound}
	case 1:
		return r.artifacts[matches[0]], nil
	}
	return fossilio.Info{}, &fossilio.HashError{Op: "resolve", Repo: "fake", Hash: h, Matches: matches, Err: fossilio.ErrAmbiguous}
}

// Writer records the notes written through it and answers each with a
// hash made from its content and position, so equal notes get distinct
// hashes.
type Writer struct {
	mu    sync.Mutex
	notes []fossilio.Note
	// Err, when not nil, is returned instead of writing.
	Err error
}

var _ fossilio.Writer = (*Writer)(nil)

// WriteNote records the note.
func (w *Writer) WriteNote(_ context.Context, n fossilio.Note) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Err != nil {
		return "", w.Err
	}
	w.notes = append(w.notes, n)
	return fossilio.HashOf([]byte(fmt.Sprintf("%d %v", len(w.notes), n))), nil
}

// Notes returns the notes written so far, in order.
func (w *Writer) Notes() []fossilio.Note {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]fossilio.Note(nil), w.notes...)
}
