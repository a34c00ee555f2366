package fossilio

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
)

// AgentCaps are the capabilities of an agent login (protocol v1, E2): read
// (g clone, o check out and pull, h links, j wiki, r tickets, z archives, 2
// forum), post without moderation (4, which includes 2 and 3; c append to
// and n open tickets), check in and tag (i). Nothing more: no u or v (no
// inherited capabilities), never a or s. docs/fossil.md says why.
const AgentCaps = "cghijnorz4"

// writeBusyTimeout is how long an admin write waits for the server's lock;
// Fossil itself waits 15 s.
const writeBusyTimeout = 15 * time.Second

// Admin changes the node's own repository file: its users, its hook, its
// git mirror. The node owns that file; every change is one short SQLite
// transaction, or a fossil command for the backoffice and the mirror.
type Admin struct {
	// Repository is the node's repository file.
	Repository string
	// Fossil runs the fossil commands (backoffice, git export).
	Fossil *Fossil
	// WALWait bounds how long UseWAL waits for the lock of another process
	// that has the repository open; zero means DefaultWALWait.
	WALWait time.Duration
	// Files keeps the password files (ProvisionAgent, RotatePassword): the
	// node's below the agents root are unixhost.Below's; nil is OSFiles.
	Files passwordFiles
}

// defaultWALWait is how long UseWAL waits, at most, for the server, its
// backoffice or a fossil command to let go of the repository's lock (D11).
const defaultWALWait = 10 * time.Second

// writeTx runs fn in one immediate (write) transaction on the repository.
func (a *Admin) writeTx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	return a.tx(ctx, op, true, fn)
}

// tx runs fn in one transaction: a write (immediate) one, or a read-only one.
func (a *Admin) tx(ctx context.Context, op string, write bool, fn func(*sql.Tx) error) error {
	return a.open(ctx, op, write, writeBusyTimeout, func(db *sql.DB, r *Repo) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return r.wrap(op, err)
		}
		defer tx.Rollback()
		if err := fn(tx); err != nil {
			if errors.Is(err, ErrBadInput) || errors.Is(err, ErrNoSuchUser) || errors.Is(err, ErrPrivileged) {
				return fmt.Errorf("%s %s: %w", op, r.path, err)
			}
			return r.wrap(op, err)
		}
		return r.wrap(op, tx.Commit())
	})
}

