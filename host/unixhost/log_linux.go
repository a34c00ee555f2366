package unixhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// logFormat is how a log's records are written, which its drop notice
// (LogFile) follows: slog's text records or its JSON ones.
type logFormat int

const (
	// LogText is slog's TextHandler: hook.log, a command's standard error.
	LogText logFormat = iota
	// LogJSON is slog's JSONHandler: ocxd.log.
	LogJSON
)

// logLockWait bounds the wait for a log's flock: a writer holds it for one
// write(2) and, on a full disk, one ftruncate(2), so a longer hold is a
// writer stuck or stopped mid-record; past the bound the record is
// dropped, and counted, and the writes after it try the lock once each,
// without waiting, until one takes it (so a logger never waits longer
// than this per episode, whoever queues behind it).
const logLockWait = 50 * time.Millisecond

// droppedXattr is the extended attribute of a log that counts the records
// its writers dropped and no record has said yet: any writer of the log
// (another process, the next image after a re-exec, a hook run that ended
// before the disk had room again) adds its drops there under the log's
// flock, and the next writer that writes a record whole says them. An
// attribute this small lives in the inode on ext4 and in memory on tmpfs,
// so it is written on a disk with no block left.
const droppedXattr = "user.ocx.dropped"

// maxDroppedXattr bounds what is read of the attribute.
const maxDroppedXattr = 256

// LogFile is a log the node writes records to, each record one Write
// (slog's handlers write each record in one call): each goes to the file
// in one write(2) appended whole, or not at all. A write that fails part
// way (ENOSPC, EDQUOT mid-record) is undone, the file cut back to where
// the record began, so that no torn record stays; the record is counted
// as dropped, and the next record written whole is preceded, in the same
// write(2), by one record (the log's format, level WARN, msg "log records
// dropped") saying how many were dropped, since when and why.
//
// Writers of one log in several processes (hook.log: the daemon and the
// hook's own runs; ocxd.log across re-execs) append under an exclusive
// flock on the log, so that an undo never cuts another's record, and keep
// the count of drops in the log's extended attribute user.ocx.dropped,
// so that whichever writes next says them. A writer that cannot take the
// flock within logLockWait (a writer stopped mid-record) drops the record;
// where the attribute cannot be written, the writer keeps the count itself.
//
// A descriptor that is not a regular file (a terminal, a pipe: logOn's
// standard error) is written as it is, unframed.
type LogFile struct {
	f      *os.File
	fd     int
	path   string
	format logFormat
	// framed: a regular file, flocked, undone; shared: the drop count
	// goes in the attribute too (files out of any agent's reach).
	framed, shared bool

	mu sync.Mutex
	// own is the count this writer keeps itself: drops it could not put
	// in the attribute.
	own logDrops
	// stuck: the last wait for the flock ran out; until the flock is
	// taken again, each write tries it once.
	stuck bool
	// write is write(2); a test makes it fail part way.
	write func(fd int, p []byte) (int, error)
	now   func() time.Time
}

// logDrops is a count of dropped records: how many, since when (the
// first), and why (the first one's error).
type logDrops struct {
	N     int64
	Since time.Time
	Why   string
}

func (d logDrops) add(o logDrops) logDrops {
	switch {
	case o.N == 0:
		return d
	case d.N == 0:
		return o
	}
	if o.Since.Before(d.Since) {
		d.Since, d.Why = o.Since, o.Why
	}
	d.N += o.N
	return d
}

// OpenLog opens the log at p for appending, created 0600, not through a
// link at its last name: a log of the node's own (ocxd.log, hook.log, the
// MCP servers' and the run holders' logs), never one in an agent's reach.
// Its records are written as format says.
func OpenLog(p string, format logFormat) (*LogFile, error) {
	fd, err := openLogNoFollow(p)
	if err != nil {
		return nil, pathErr("open log", p, err)
	}
	return newLogFile(os.NewFile(uintptr(fd), p), p, format, true), nil
}

// logOn is the log f already is, written as format says: a process's
// standard error that its parent pointed at a log (a session's log, an
// MCP server's). It is framed as OpenLog's are when f is a regular file,
// but keeps its count of drops itself: the file may be in an agent's
// reach, whose attribute the node does not believe.
func logOn(f *os.File, format logFormat) *LogFile {
	return newLogFile(f, f.Name(), format, false)
}

func newLogFile(f *os.File, p string, format logFormat, shared bool) *LogFile {
	l := &LogFile{f: f, fd: int(f.Fd()), path: p, format: format, write: unix.Write, now: time.Now}
	var st unix.Stat_t
	if unix.Fstat(l.fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		fl, err := unix.FcntlInt(uintptr(l.fd), unix.F_GETFL, 0)
		l.framed = err == nil && fl&unix.O_APPEND != 0
	}
	l.shared = shared && l.framed
	return l
}

