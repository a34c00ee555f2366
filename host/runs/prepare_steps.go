package runs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// workspace is one run's steps in the making: what the steps before have
// set, and the run user's password, which is never a value.
type workspace struct {
	p        *Layers
	user     string
	vals     runmsg.RunValues
	password string // the password step's: fresh on the server's node, or the file's
	code     string // the project code, when known
	// disk and image are the size and image of the workspace's own file
	// system, which the directory step makes when the run asks
	// limits.disk (D82); 0 for none.
	disk  uint64
	image string
	// cloneCode is the project code a clone holds, when the node knew none
	// before it: the shared secret's, for secrets.
	cloneCode string
	// msg and hash are the run as it arrived and its hash: a command
	// step runs in its layers (D99); logs are what its command steps
	// printed.
	msg  *runmsg.Run
	hash string
	logs []StepLog
}

// secrets are the strings a note, or a kept log (D98), must never hold:
// the password, its URL escapes, its shared secret, and each of them as a
// clone remembers it (Fossil's last-sync-pw: obscured with a salt byte of
// its own choosing, afresh at each sync, so in all 256 forms).
func (w *workspace) secrets() []string {
	if w.password == "" {
		return nil
	}
	s := []string{w.password, url.QueryEscape(w.password), url.PathEscape(w.password)}
	remembered := []string{w.password}
	for _, code := range []string{w.code, w.cloneCode} {
		if code != "" {
			shared := fossilio.SharedSecret(code, w.user, w.password)
			s = append(s, shared)
			remembered = append(remembered, shared)
		}
	}
	for _, r := range remembered {
		for salt := range 256 {
			s = append(s, fossilio.Obscure(r, byte(salt)))
		}
	}
	return s
}

// step runs one step, its values in place, and returns the check-in a
// checkout resolved to ("" for the other kinds).
func (w *workspace) step(ctx context.Context, i int, s runmsg.RunStep) (string, error) {
	switch s.Step {
	case runmsg.StepDirectory:
		return "", w.directory(ctx, s.At)
	case runmsg.StepPassword:
		return "", w.takePassword(ctx)
	case runmsg.StepClone:
		return "", w.clone(ctx, s.Into)
	case runmsg.StepCheckout:
		return w.checkout(ctx, s.Of, s.Into)
	case runmsg.StepCommand:
		return "", w.command(ctx, i)
	}
	return "", fmt.Errorf("%q is not a step kind section 5 has", s.Step)
}

func (w *workspace) root() (*unixhost.Root, error) {
	r, err := unixhost.OpenRoot(w.p.Values.Root)
	if err != nil {
		return nil, fmt.Errorf("the node's run root: %w", err)
	}
	return r, nil
}

// directory makes at, removing what was there, readable by the node's
// account alone (0700). Nothing is followed through a link: a link in the
// way of at (one of its parents below the root) fails the step; a link at at
// itself is removed, as anything else there is, never followed.
//
// With limits.disk the directory is the top of a file system of its own
// of that size (D82), made first, mounted there: what the run writes there
// is held to it by the kernel, and takes no room from the node's files.
// What is mounted at or below at (another run's disk) fails the step: it
// is never removed through.
func (w *workspace) directory(ctx context.Context, at string) (err error) {
	r, err := w.root()
	if err != nil {
		return err
	}
	defer r.Close()
	if w.disk > 0 {
		// This run's own, made by a preparation before the daemon's
		// restart.
		if err := unixhost.RemoveDisk(ctx, w.image); err != nil {
			return fmt.Errorf("removing the run's disk made before: %w", err)
		}
	}
	mounted, err := unixhost.MountsBelow(at)
	if err != nil {
		return fmt.Errorf("what is mounted at %s: %w", at, err)
	}
	if len(mounted) > 0 {
		return fmt.Errorf("a file system is mounted at %s (another run's disk?), which the step would remove", strings.Join(mounted, ", "))
	}
	if err := r.RemoveAll(at); err != nil {
		return fmt.Errorf("removing what was at %s: %w", at, err)
	}
	if err := r.MkdirAll(at, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", at, err)
	}
	d, err := r.OpenDir(at)
	if err != nil {
		return fmt.Errorf("making %s: %w", at, err)
	}
	defer d.Close()
	if err := d.File().Chmod(0o700); err != nil {
		return fmt.Errorf("making %s readable by the node's account alone: %w", at, err)
	}
	if w.disk == 0 {
		return nil
	}
	if err := unixhost.MakeDisk(w.image, w.disk); err != nil {
		return fmt.Errorf("the workspace's own file system (limits.disk): %w", err)
	}
	if err := unixhost.MountDisk(ctx, w.image, at); err != nil {
		if rerr := unixhost.RemoveDisk(ctx, w.image); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("the workspace's own file system (limits.disk): %w", err)
	}
	return nil
}

