package fossilio

import (
	"bytes"
	"compress/zlib"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
)

// defaultBusyTimeout is how long a read waits for a writer's lock before it
// fails with ErrBusy. Fossil itself waits 15 s; a read gives up sooner.
const defaultBusyTimeout = 5 * time.Second

// maxDeltaChain bounds a delta chain, so a corrupt (cyclic) chain ends.
const maxDeltaChain = 100000

// Options tune how a repository is opened for reading.
type Options struct {
	// BusyTimeout is how long a read waits for a writer; 0 means
	// DefaultBusyTimeout.
	BusyTimeout time.Duration
	// PassedOver, when set, is told of each artifact a reader of many
	// passes over because its own bytes do not read (they do not parse as
	// its kind, or its content cannot be rebuilt): a tag change in a
	// batch, a post of a thread, a change of a ticket. One bad artifact
	// costs only itself (issue 22 item 5); the caller logs it, once.
	PassedOver func(hash string, err error)
	// ContentRead, when set, is told of each artifact whose bytes a read
	// rebuilt from the repository: what a test counts to see that a
	// caller reads an artifact once.
	ContentRead func(hash string)
	// ReadBegun, when set, is told of each read transaction begun, by the
	// operation it serves: what a test counts to see how many reads a
	// caller's way makes.
	ReadBegun func(op string)
}

// Repo reads one Fossil repository file, read-only. It is safe for concurrent
// use and safe while a Fossil server writes the same file: every read is a
// short transaction with a busy timeout.
//
// A Repo opened with OpenNode is the node's repository, where the receipt
// table (rcvfrom) tells who sent each artifact. One opened with OpenClone is
// an agent's clone: there the receipts name the local user who pulled, so
// every Sender it reports is "" (unknown).
type Repo struct {
	path string
	dsn  string // what its connections were opened with
	node bool
	// vouched: a node on another host's clone of the server (vouch.go),
	// whose senders, order and users are the server's word.
	vouched bool
	db      *sql.DB
	stmts   map[string]*sql.Stmt
	once    map[string]bool // queries run once, not yet prepared
	stmtsMu *sync.Mutex     // shared with a Lend
	// lent: a Lend of another Repo, whose Close is the owner's alone.
	lent bool
	// timeout is the busy timeout of its connections.
	timeout time.Duration
	// passedOver is Options.PassedOver, contentRead Options.ContentRead.
	passedOver  func(hash string, err error)
	contentRead func(hash string)
	readBegun   func(op string)
	// file is the descriptor a Repo opened by OpenCloneFile reads through,
	// closed with it; immutable is set then: SQLite takes no lock and
	// looks for no journal, so no hot journal is rolled back either.
	file      *os.File
	immutable bool
	// readers admits one read transaction fewer than there are connections:
	// a reader that must prepare a statement needs a free connection while
	// it holds its own, and with every connection held by readers waiting
	// to prepare, all of them would wait for ever.
	readers chan struct{}
}

// maxConns is the connections a Repo opens to its file.
const maxConns = 4

// OpenNode opens the node's own repository file, where senders are known.
func OpenNode(path string, opts *Options) (*Repo, error) { return open(path, true, opts) }

// OpenClone opens a clone (an agent's), where senders are unknown.
func OpenClone(path string, opts *Options) (*Repo, error) { return open(path, false, opts) }

func open(path string, node bool, opts *Options) (*Repo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &fs.PathError{Op: "open repository", Path: path, Err: err}
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, &fs.PathError{Op: "open repository", Path: abs, Err: errors.Unwrap(err)}
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("open repository %s: %w (not a regular file)", abs, ErrNotRepository)
	}
	return openDSN(abs, url.URL{Scheme: "file", Path: abs}, nil, node, opts)
}