// File is the log's file, to hand to a child as its standard output and
// error: what the child writes there is its own, not framed.
func (l *LogFile) File() *os.File { return l.f }

// Name is the log's path.
func (l *LogFile) Name() string { return l.path }

// Handler is an slog handler writing the log's records in its format.
func (l *LogFile) Handler(opts *slog.HandlerOptions) slog.Handler {
	if l.format == LogJSON {
		return slog.NewJSONHandler(l, opts)
	}
	return slog.NewTextHandler(l, opts)
}

// Close closes the log. Drops this writer still counts itself are said in
// one last record, or put in the log's attribute, when either can be
// written; else they are lost with it.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.own.N > 0 && l.framed && flockWait(context.Background(), l.fd, unix.LOCK_EX, 0) == nil {
		if l.appendLocked(nil) != nil && l.shared {
			l.handOver()
		}
		flock(l.fd, unix.LOCK_UN)
	}
	return l.f.Close()
}

// Write writes p as one record (a newline added when it has none): whole,
// or not at all and counted. It returns len(p) once written, and 0 with
// why when the record was dropped.
func (l *LogFile) Write(p []byte) (int, error) {
	rec := p
	if len(rec) == 0 || rec[len(rec)-1] != '\n' {
		rec = append(append(make([]byte, 0, len(p)+1), p...), '\n')
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.framed {
		return l.writeRaw(p, rec)
	}
	wait := logLockWait
	if l.stuck {
		wait = 0
	}
	if err := flockWait(context.Background(), l.fd, unix.LOCK_EX, wait); err != nil {
		l.stuck = true
		err = fmt.Errorf("its lock: %w", err)
		l.own = l.own.add(logDrops{N: 1, Since: l.now(), Why: err.Error()})
		return 0, &fs.PathError{Op: "log", Path: l.path, Err: err}
	}
	l.stuck = false
	defer flock(l.fd, unix.LOCK_UN)
	if err := l.appendLocked(rec); err != nil {
		return 0, &fs.PathError{Op: "log", Path: l.path, Err: err}
	}
	return len(p), nil
}

// writeRaw writes a record to a descriptor that is not a regular file: as
// it is, after the notice of what was dropped, counting a failure.
func (l *LogFile) writeRaw(p, rec []byte) (int, error) {
	buf := rec
	if l.own.N > 0 {
		buf = append(logNotice(l.format, l.own, l.now(), l.path), rec...)
	}
	n, err := l.writeOnce(buf)
	if err == nil && n < len(buf) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(buf))
	}
	if err != nil {
		l.own = l.own.add(logDrops{N: 1, Since: l.now(), Why: err.Error()})
		return 0, &fs.PathError{Op: "log", Path: l.path, Err: err}
	}
	l.own = logDrops{}
	return len(p), nil
}

// appendLocked appends rec (nil: only the notice of what was dropped),
// under the flock, preceded by the notice when records were dropped; a
// write that fails part way is cut back. A record that is not written is
// counted: in the attribute when the log is shared and it can be written,
// else by this writer.
func (l *LogFile) appendLocked(rec []byte) error {
	pending := l.own
	var inAttr logDrops
	present := false
	if l.shared {
		inAttr, present = l.readAttr()
		pending = pending.add(inAttr)
	}
	buf := rec
	if pending.N > 0 {
		buf = append(logNotice(l.format, pending, l.now(), l.path), rec...)
	}
	if len(buf) == 0 {
		return nil
	}
	n, err := l.writeAll(buf)
	if err == nil {
		l.own = logDrops{}
		if present {
			l.removeAttr()
		}
		return nil
	}
	if n > 0 {
		if terr := l.undo(n); terr != nil {
			err = fmt.Errorf("%w; and cutting it back: %w", err, terr)
		}
	}
	if rec == nil {
		return err
	}
	d := logDrops{N: 1, Since: l.now(), Why: err.Error()}
	if l.shared && l.writeAttr(inAttr.add(l.own).add(d)) {
		l.own = logDrops{}
	} else {
		l.own = l.own.add(d)
	}
	return err
}

// writeAll writes p: in one write(2), unless that one stops short (the
// disk filled mid-record), when the rest is written on, so that the record
// ends whole if room came back meanwhile and otherwise the write's error
// says why (ENOSPC, EDQUOT). n is what was written.
func (l *LogFile) writeAll(p []byte) (n int, err error) {
	for n < len(p) {
		m, err := l.writeOnce(p[n:])
		n += m
		if err != nil {
			return n, fmt.Errorf("%d of %d bytes written: %w", n, len(p), err)
		}
		if m == 0 {
			return n, fmt.Errorf("%d of %d bytes written: %w", n, len(p), io.ErrShortWrite)
		}
	}
	return n, nil
}

