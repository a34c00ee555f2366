package fossilio

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CloneOptions say how to clone a repository as a login.
type CloneOptions struct {
	// URL is the server's URL, without credentials.
	URL string
	// Login and Password are the login's; the clone remembers the password
	// (--save-http-password) and makes Login its local admin, so commits in
	// its check-outs are the login's.
	Login, Password string
	// ProjectCode, when known, lets the clone be made with the 40-hex shared
	// secret instead of the cleartext password, which then never appears on
	// a command line (where ps shows it). The clone remembers the secret,
	// which Fossil's client takes as the password.
	ProjectCode string
}

// Clone clones a repository over the network as a login into the file dest,
// remembering the password, and opens no check-out. fossil clone exits 0 on
// a refused login, so its output is read for the failure.
func (f *Fossil) Clone(ctx context.Context, o CloneOptions, dest string) error {
	u, err := url.Parse(o.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("clone: %w: server URL %q", ErrBadInput, o.URL)
	}
	if u.User != nil {
		return fmt.Errorf("clone: %w: server URL holds credentials; give them in CloneOptions", ErrBadInput)
	}
	if err := checkLogin(o.Login); err != nil {
		return fmt.Errorf("clone %s: %w", o.URL, err)
	}
	if o.Password == "" {
		return fmt.Errorf("clone %s as %q: %w: no password", o.URL, o.Login, ErrBadInput)
	}
	if _, err := os.Stat(dest); err == nil {
		return fmt.Errorf("clone %s: %w: %s already exists", o.URL, ErrBadInput, dest)
	}
	secret := o.Password
	if o.ProjectCode != "" {
		secret = sharedSecret(o.ProjectCode, o.Login, o.Password)
	}
	u.User = url.UserPassword(o.Login, secret)
	args := []string{"clone", "--save-http-password", "--no-open", "-A", o.Login, u.String(), dest}
	out, err := f.Run(ctx, args, secret, url.QueryEscape(secret), url.PathEscape(secret))
	if err == nil {
		if msg := syncFailure(out); msg != "" {
			err = &CommandError{Args: mask(args, []string{secret, url.PathEscape(secret)}), Output: msg}
		}
	}
	if err != nil {
		os.Remove(dest)
		return fmt.Errorf("clone %s as %q into %s: %w", o.URL, o.Login, dest, err)
	}
	if _, err := os.Stat(dest); err != nil {
		return fmt.Errorf("clone %s as %q: no clone was made: %w", o.URL, o.Login, err)
	}
	return nil
}

// OpenCheckout opens a check-out of a branch (or any name Fossil resolves)
// of a clone in dir, without syncing. It turns autosync off in it (a session
// commits and pushes when it means to; a commit never pulls first) and
// mtime-changes off (an edit is seen by content, not by time and size).
func (f *Fossil) OpenCheckout(ctx context.Context, clone, dir, branch string) error {
	abs, err := filepath.Abs(clone)
	if err != nil {
		return fmt.Errorf("open check-out of %s: %w", clone, err)
	}
	if branch == "" || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("open check-out of %s: %w: branch %q", clone, ErrBadInput, branch)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("open check-out of %s: %w", clone, err)
	}
	if _, err := f.run(ctx, []string{"open", abs, branch, "--nosync"}, dir, nil); err != nil {
		return fmt.Errorf("open check-out of %s at %s in %s: %w", clone, branch, dir, err)
	}
	// A file edited twice within a second keeps its size and mtime; with
	// mtime-changes off, Fossil compares content, so no edit goes unseen.
	for _, s := range [][]string{{"autosync", "off"}, {"mtime-changes", "off"}} {
		if _, err := f.run(ctx, append([]string{"settings"}, s...), dir, nil); err != nil {
			return fmt.Errorf("open check-out of %s in %s: %w", clone, dir, err)
		}
	}
	return nil
}