// checkPassword is the password step's check before anything is made: on
// the server's node, the user exists there and is a run's user (neither the
// node's, nor holding admin or setup); on another host, the file of
// passwords holds its password (row 6), which it keeps.
func (w *workspace) checkPassword(ctx context.Context, i int, s runmsg.RunStep) error {
	p := w.p
	if p.Repository == "" {
		noPassword := refused(runmsg.RefusedNoPassword,
			fmt.Sprintf("this node holds no password for %q, which the password step takes", w.user), nil)
		if p.Passwords == "" {
			return noPassword
		}
		pws, err := ReadPasswords(p.Passwords)
		if errors.Is(err, ErrNoPasswordsFile) {
			noPassword.Err = err
			return noPassword
		}
		if err != nil {
			return stepFailed(i, s, err, nil)
		}
		pw, ok := pws.Password(w.user)
		if !ok {
			return noPassword
		}
		w.password, w.code = pw, p.ProjectCode
		return nil
	}
	if w.user == p.Values.Node {
		return refused(runmsg.RefusedUser, fmt.Sprintf("process.user %q is this node's own user", w.user), nil)
	}
	repo, err := fossilio.OpenNode(p.Repository, nil)
	if err != nil {
		return stepFailed(i, s, fmt.Errorf("the server's repository: %w", err), nil)
	}
	defer repo.Close()
	if _, err := repo.User(ctx, w.user); errors.Is(err, fossilio.ErrNoSuchUser) {
		return stepFailed(i, s, fmt.Errorf("the user %q does not exist on the server: a run's user is a Fossil user an admin makes first", w.user), nil)
	} else if err != nil {
		return stepFailed(i, s, fmt.Errorf("the user %q on the server: %w", w.user, err), nil)
	}
	if priv, err := repo.Privileged(ctx, w.user); err != nil {
		return stepFailed(i, s, fmt.Errorf("the user %q on the server: %w", w.user, err), nil)
	} else if priv {
		return refused(runmsg.RefusedUser, fmt.Sprintf("process.user %q holds admin or setup on the server; the node sets no such user's password", w.user), nil)
	}
	w.code = p.ProjectCode
	if w.code == "" {
		if w.code, err = repo.ProjectCode(ctx); err != nil {
			return stepFailed(i, s, err, nil)
		}
	}
	return nil
}

// takePassword is the password step: on the server's node, a fresh
// password set for the user (its web sessions end); on another host, the
// one checkPassword read.
func (w *workspace) takePassword(ctx context.Context) error {
	p := w.p
	if p.Repository == "" {
		if w.password == "" {
			return fmt.Errorf("this node holds no password for %q", w.user)
		}
		return nil
	}
	newPassword := p.NewPassword
	if newPassword == nil {
		newPassword = fossilio.NewPassword
	}
	pw := newPassword()
	a := &fossilio.Admin{Repository: p.Repository}
	if err := a.SetPassword(ctx, w.user, pw); errors.Is(err, fossilio.ErrNoSuchUser) {
		return fmt.Errorf("the user %q does not exist on the server", w.user)
	} else if err != nil {
		return fmt.Errorf("setting the password of %q on the server: %w", w.user, err)
	}
	w.password = pw
	return nil
}