// open opens the repository file, checks that it is one, and runs fn; each
// connection waits at most busy for another's lock.
func (a *Admin) open(ctx context.Context, op string, write bool, busy time.Duration, fn func(*sql.DB, *Repo) error) error {
	abs, err := filepath.Abs(a.Repository)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, a.Repository, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	u := url.URL{Scheme: "file", Path: abs}
	mode := "mode=ro&_txlock=deferred"
	if write {
		mode = "mode=rw&_txlock=immediate"
	}
	dsn := u.String() + "?" + mode + "&_busy_timeout=" + strconv.FormatInt(busy.Milliseconds(), 10)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, abs, err)
	}
	defer db.Close()
	r := &Repo{path: abs}
	var n int
	probe := func() error {
		return db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type='table' AND name IN ('blob','rcvfrom','config','user')`).Scan(&n)
	}
	err = probe()
	if isHotJournal(err) {
		// A writer died in a transaction; a read-only connection cannot
		// roll its journal back (Repo.read).
		if err = rollBackHotJournal(abs, busy); err == nil {
			err = probe()
		}
	}
	if err != nil {
		return r.wrap(op, err)
	}
	if n != 4 {
		return r.wrap(op, ErrNotRepository)
	}
	return fn(db, r)
}

// UseWAL switches the repository to write-ahead logging, which lasts and which
// Fossil keeps using. With the rollback journal a new repository starts with,
// a reader holding a transaction makes a concurrent push fail after Fossil's
// 15 s busy timeout, and a web post that meets another writer fails at once
// with "database is locked" (fossil-2.21.md section 6); on a node the server,
// the backoffice, the hook, the daemon and the tools all open the file. It
// returns the journal mode SQLite reports, which is "wal" on success.
//
// The switch needs the repository to itself for a moment, so on a live
// repository it waits for the others' locks, at most WALWait (D11); past
// that it fails with ErrBusy, saying what it waited for and how long. A
// repository already in WAL mode needs no lock and is not waited for.
func (a *Admin) UseWAL(ctx context.Context) (string, error) {
	const op = "use write-ahead logging"
	wait := a.WALWait
	if wait <= 0 {
		wait = defaultWALWait
	}
	deadline := time.Now().Add(wait)
	var mode string
	err := a.open(ctx, op, true, wait, func(db *sql.DB, r *Repo) error {
		// journal_mode cannot change inside a transaction, so this runs on
		// its own connection outside one. SQLite takes the write lock for
		// it from within a read, where it calls no busy handler: a writer
		// in its transaction (a server's handler, a backoffice run) makes
		// it fail at once whatever the busy timeout, so it is tried again
		// until the deadline. The busy timeout still bounds each try's
		// wait for readers to leave.
		c, err := db.Conn(ctx)
		if err != nil {
			return r.wrap(op, err)
		}
		defer c.Close()
		for pause := 5 * time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
			left := max(time.Until(deadline), 0)
			_, err := c.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(left.Milliseconds(), 10))
			if err == nil {
				err = c.QueryRowContext(ctx, `PRAGMA journal_mode=WAL`).Scan(&mode)
			}
			if !isBusy(err) || left == 0 {
				return r.wrap(op, err)
			}
			select {
			case <-ctx.Done():
				return r.wrap(op, ctx.Err())
			case <-time.After(min(pause, left)):
			}
		}
	})
	if errors.Is(err, ErrBusy) {
		return "", a.lockedErr(op, wait, err)
	}
	if err == nil && mode != "wal" {
		err = fmt.Errorf("use write-ahead logging %s: SQLite kept journal mode %q", a.Repository, mode)
	}
	return mode, err
}

// lockedErr says that op waited all of wait for the repository's lock: which
// repository, what held it, for how long, and SQLite's own word.
func (a *Admin) lockedErr(op string, wait time.Duration, err error) error {
	path, perr := filepath.Abs(a.Repository)
	if perr != nil {
		path = a.Repository
	}
	cause := err
	var se *sqlite.Error
	if errors.As(err, &se) {
		cause = se
	}
	return fmt.Errorf("%s %s: %w: waited %v for the lock of another process that has the repository open (the fossil server, its backoffice, a fossil command), and it was still held: %v",
		op, path, ErrBusy, wait, cause)
}

// checkCaps refuses admin and setup, and anything but capability letters.
func checkCaps(caps string) error {
	if strings.ContainsAny(caps, "as") {
		return fmt.Errorf("%w: capabilities %q", ErrPrivileged, caps)
	}
	for i := 0; i < len(caps); i++ {
		c := caps[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return fmt.Errorf("%w: capabilities %q: %q is not a capability letter", ErrBadInput, caps, c)
		}
	}
	return nil
}

func projectCode(tx *sql.Tx, ctx context.Context) (string, error) {
	var code sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT value FROM config WHERE name='project-code'`).Scan(&code); err != nil || code.String == "" {
		return "", fmt.Errorf("%w: no project code", ErrNotRepository)
	}
	return code.String, nil
}