// Pull pulls a clone from the URL it remembers, with the password it
// remembers. fossil pull exits 0 on failure, so its output is read.
func (f *Fossil) Pull(ctx context.Context, clone string) error {
	args := f.withProxy([]string{"pull", "-R", clone})
	out, err := f.Run(ctx, args)
	if err == nil {
		if msg := syncFailure(out); msg != "" {
			err = &CommandError{Args: args, Output: msg}
		}
	}
	if err != nil {
		return fmt.Errorf("pull %s: %w", clone, err)
	}
	return nil
}

// Push pushes a clone's new artifacts to the URL it remembers, with the
// password it remembers. fossil push exits 0 on failure, so its output is
// read.
func (f *Fossil) Push(ctx context.Context, clone string) error {
	args := f.withProxy([]string{"push", "-R", clone})
	out, err := f.Run(ctx, args)
	if err == nil {
		if msg := syncFailure(out); msg != "" {
			err = &CommandError{Args: args, Output: msg}
		}
	}
	if err != nil {
		return fmt.Errorf("push %s: %w", clone, err)
	}
	return nil
}

// withProxy adds --proxy when the command reaches the server through one.
func (f *Fossil) withProxy(args []string) []string {
	if f.Proxy == "" {
		return args
	}
	return append(args, "--proxy", f.Proxy)
}

// Remote is what a clone remembers of the server it was cloned from.
type Remote struct {
	URL      string // without credentials
	Login    string
	Password string // as remembered: cleartext, or the 40-hex shared secret
}

// Remembered reads the server, login and password a clone remembers
// (last-sync-url, and last-sync-pw, which Fossil stores obscured).
func Remembered(ctx context.Context, clone string) (Remote, error) {
	r, err := OpenClone(clone, nil)
	if err != nil {
		return Remote{}, err
	}
	defer r.Close()
	raw, ok, err := r.Config(ctx, "last-sync-url")
	if err != nil {
		return Remote{}, err
	}
	if !ok || raw == "" {
		return Remote{}, fmt.Errorf("read remote of %s: %w: the clone remembers no server", clone, ErrNotFound)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Remote{}, fmt.Errorf("read remote of %s: %w: last-sync-url %q", clone, ErrMalformed, raw)
	}
	rem := Remote{}
	if u.User != nil {
		rem.Login = u.User.Username()
		u.User = nil
	}
	rem.URL = u.String()
	pw, ok, err := r.Config(ctx, "last-sync-pw")
	if err != nil {
		return Remote{}, err
	}
	if !ok || pw == "" {
		return rem, fmt.Errorf("read remote of %s: %w", clone, ErrNoPassword)
	}
	rem.Password = Unobscure(pw)
	return rem, nil
}

// obscurer is the pattern Fossil XORs a remembered password with
// (src/encode.c).
var obscurer = [16]byte{0xa7, 0x21, 0x31, 0xe3, 0x2a, 0x50, 0x2c, 0x86, 0x4c, 0xa4, 0x52, 0x25, 0xff, 0x49, 0x35, 0x85}

// Unobscure decodes a value Fossil stored obscured: hex of a salt byte, then
// each byte of the text XOR the pattern XOR the salt. A value that is not
// such hex is returned as it is, as Fossil does.
func Unobscure(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) < 1 {
		return s
	}
	salt, text := b[0], b[1:]
	for i := range text {
		text[i] ^= obscurer[i&15] ^ salt
	}
	return string(text)
}

// Obscure encodes a value as Fossil stores a remembered password, with the
// given salt (Fossil picks one at random).
func Obscure(s string, salt byte) string {
	b := make([]byte, 1+len(s))
	b[0] = salt
	for i := 0; i < len(s); i++ {
		b[i+1] = s[i] ^ obscurer[i&15] ^ salt
	}
	return hex.EncodeToString(b)
}

// Remember makes a clone remember a server, login and password, as `fossil
// clone --save-http-password` does (the password obscured, the URL without
// it), for instance after the login's password was rotated. It writes the
// clone's config directly, so the password never appears on a command line.
func Remember(ctx context.Context, clone string, rem Remote) error {
	write, err := remembering(ctx, clone, rem)
	if err != nil {
		return err
	}
	a := &Admin{Repository: clone}
	return a.writeTx(ctx, "remember server", write)
}