// OpenCloneFile opens an agent's clone through a descriptor its caller
// opened following no link (unixhost.Root.OpenRegular), never by its
// name: the clone is the agent's file, and a link in its place would make
// the node open any SQLite file, its own repository among them. SQLite
// reads the very file behind f (/proc/self/fd/N), read-only and
// immutable: it takes no lock, looks for no journal beside it and writes
// nothing, so nothing the agent put next to its clone is read either; an
// agent writing its clone meanwhile harms only its own reads. The Repo
// closes f when it closes, and on an error.
func OpenCloneFile(f *os.File, opts *Options) (*Repo, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "open repository", Path: f.Name(), Err: errors.Unwrap(err)}
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open repository %s: %w (not a regular file)", f.Name(), ErrNotRepository)
	}
	u := url.URL{Scheme: "file", Path: "/proc/self/fd/" + strconv.FormatUint(uint64(f.Fd()), 10)}
	r, err := openDSN(f.Name(), u, f, false, opts)
	if err != nil {
		f.Close()
	}
	return r, err
}

// openDSN opens the SQLite database at u read-only, abs naming it in every
// error; with file set, immutable and through that descriptor.
func openDSN(abs string, u url.URL, file *os.File, node bool, opts *Options) (*Repo, error) {
	timeout := defaultBusyTimeout
	if opts != nil && opts.BusyTimeout > 0 {
		timeout = opts.BusyTimeout
	}
	q := url.Values{}
	q.Set("mode", "ro")
	if file != nil {
		q.Set("immutable", "1")
	}
	q.Set("_busy_timeout", strconv.FormatInt(timeout.Milliseconds(), 10))
	dsn := u.String() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", abs, err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	r := &Repo{path: abs, dsn: dsn, node: node, db: db, stmts: map[string]*sql.Stmt{}, stmtsMu: new(sync.Mutex), once: map[string]bool{}, readers: make(chan struct{}, maxConns-1), timeout: timeout,
		file: file, immutable: file != nil}
	if opts != nil {
		r.passedOver, r.contentRead, r.readBegun = opts.PassedOver, opts.ContentRead, opts.ReadBegun
	}
	var n int
	probe := func() error {
		return db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type='table' AND name IN ('blob','rcvfrom','config','event','tagxref','user')`).Scan(&n)
	}
	err = probe()
	if isHotJournal(err) && !r.immutable {
		if err = rollBackHotJournal(abs, timeout); err == nil {
			err = probe()
		}
	}
	if err == nil && n != 6 {
		err = ErrNotRepository
	}
	if err == nil && node {
		// The node's own file: a node on another host's clone keeps what
		// the server vouched for beside Fossil's tables. An agent's clone
		// (OpenClone) is never read so: a table there is the agent's.
		err = db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type='table' AND name='fx_ocx_receipt'`).Scan(&n)
		r.vouched = n == 1
	}
	if err != nil {
		db.Close()
		return nil, r.wrap("open repository", err)
	}
	return r, nil
}

// Changes counts the writes other connections made to a repository's
// file (SQLite's data_version), on a connection of its own that never
// writes: the count after a write by anyone is not the count before it
// (D70), whether the file is in rollback or WAL journal mode.
type Changes struct {
	db   *sql.DB
	path string
}

// Changes opens r's file again for counting its writes.
func (r *Repo) Changes() (*Changes, error) {
	db, err := sql.Open("sqlite", r.dsn)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", r.path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return &Changes{db: db, path: r.path}, nil
}

// Count is the count of writes by others so far.
func (c *Changes) Count(ctx context.Context) (int64, error) {
	var n int64
	if err := c.db.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the writes of %s: %w", c.path, err)
	}
	return n, nil
}

// Close closes its connection.
func (c *Changes) Close() error { return c.db.Close() }

// Lend is r for a caller that closes what it is given when it is done,
// as a reader opened for one call does, while r stays open for its
// owner: the Lend's Close does nothing. It shares r's connections, its
// prepared statements and its bound on readers.
func (r *Repo) Lend() *Repo {
	l := *r
	l.lent = true
	return &l
}