// writeOnce is one write(2) of p, EINTR retried while nothing was
// written.
func (l *LogFile) writeOnce(p []byte) (int, error) {
	for {
		n, err := l.write(l.fd, p)
		if err == unix.EINTR {
			continue
		}
		return max(n, 0), err
	}
}

// undo cuts the file back by the n bytes the last write appended: the
// file offset is where an O_APPEND write ended, and no other framed writer
// wrote since (the flock).
func (l *LogFile) undo(n int) error {
	end, err := unix.Seek(l.fd, 0, 1)
	if err != nil {
		return err
	}
	for {
		err = unix.Ftruncate(l.fd, end-int64(n))
		if err != unix.EINTR {
			return err
		}
	}
}

// handOver puts the drops this writer counts into the attribute; false
// when it cannot.
func (l *LogFile) handOver() bool {
	in, _ := l.readAttr()
	if !l.writeAttr(in.add(l.own)) {
		return false
	}
	l.own = logDrops{}
	return true
}

// readAttr reads the count in the log's attribute; present says the
// attribute is there, even when it holds no count (which is then
// overwritten or removed).
func (l *LogFile) readAttr() (d logDrops, present bool) {
	var buf [maxDroppedXattr + 1]byte
	n, err := unix.Fgetxattr(l.fd, droppedXattr, buf[:])
	if err != nil {
		return logDrops{}, err == unix.ERANGE
	}
	d, _ = parseLogDrops(buf[:n])
	return d, true
}

func (l *LogFile) writeAttr(d logDrops) bool {
	return unix.Fsetxattr(l.fd, droppedXattr, d.marshal(), 0) == nil
}

func (l *LogFile) removeAttr() {
	if err := unix.Fremovexattr(l.fd, droppedXattr); err != nil && !errors.Is(err, unix.ENODATA) {
		// Left, it would be said again: make it say nothing.
		l.writeAttr(logDrops{})
	}
}

// logNoticeMsg is the message of the record that says what was dropped.
const logNoticeMsg = "log records dropped"

// logNotice is the record saying that d.N records of the log at path were
// dropped, in the log's format.
func logNotice(format logFormat, d logDrops, now time.Time, path string) []byte {
	var b bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&b, nil)
	if format == LogJSON {
		h = slog.NewJSONHandler(&b, nil)
	}
	r := slog.NewRecord(now, slog.LevelWarn, logNoticeMsg, 0)
	r.AddAttrs(slog.Int64("dropped", d.N), slog.Time("since", d.Since), slog.String("why", d.Why),
		slog.String("log", path), slog.Int("writer_pid", os.Getpid()))
	h.Handle(context.Background(), r)
	return b.Bytes()
}

// marshal is the attribute's value: "N SINCE-UNIX-NANOSECONDS WHY", the
// reason clipped so that the whole fits maxDroppedXattr.
func (d logDrops) marshal() []byte {
	s := strconv.FormatInt(d.N, 10) + " " + strconv.FormatInt(d.Since.UnixNano(), 10) + " "
	why := strings.ToValidUTF8(d.Why, "?")
	if room := maxDroppedXattr - len(s); len(why) > room {
		why = strings.ToValidUTF8(why[:room], "")
	}
	return []byte(s + why)
}

// parseLogDrops reads the attribute's value; false when it is not one
// (which the writer then overwrites or removes).
func parseLogDrops(b []byte) (logDrops, bool) {
	if len(b) > maxDroppedXattr {
		return logDrops{}, false
	}
	n, rest, ok := strings.Cut(string(b), " ")
	if !ok {
		return logDrops{}, false
	}
	since, why, ok := strings.Cut(rest, " ")
	if !ok {
		return logDrops{}, false
	}
	c, err := strconv.ParseInt(n, 10, 64)
	if err != nil || c < 0 {
		return logDrops{}, false
	}
	ns, err := strconv.ParseInt(since, 10, 64)
	if err != nil {
		return logDrops{}, false
	}
	return logDrops{N: c, Since: time.Unix(0, ns), Why: strings.ToValidUTF8(why, "?")}, true
}

// LogHandler is an slog handler writing records to w in format: through
// logOn when w is a file (a process's standard error that its parent
// pointed at a log), as slog writes them otherwise (a test's buffer).
func LogHandler(w io.Writer, format logFormat, opts *slog.HandlerOptions) slog.Handler {
	if f, ok := w.(*os.File); ok {
		return logOn(f, format).Handler(opts)
	}
	if format == LogJSON {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}