// SetUser creates a user, or updates an existing one, with exactly these
// capabilities and this password (stored as Fossil stores it: the shared
// secret). It refuses a and s, and pseudo-users.
func (a *Admin) SetUser(ctx context.Context, login, password, caps string) error {
	if err := checkLoginName(login); err != nil {
		return fmt.Errorf("set user %q: %w", login, err)
	}
	if err := checkCaps(caps); err != nil {
		return fmt.Errorf("set user %q: %w", login, err)
	}
	if password == "" {
		return fmt.Errorf("set user %q: %w: empty password (Fossil refuses such a login over sync)", login, ErrBadInput)
	}
	return a.writeTx(ctx, "set user "+login, func(tx *sql.Tx) error {
		code, err := projectCode(tx, ctx)
		if err != nil {
			return err
		}
		pw := sharedSecret(code, login, password)
		res, err := tx.ExecContext(ctx, `UPDATE user SET pw=?, cap=?, cookie=NULL, cexpire=NULL, mtime=strftime('%s','now') WHERE login=?`, pw, caps, login)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO user(login, pw, cap, info, mtime) VALUES(?, ?, ?, ?, strftime('%s','now'))`,
			login, pw, caps, "OCX login")
		return err
	})
}

// SetCaps replaces a user's capabilities, exactly; it refuses a and s.
func (a *Admin) SetCaps(ctx context.Context, login, caps string) error {
	if err := checkCaps(caps); err != nil {
		return fmt.Errorf("set capabilities of %q: %w", login, err)
	}
	return a.updateUser(ctx, "set capabilities of "+login, login, `UPDATE user SET cap=?, cookie=NULL, mtime=strftime('%s','now') WHERE login=?`, caps, login)
}

// SetPassword sets a user's password (stored as the shared secret) and ends
// its web sessions.
func (a *Admin) SetPassword(ctx context.Context, login, password string) error {
	if password == "" {
		return fmt.Errorf("set password of %q: %w: empty password", login, ErrBadInput)
	}
	return a.writeTx(ctx, "set password of "+login, func(tx *sql.Tx) error {
		code, err := projectCode(tx, ctx)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE user SET pw=?, cookie=NULL, cexpire=NULL, mtime=strftime('%s','now') WHERE login=?`,
			sharedSecret(code, login, password), login)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: %q", ErrNoSuchUser, login)
		}
		return nil
	})
}

// Withdraw takes every capability from a login (protocol v1, E2: when its
// agent's response is written). Fossil keeps the user, so its past artifacts
// stay attributed; it keeps only what every visitor has (nobody, anonymous).
func (a *Admin) Withdraw(ctx context.Context, login string) error {
	return a.updateUser(ctx, "withdraw "+login, login, `UPDATE user SET cap='', cookie=NULL, cexpire=NULL, mtime=strftime('%s','now') WHERE login=?`, login)
}

func (a *Admin) updateUser(ctx context.Context, op, login, stmt string, args ...any) error {
	return a.writeTx(ctx, op, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, stmt, args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: %q", ErrNoSuchUser, login)
		}
		return nil
	})
}

// TightenDefaults removes from the pseudo-users nobody and anonymous every
// capability an agent login must not have, since every logged-in user also
// gets theirs: afterwards an agent's effective capabilities are exactly
// AgentCaps. It returns the capabilities it removed, by pseudo-user. With a
// new repository's defaults, only anonymous's m (append to wiki) goes.
func (a *Admin) TightenDefaults(ctx context.Context) (map[string]string, error) {
	removed := map[string]string{}
	err := a.writeTx(ctx, "tighten defaults", func(tx *sql.Tx) error {
		for _, pseudo := range []string{"nobody", "anonymous"} {
			var caps sql.NullString
			err := tx.QueryRowContext(ctx, `SELECT cap FROM user WHERE login=?`, pseudo).Scan(&caps)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			var keep, drop strings.Builder
			for _, c := range caps.String {
				if strings.ContainsRune(AgentCaps, c) {
					keep.WriteRune(c)
				} else {
					drop.WriteRune(c)
				}
			}
			if drop.Len() == 0 {
				continue
			}
			removed[pseudo] = drop.String()
			if _, err := tx.ExecContext(ctx, `UPDATE user SET cap=?, mtime=strftime('%s','now') WHERE login=?`, keep.String(), pseudo); err != nil {
				return err
			}
		}
		return nil
	})
	return removed, err
}