// Close releases the database handles; a Lend's Close does nothing.
func (r *Repo) Close() error {
	if r.lent {
		return nil
	}
	r.stmtsMu.Lock()
	for _, s := range r.stmts {
		s.Close()
	}
	r.stmts = nil
	r.stmtsMu.Unlock()
	err := r.db.Close()
	if r.file != nil {
		r.file.Close()
	}
	return err
}

// passOver tells Options.PassedOver of an artifact a reader of many
// passes over, and says whether err is such an artifact's: its bytes do
// not read (ErrMalformed). Any other error (the database's) is the
// reader's to return.
func (r *Repo) passOver(hash string, err error) bool {
	if !errors.Is(err, ErrMalformed) {
		return false
	}
	if r.passedOver != nil {
		r.passedOver(hash, err)
	}
	return true
}

// Path is the repository file's absolute path.
func (r *Repo) Path() string { return r.path }

// SendersKnown reports whether this is the node's repository, where the
// receipts tell who sent each artifact.
func (r *Repo) SendersKnown() bool { return r.node }

// ProjectName is the repository file's name without ".fossil".
func (r *Repo) ProjectName() string { return projectName(r.path) }

// wrap turns SQLite's errors into fossilio's: a lock held past the busy
// timeout is ErrBusy, a file that is not a database is ErrNotRepository.
func (r *Repo) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return fmt.Errorf("%s %s: %w: %w", op, r.path, ErrBusy, err)
		case 26, 11: // SQLITE_NOTADB, SQLITE_CORRUPT
			return fmt.Errorf("%s %s: %w: %v", op, r.path, ErrNotRepository, err)
		}
	}
	return fmt.Errorf("%s %s: %w", op, r.path, err)
}

// stmt returns the prepared statement for query, preparing it the second
// time the query runs; the first time it returns nil, and the query runs
// on the transaction's connection alone. A statement prepared for the pool
// is prepared on a connection of its own (opened, its schema read, for the
// first) and again on the transaction's, which is what a one-shot reader,
// the hook, pays for every query it runs once.
func (r *Repo) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	r.stmtsMu.Lock()
	defer r.stmtsMu.Unlock()
	if s, ok := r.stmts[query]; ok {
		return s, nil
	}
	if !r.once[query] {
		r.once[query] = true
		return nil, nil
	}
	delete(r.once, query)
	s, err := r.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	r.stmts[query] = s
	return s, nil
}

// reader runs queries inside one short read transaction.
type reader struct {
	r   *Repo
	ctx context.Context
	tx  *sql.Tx
}

// read runs fn in a read-only transaction, so that what it reads is one
// consistent state of the repository, and ends the transaction at once. A
// hot journal (a writer died in the middle of a transaction: a fossil
// command killed, say) is rolled back, and the read tried once more.
func (r *Repo) read(ctx context.Context, op string, fn func(*reader) error) error {
	select {
	case r.readers <- struct{}{}:
	case <-ctx.Done():
		return r.wrap(op, ctx.Err())
	}
	defer func() { <-r.readers }()
	err := r.readOnce(ctx, op, fn)
	if isHotJournal(err) && !r.immutable {
		if rerr := rollBackHotJournal(r.path, r.timeout); rerr != nil {
			return r.wrap(op, rerr)
		}
		err = r.readOnce(ctx, op, fn)
	}
	return err
}

func (r *Repo) readOnce(ctx context.Context, op string, fn func(*reader) error) error {
	if r.readBegun != nil {
		r.readBegun(op)
	}
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return r.wrap(op, err)
	}
	defer tx.Rollback()
	if err := fn(&reader{r: r, ctx: ctx, tx: tx}); err != nil {
		// fossilio's own errors already name what is wrong and where;
		// SQLite's get the operation and the path.
		var he *HashError
		var pe *ParseError
		if errors.As(err, &he) || errors.As(err, &pe) || errors.Is(err, ErrWrongKind) || errors.Is(err, ErrNoSuchUser) || errors.Is(err, ErrMalformed) {
			return err
		}
		return r.wrap(op, err)
	}
	return nil
}