// home is the fossil commands' HOME and FOSSIL_HOME: the workspace, which is
// the process's HOME too, or, without one, the directory the step makes in.
func (w *workspace) home(into string) string {
	if ws := w.vals[runmsg.ValueWorkspace]; ws != "" {
		return ws
	}
	return filepath.Dir(into)
}

func (w *workspace) fossil(into string) *fossilio.Fossil {
	return &fossilio.Fossil{Exe: w.p.Fossil, Home: w.home(into), User: w.user, Dir: filepath.Dir(into)}
}

// mkdirs makes the directory that will hold into, below the root, through
// no link.
func (w *workspace) mkdirs(dir string) error {
	if dir == w.p.Values.Root {
		return nil
	}
	r, err := w.root()
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	return nil
}

// clone clones the server as the run's user into into, remembering the
// password (with the project code, the shared secret, which is then never
// on a command line). A clone that fails leaves no file.
func (w *workspace) clone(ctx context.Context, into string) error {
	if w.password == "" {
		return errors.New("no password step came before it")
	}
	if err := w.mkdirs(filepath.Dir(into)); err != nil {
		return err
	}
	o := fossilio.CloneOptions{URL: w.p.Values.Server, Login: w.user, Password: w.password, ProjectCode: w.code}
	if err := w.fossil(into).Clone(ctx, o, into); err != nil {
		return err
	}
	if w.code == "" && w.cloneCode == "" {
		// A clone made with the password itself remembers the shared
		// secret once it syncs: its project code names that secret.
		repo, err := fossilio.OpenClone(into, nil)
		if err != nil {
			return err
		}
		defer repo.Close()
		if w.cloneCode, err = repo.ProjectCode(ctx); err != nil {
			return err
		}
	}
	return nil
}

// checkout opens a checkout of the check-in of names in the clone, into
// into: of is resolved once, by Fossil (fossil info), to its full hash,
// which is what is opened and what it returns. A checkout that fails leaves
// no tree.
func (w *workspace) checkout(ctx context.Context, of, into string) (string, error) {
	clone := w.vals[runmsg.ValueClone]
	if clone == "" {
		return "", errors.New("no clone step came before it")
	}
	if of == "" || strings.HasPrefix(of, "-") {
		return "", fmt.Errorf("%q is not a name of a check-in", of)
	}
	f := w.fossil(into)
	out, err := f.Run(ctx, []string{"info", "-R", clone, of})
	if err != nil {
		why := err.Error()
		var ce *fossilio.CommandError
		if errors.As(err, &ce) && ce.Output != "" {
			why = ce.Output
		}
		return "", fmt.Errorf("fossil cannot resolve %q in the clone %s: %s", of, clone, why)
	}
	prefix, ok := infoHash(out)
	if !ok {
		return "", fmt.Errorf("fossil info %q in the clone %s named no check-in", of, clone)
	}
	repo, err := fossilio.OpenClone(clone, nil)
	if err != nil {
		return "", err
	}
	defer repo.Close()
	full, err := repo.Resolve(ctx, prefix)
	if err != nil {
		return "", fmt.Errorf("%q resolved to %s, which the clone %s does not hold whole: %w", of, prefix, clone, err)
	}
	if info, err := repo.Info(ctx, full); err != nil {
		return "", err
	} else if info.Kind != fossilio.KindCheckin {
		return "", fmt.Errorf("%q names %s, which is not a check-in", of, full)
	}
	if err := w.mkdirs(into); err != nil {
		return "", err
	}
	if err := f.OpenCheckout(ctx, clone, into, full); err != nil {
		if r, rerr := w.root(); rerr == nil {
			if rmErr := r.RemoveAll(into); rmErr != nil {
				err = fmt.Errorf("%w; and removing %s failed: %v", err, into, rmErr)
			}
			r.Close()
		}
		return "", err
	}
	return full, nil
}

// infoHash reads the check-in `fossil info NAME` names: the first word of
// its "hash:" line (Fossil shows at most 40 digits of it: a prefix, which
// the clone resolves).
func infoHash(out string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "hash:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return "", false
		}
		for _, c := range f[0] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return "", false
			}
		}
		return f[0], true
	}
	return "", false
}
