package record

import (
	"log/slog"
	"sync"

	"github.com/ocx-go/ocx/fossilio"
)

// PassedLog logs each artifact a reader passes over, once per process
// however often it is met (issue 22 item 5): a tag change or a post whose
// bytes do not read (fossilio.Options.PassedOver), a tag whose value is no
// verdict (AuditVerdictsOf), an entry the status cannot show. One bad
// artifact costs only itself and one line. It is safe for concurrent use;
// a nil *PassedLog logs nothing.
type PassedLog struct {
	log  *slog.Logger
	sink func(what, why string)
	mu   sync.Mutex
	seen map[string]bool
}

// NewPassedLog logs to log at warn.
func NewPassedLog(log *slog.Logger) *PassedLog {
	return &PassedLog{log: log, seen: map[string]bool{}}
}

// NewPassedSink tells sink, once each, of what is passed over instead of
// logging it: for a reader that answers another process, which logs it
// (the daemon's status, D66).
func NewPassedSink(sink func(what, why string)) *PassedLog {
	return &PassedLog{sink: sink, seen: map[string]bool{}}
}

// Note logs that what (an artifact's hash, or another key that names the
// thing passed over) is passed over and why, unless it was before.
func (l *PassedLog) Note(what, why string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	first := !l.seen[what]
	l.seen[what] = true
	l.mu.Unlock()
	if first && l.sink != nil {
		l.sink(what, why)
	}
	if first && l.log != nil {
		l.log.Warn("passed over what does not read; it costs only itself", slog.String("artifact", what), slog.String("why", why))
	}
}

// Options are repository options whose PassedOver notes here.
func (l *PassedLog) Options() *fossilio.Options {
	if l == nil {
		return nil
	}
	return &fossilio.Options{PassedOver: func(hash string, err error) { l.Note(hash, err.Error()) }}
}