// isHotJournal says whether err is SQLITE_READONLY_ROLLBACK: a writer died
// in the middle of a transaction and left a hot journal, which a read-only
// connection cannot roll back, so every read fails until a writer does.
func isHotJournal(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == 776
}

// isBusy says whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED, in any
// of their extended forms: another connection holds a lock.
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == 5 || se.Code()&0xff == 6)
}

// rollBackHotJournal opens the repository read-write just long enough for
// SQLite to roll its hot journal back, as the next fossil command to write
// would; it changes nothing else.
func rollBackHotJournal(abs string, timeout time.Duration) error {
	u := url.URL{Scheme: "file", Path: abs}
	q := url.Values{}
	q.Set("mode", "rw")
	q.Set("_busy_timeout", strconv.FormatInt(timeout.Milliseconds(), 10))
	db, err := sql.Open("sqlite", u.String()+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("roll back the hot journal of %s: %w", abs, err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		return fmt.Errorf("roll back the hot journal of %s: %w", abs, err)
	}
	return nil
}

// queryRows runs the query q with args and reads every row into a T, dest
// naming its fields in the query's column order.
func queryRows[T any](rd *reader, dest func(*T) []any, q string, args ...any) ([]T, error) {
	rows, err := rd.query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var t T
		if err := rows.Scan(dest(&t)...); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (rd *reader) query(q string, args ...any) (*sql.Rows, error) {
	s, err := rd.r.stmt(rd.ctx, q)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return rd.tx.QueryContext(rd.ctx, q, args...)
	}
	return rd.tx.StmtContext(rd.ctx, s).QueryContext(rd.ctx, args...)
}

// hashes runs a query whose one column is a hash, and returns them all; an
// error met while reading the rows is returned, not a shorter list.
func (rd *reader) hashes(q string, args ...any) ([]string, error) {
	rows, err := rd.query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// row runs a query expected to return at most one row; found is false when
// it returns none.
func (rd *reader) row(q string, args []any, dest ...any) (found bool, err error) {
	rows, err := rd.query(q, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return false, rows.Err()
	}
	if err := rows.Scan(dest...); err != nil {
		return false, err
	}
	return true, rows.Close()
}

// Config returns a value from the repository's config table.
func (r *Repo) Config(ctx context.Context, name string) (value string, ok bool, err error) {
	err = r.read(ctx, "read config", func(rd *reader) error {
		var v sql.NullString
		ok, err = rd.row(`SELECT value FROM config WHERE name=?`, []any{name}, &v)
		value = v.String
		return err
	})
	return value, ok, err
}

// ProjectCode returns the repository's project code, which names the project
// in sync and in every shared secret.
func (r *Repo) ProjectCode(ctx context.Context) (string, error) {
	v, ok, err := r.Config(ctx, "project-code")
	if err != nil {
		return "", err
	}
	if !ok || v == "" {
		return "", fmt.Errorf("read project code %s: %w (no project-code)", r.path, ErrNotRepository)
	}
	return v, nil
}

// Resolve returns the full hash named by a full hash or by a prefix of at
// least MinPrefix hex digits. A prefix naming several artifacts is refused
// with ErrAmbiguous; phantoms (hashes known but never received) count as
// absent.
func (r *Repo) Resolve(ctx context.Context, hashOrPrefix string) (string, error) {
	var full string
	err := r.read(ctx, "resolve", func(rd *reader) error {
		var err error
		full, _, err = rd.resolve(hashOrPrefix)
		return err
	})
	return full, err
}

// resolve returns the full hash and rid of a hash or prefix.
func (rd *reader) resolve(h string) (string, int64, error) {
	p := strings.ToLower(strings.TrimSpace(h))
	if len(p) < MinPrefix || len(p) > sha3Len || !isLowerHex(p) {
		return "", 0, &HashError{Op: "resolve", Repo: rd.r.path, Hash: h, Err: ErrBadHash}
	}
	rows, err := rd.query(`SELECT uuid, rid FROM blob WHERE uuid>=? AND uuid<? AND size>=0 ORDER BY uuid LIMIT 4`, p, p+"g")
	if err != nil {
		return "", 0, err
	}
	defer rows.Close()
	var matches []string
	var rid int64
	for rows.Next() {
		var u string
		if err := rows.Scan(&u, &rid); err != nil {
			return "", 0, err
		}
		matches = append(matches, u)
	}
	if err := rows.Err(); err != nil {
		return "", 0, err
	}
	switch len(matches) {
	case 0:
		return "", 0, &HashError{Op: "resolve", Repo: rd.r.path, Hash: h, Err: ErrNotFound}
	case 1:
		return matches[0], rid, nil
	}
	return "", 0, &HashError{Op: "resolve", Repo: rd.r.path, Hash: h, Matches: matches, Err: ErrAmbiguous}
}

// Content returns an artifact's bytes, rebuilt through its delta chain and
// checked against its hash.
func (r *Repo) Content(ctx context.Context, hashOrPrefix string) ([]byte, error) {
	var out []byte
	err := r.read(ctx, "read content", func(rd *reader) error {
		full, rid, err := rd.resolve(hashOrPrefix)
		if err != nil {
			return err
		}
		out, err = rd.content(rid, full)
		return err
	})
	return out, err
}

// Artifact returns an artifact parsed. One that does not parse is a
// *ParseError (ErrMalformed), naming its hash.
func (r *Repo) Artifact(ctx context.Context, hashOrPrefix string) (string, *Artifact, error) {
	var full string
	var a *Artifact
	err := r.read(ctx, "read artifact", func(rd *reader) error {
		var rid int64
		var err error
		if full, rid, err = rd.resolve(hashOrPrefix); err != nil {
			return err
		}
		a, err = rd.artifact(rid, full)
		return err
	})
	return full, a, err
}

// artifactOf reads and parses the artifact hash, which the classifier
// must take for kind: another kind is refused with ErrWrongKind, the
// error starting with op.
func (rd *reader) artifactOf(hash string, kind Kind, op string) (Info, *Artifact, error) {
	info, err := rd.info(hash)
	if err != nil {
		return Info{}, nil, err
	}
	if info.Kind != kind {
		return Info{}, nil, fmt.Errorf("%s %s in %s: %w: it is a %s", op, hash, rd.r.path, ErrWrongKind, info.Kind)
	}
	a, err := rd.artifact(info.Row, hash)
	if err != nil {
		return Info{}, nil, err
	}
	return info, a, nil
}

func (rd *reader) artifact(rid int64, full string) (*Artifact, error) {
	data, err := rd.content(rid, full)
	if err != nil {
		return nil, err
	}
	a, err := Parse(data)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.Hash = full
		}
		return nil, err
	}
	return a, nil
}