// ProvisionAgent makes an agent login: the password kept in passwordFile
// (made with a fresh password when missing, mode 0600), exactly AgentCaps,
// and the repository's defaults tightened so that nothing is added to them.
func (a *Admin) ProvisionAgent(ctx context.Context, login, passwordFile string) error {
	if err := checkLoginName(login); err != nil {
		return fmt.Errorf("provision agent %q: %w", login, err)
	}
	password, err := a.ReadPasswordFile(passwordFile)
	if errors.Is(err, fs.ErrNotExist) {
		password = NewPassword()
		err = a.WritePasswordFile(passwordFile, password)
	}
	if err != nil {
		return fmt.Errorf("provision agent %q: %w", login, err)
	}
	if _, err := a.TightenDefaults(ctx); err != nil {
		return fmt.Errorf("provision agent %q: %w", login, err)
	}
	return a.SetUser(ctx, login, password, AgentCaps)
}

// RotatePassword gives a login a fresh password and keeps it in
// passwordFile. The file is replaced only once the repository holds the new
// password, so the two never disagree after a failure of the repository.
func (a *Admin) RotatePassword(ctx context.Context, login, passwordFile string) (string, error) {
	password := NewPassword()
	tmp, err := a.writeTemp(passwordFile, password)
	if err != nil {
		return "", fmt.Errorf("rotate password of %q: %w", login, err)
	}
	files := a.files()
	if err := a.SetPassword(ctx, login, password); err != nil {
		files.Remove(tmp)
		return "", fmt.Errorf("rotate password of %q: %w", login, err)
	}
	if err := files.Rename(tmp, passwordFile); err != nil {
		files.Remove(tmp)
		return "", fmt.Errorf("rotate password of %q: the repository has the new password, but: %w", login, err)
	}
	return password, nil
}

// NewPassword returns a fresh random password: 24 URL-safe characters, never
// 40 hex digits (which Fossil's client would take for a shared secret).
func NewPassword() string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// passwordFiles is where the logins' password files are kept. The node's
// are below the agents root, read and written through no link
// (unixhost.Below); OSFiles serves a file a caller names elsewhere.
type passwordFiles interface {
	ReadSecret(p string, max int64) ([]byte, error)
	WriteFile(p string, data []byte, perm fs.FileMode) error
	MkdirAll(p string, perm fs.FileMode) error
	Rename(from, to string) error
	Remove(p string) error
}

// maxPasswordFile bounds a password file: one line.
const maxPasswordFile = 4 << 10

// files is a's PasswordFiles: OSFiles when it names none.
func (a *Admin) files() passwordFiles {
	if a.Files != nil {
		return a.Files
	}
	return osFiles{}
}

// WritePasswordFile writes a password to a file only its owner reads (0600),
// atomically: a reader sees the old password or the new one.
func (a *Admin) WritePasswordFile(path, password string) error {
	content, err := passwordContent(password)
	if err != nil {
		return err
	}
	files := a.files()
	if err := files.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write password file: %w", err)
	}
	if err := files.WriteFile(path, content, 0o600); err != nil {
		return fmt.Errorf("write password file: %w", err)
	}
	return nil
}

// writeTemp writes password beside path, under a name of its own, for a
// rename over path once the repository holds it.
func (a *Admin) writeTemp(path, password string) (string, error) {
	content, err := passwordContent(password)
	if err != nil {
		return "", err
	}
	files := a.files()
	if err := files.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("write password file: %w", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(path), ".password-"+hex.EncodeToString(rnd[:]))
	if err := files.WriteFile(tmp, content, 0o600); err != nil {
		return "", fmt.Errorf("write password file %s: %w", path, err)
	}
	return tmp, nil
}

func passwordContent(password string) ([]byte, error) {
	if password == "" || strings.ContainsAny(password, "\n\r") {
		return nil, fmt.Errorf("%w: a password is one non-empty line", ErrBadInput)
	}
	return []byte(password + "\n"), nil
}