// RememberFile is Remember on an agent's clone opened through a descriptor
// its caller opened following no link (unixhost.Root.OpenRegular), never
// by its name (see OpenCloneFile). SQLite writes the very file behind f
// (/proc/self/fd/N) and keeps its journal in memory: none can be made
// beside that name, and none beside the clone is the node's to trust. It
// does not close f.
func RememberFile(ctx context.Context, f *os.File, rem Remote) error {
	write, err := remembering(ctx, f.Name(), rem)
	if err != nil {
		return err
	}
	return writeCloneFile(ctx, f, "remember server", write)
}

// ForgetFile is Forget on an agent's clone opened through a descriptor, as
// RememberFile writes one. It does not close f.
func ForgetFile(ctx context.Context, f *os.File) error {
	return writeCloneFile(ctx, f, "forget the password", forgetting(ctx))
}

// writeCloneFile runs write in one transaction on the clone behind f
// (/proc/self/fd/N), its journal in memory.
func writeCloneFile(ctx context.Context, f *os.File, op string, write func(*sql.Tx) error) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s in %s: %w", op, f.Name(), err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s in %s: %w (not a regular file)", op, f.Name(), ErrNotRepository)
	}
	u := url.URL{Scheme: "file", Path: "/proc/self/fd/" + strconv.FormatUint(uint64(f.Fd()), 10)}
	q := url.Values{}
	q.Set("mode", "rw")
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", strconv.FormatInt(writeBusyTimeout.Milliseconds(), 10))
	q.Add("_pragma", "journal_mode(memory)")
	db, err := sql.Open("sqlite", u.String()+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("%s in %s: %w", op, f.Name(), err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	r := &Repo{path: f.Name()}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type='table' AND name IN ('blob','config')`).Scan(&n); err != nil {
		return r.wrap(op, err)
	}
	if n != 2 {
		return r.wrap(op, ErrNotRepository)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return r.wrap(op, err)
	}
	defer tx.Rollback()
	if err := write(tx); err != nil {
		return r.wrap(op, err)
	}
	return r.wrap(op, tx.Commit())
}

// remembering checks what a clone is to remember and returns the write
// that makes it.
func remembering(ctx context.Context, clone string, rem Remote) (func(*sql.Tx) error, error) {
	u, err := url.Parse(rem.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return nil, fmt.Errorf("remember in %s: %w: server URL %q", clone, ErrBadInput, rem.URL)
	}
	if err := checkLogin(rem.Login); err != nil || rem.Password == "" {
		return nil, fmt.Errorf("remember in %s: %w: a login and a password are needed", clone, ErrBadInput)
	}
	u.User = url.User(rem.Login)
	var salt [1]byte
	_, _ = rand.Read(salt[:])
	return func(tx *sql.Tx) error {
		for name, value := range map[string]string{"last-sync-url": u.String(), "last-sync-pw": Obscure(rem.Password, salt[0])} {
			if _, err := tx.ExecContext(ctx, `REPLACE INTO config(name, value, mtime) VALUES(?, ?, strftime('%s','now'))`, name, value); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// Forget makes a clone forget the password it remembers, keeping the
// server and the login: a clone whose agent holds no password (protocol v1
// E10, no_password). Fossil keeps the password it was cloned with in
// last-sync-pw; nothing else in a clone holds it. It also turns the
// clone's autosync off: a clone without a password cannot sync, and a
// commit that tried would fail; its check-ins leave by the push tool.
func Forget(ctx context.Context, clone string) error {
	a := &Admin{Repository: clone}
	return a.writeTx(ctx, "forget the password", forgetting(ctx))
}

// forgetting is Forget's write.
func forgetting(ctx context.Context) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM config WHERE name IN ('last-sync-pw', 'parent-project-pw')`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `REPLACE INTO config(name, value, mtime) VALUES('autosync', 'off', strftime('%s','now'))`)
		return err
	}
}