// content rebuilds rid's bytes: follow the delta chain to a full text, then
// apply each delta back up to rid, and check the result's hash.
func (rd *reader) content(rid int64, full string) ([]byte, error) {
	chain := []int64{rid}
	for {
		var src int64
		found, err := rd.row(`SELECT srcid FROM delta WHERE rid=?`, []any{chain[len(chain)-1]}, &src)
		if err != nil {
			return nil, err
		}
		if !found {
			break
		}
		if len(chain) > maxDeltaChain {
			return nil, fmt.Errorf("read content of %s: delta chain longer than %d: %w", full, maxDeltaChain, ErrMalformed)
		}
		chain = append(chain, src)
	}
	var data []byte
	for i := len(chain) - 1; i >= 0; i-- {
		var raw []byte
		var size int64
		found, err := rd.row(`SELECT content, size FROM blob WHERE rid=?`, []any{chain[i]}, &raw, &size)
		if err != nil {
			return nil, err
		}
		if !found || size < 0 || raw == nil {
			return nil, &HashError{Op: "read content (phantom or missing)", Repo: rd.r.path, Hash: full, Err: ErrNotFound}
		}
		plain, err := inflate(raw)
		if err != nil {
			return nil, fmt.Errorf("read content of %s (rid %d): %w", full, chain[i], err)
		}
		if i == len(chain)-1 {
			data = plain
			continue
		}
		if data, err = ApplyDelta(data, plain); err != nil {
			return nil, fmt.Errorf("read content of %s (rid %d): %w", full, chain[i], err)
		}
	}
	if !hashMatches(full, data) {
		return nil, fmt.Errorf("read content of %s: rebuilt content does not match its hash: %w", full, ErrMalformed)
	}
	if rd.r.contentRead != nil {
		rd.r.contentRead(full)
	}
	return data, nil
}