// ReadPasswordFile reads a password kept by WritePasswordFile through a's
// files. A file others may read is refused: the password would not be the
// login's alone.
func (a *Admin) ReadPasswordFile(path string) (string, error) {
	return ReadPasswordFrom(a.files(), path)
}

// ReadPasswordFrom reads the password file at path through files.
func ReadPasswordFrom(files interface {
	ReadSecret(p string, max int64) ([]byte, error)
}, path string) (string, error) {
	b, err := files.ReadSecret(path, maxPasswordFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("read password file %s: %w: %v", path, ErrBadInput, err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" || strings.ContainsAny(pw, "\n\r") {
		return "", fmt.Errorf("read password file %s: %w: not one non-empty line", path, ErrBadInput)
	}
	return pw, nil
}

// ReadPasswordFile reads a password file a caller names, wherever it is
// (OSFiles): `--password-file`. The node's own are read through its
// PasswordFiles.
func ReadPasswordFile(path string) (string, error) { return ReadPasswordFrom(osFiles{}, path) }

// Backoffice runs the repository's backoffice now (hooks included), ignoring
// the 60 s lease of the server's own backoffice. Fossil's write commands on
// the host never start it, so each OCX write on the node runs it after.
func (a *Admin) Backoffice(ctx context.Context) error {
	_, err := a.Fossil.Run(ctx, []string{"backoffice", "--nolease", a.Repository})
	if err != nil {
		return fmt.Errorf("backoffice %s: %w", a.Repository, err)
	}
	return nil
}

// GitExport brings the repository's git mirror up to date, when it has one
// (the config last-git-export-repo names it); it does nothing otherwise.
func (a *Admin) GitExport(ctx context.Context) error {
	out, err := a.Fossil.Run(ctx, []string{"git", "export", "--if-mirrored", "-R", a.Repository})
	if err != nil {
		return fmt.Errorf("git export %s: %w", a.Repository, err)
	}
	if msg := syncFailure(out); msg != "" {
		return fmt.Errorf("git export %s: %w", a.Repository, &CommandError{Args: []string{"git", "export", "-R", a.Repository}, Output: msg})
	}
	return nil
}

// hookEntry is one element of Fossil's hooks setting; OCX marks its own with
// "ocx", a key Fossil ignores.
type hookEntry map[string]any

// HookSetting is what the repository's settings say of its hooks: whether
// OCX's after-receive hook is installed, and where the hooks stand
// (messages.HookStatus is the node's status built from it).
type HookSetting struct {
	Installed bool
	Command   string
	LastRcvid int64 // hook-last-rcvid: the receipts the hooks have seen
	Others    int   // hooks not OCX's
	Newest    int64 // the newest receipt (max rcvid)
	// HeldUntil is when Fossil's hook embargo ends (hook-embargo, set for
	// 60 s by each push answered with gimme cards); zero when none holds.
	HeldUntil time.Time
}

// hookSequence is the seq of OCX's hook: after a default hook (10), so a
// mirror or mail hook of the repository's own runs first.
const hookSequence = 50

// InstallHook installs OCX's after-receive hook with the given command (Fossil
// substitutes %F, %R and %A, and runs it with /bin/sh -c), replacing OCX's
// hook if one is there and keeping every other hook. When OCX's hook was not
// installed, it sets hook-last-rcvid to the newest receipt, so the first run
// neither replays the repository's past nor skips the next receipt; replacing
// OCX's hook keeps the place it had reached. (Another hook that had receipts
// still waiting for the backoffice loses them: a backoffice run between two
// receipts is the usual case, and replaying the past to OCX is worse.)
func (a *Admin) InstallHook(ctx context.Context, command string) error {
	if strings.TrimSpace(command) == "" || strings.ContainsAny(command, "\n\r") {
		return fmt.Errorf("install hook: %w: the command must be one non-empty line", ErrBadInput)
	}
	return a.writeTx(ctx, "install hook", func(tx *sql.Tx) error {
		hooks, err := readHooks(ctx, tx)
		if err != nil {
			return err
		}
		hadOurs := false
		kept := hooks[:0]
		for _, h := range hooks {
			if h["ocx"] == nil {
				kept = append(kept, h)
			} else {
				hadOurs = true
			}
		}
		kept = append(kept, hookEntry{"type": "after-receive", "cmd": command, "seq": hookSequence, "ocx": 1})
		if err := writeHooks(ctx, tx, kept); err != nil {
			return err
		}
		if !hadOurs {
			_, err = tx.ExecContext(ctx, `REPLACE INTO config(name, value, mtime)
				VALUES('hook-last-rcvid', (SELECT coalesce(max(rcvid), 0) FROM rcvfrom), strftime('%s','now'))`)
		}
		return err
	})
}

// RemoveHook removes OCX's after-receive hook, keeping every other; removing
// it again does nothing.
func (a *Admin) RemoveHook(ctx context.Context) error {
	return a.writeTx(ctx, "remove hook", func(tx *sql.Tx) error {
		hooks, err := readHooks(ctx, tx)
		if err != nil {
			return err
		}
		kept := hooks[:0]
		for _, h := range hooks {
			if h["ocx"] == nil {
				kept = append(kept, h)
			}
		}
		if len(kept) == 0 {
			_, err = tx.ExecContext(ctx, `DELETE FROM config WHERE name='hooks'`)
			return err
		}
		return writeHooks(ctx, tx, kept)
	})
}

// Hook reports whether OCX's hook is installed, and with which command.
func (a *Admin) Hook(ctx context.Context) (HookSetting, error) {
	var st HookSetting
	err := a.tx(ctx, "read hook", false, func(tx *sql.Tx) (err error) {
		st, err = readHookSetting(ctx, tx)
		return err
	})
	return st, err
}

// Hook is Admin.Hook read on the open reader, in one read transaction:
// what a status asks of a repository the daemon holds open.
func (r *Repo) Hook(ctx context.Context) (st HookSetting, err error) {
	err = r.read(ctx, "read hook", func(rd *reader) (err error) {
		st, err = readHookSetting(ctx, rd.tx)
		return err
	})
	return st, err
}

// readHookSetting reads the hook's setting in tx.
func readHookSetting(ctx context.Context, tx *sql.Tx) (HookSetting, error) {
	var st HookSetting
	var raw sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT value FROM config WHERE name='hooks'`).Scan(&raw)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, err
	}
	st.Command, st.Others, st.Installed = ocxHookIn(raw.String)
	var last sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT value FROM config WHERE name='hook-last-rcvid'`).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, err
	}
	st.LastRcvid, _ = strconv.ParseInt(last.String, 10, 64)
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(rcvid), 0) FROM rcvfrom`).Scan(&st.Newest); err != nil {
		return st, err
	}
	// Fossil compares now() (seconds since 1970) with value+0.
	var until sql.NullFloat64
	err = tx.QueryRowContext(ctx, `SELECT value+0 FROM config WHERE name='hook-embargo'`).Scan(&until)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, err
	}
	if end := time.Unix(int64(until.Float64), 0).UTC(); until.Valid && end.After(time.Now()) {
		st.HeldUntil = end
	}
	return st, nil
}

func readHooks(ctx context.Context, tx *sql.Tx) ([]hookEntry, error) {
	var raw sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT value FROM config WHERE name='hooks'`).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) || raw.String == "" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var hooks []hookEntry
	if err := json.Unmarshal([]byte(raw.String), &hooks); err != nil {
		// Fossil treats an invalid hooks value as no hooks; so does OCX,
		// and installing writes a valid one.
		return nil, nil
	}
	return hooks, nil
}

func writeHooks(ctx context.Context, tx *sql.Tx, hooks []hookEntry) error {
	b, err := json.Marshal(hooks)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `REPLACE INTO config(name, value, mtime) VALUES('hooks', ?, strftime('%s','now'))`, string(b))
	return err
}