var zlibPool sync.Pool

// inflate decodes a blob's stored form: a 4-byte big-endian size, then a
// zlib stream of exactly that many bytes.
func inflate(raw []byte) ([]byte, error) {
	if len(raw) < 4 {
		return nil, fmt.Errorf("%w: stored blob shorter than its size header", ErrMalformed)
	}
	size := binary.BigEndian.Uint32(raw)
	if size > maxDeltaOutput {
		return nil, fmt.Errorf("%w: stored blob claims %d bytes", ErrMalformed, size)
	}
	src := bytes.NewReader(raw[4:])
	var zr io.ReadCloser
	if pooled, ok := zlibPool.Get().(io.ReadCloser); ok {
		if err := pooled.(zlib.Resetter).Reset(src, nil); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		zr = pooled
	} else {
		var err error
		if zr, err = zlib.NewReader(src); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
	}
	out := make([]byte, size)
	_, err := io.ReadFull(zr, out)
	if err == nil {
		// The stream must end exactly at the size the header gave.
		var one [1]byte
		if n, _ := zr.Read(one[:]); n != 0 {
			err = fmt.Errorf("stored blob longer than its size header")
		}
	}
	zr.Close()
	zlibPool.Put(zr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return out, nil
}

// julianToTime converts a Julian day number, as Fossil stores times, to UTC.
// Fossil's times are whole milliseconds (its D cards, SQLite's julianday),
// which a double holds only to within a few microseconds: rounded to the
// nearest millisecond they come back exact, where truncated half of them
// came back a millisecond early.
func julianToTime(jd float64) time.Time {
	if jd == 0 {
		return time.Time{}
	}
	ms := int64(math.Round((jd - 2440587.5) * 86400000))
	return time.UnixMilli(ms).UTC()
}

// timeToJulian is julianToTime's inverse: a time as Fossil stores it.
func timeToJulian(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMilli())/86400000 + 2440587.5
}

// MaxRecent bounds how many entries a list of recent things returns
// (RecentThreads, RecentTickets): a form shows a page of them, never a
// whole repository's history.
const MaxRecent = 100

// checkRecent refuses a count outside 1 to MaxRecent, naming it and the
// repository.
func (r *Repo) checkRecent(op string, n int) error {
	if n <= 0 || n > MaxRecent {
		return fmt.Errorf("%s %s: %w: n is %d, not 1 to %d", op, r.path, ErrBadInput, n, MaxRecent)
	}
	return nil
}

// hasTable says whether the repository has a table Fossil creates only
// when first needed (forumpost before the first post, modreq before the
// first moderated item).
func (rd *reader) hasTable(name string) (bool, error) {
	var one int
	return rd.row(`SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?`, []any{name}, &one)
}
