package fossilio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// User is a login of a repository and its capability letters, as stored.
type User struct {
	Login string
	Caps  string
	Info  string // contact information
}

// fullCaps is what admin (a) and setup (s) expand to (src/capabilities.c).
const fullCaps = "bcdefghijklmnopqrtwz234567AD"

// Users lists the repository's users, pseudo-users included, by login.
func (r *Repo) Users(ctx context.Context) ([]User, error) {
	var out []User
	err := r.read(ctx, "list users", func(rd *reader) error {
		var err error
		out, err = rd.users()
		return err
	})
	return out, err
}

// The user table a reader reads: the repository's own, or on a vouched
// clone the server's, as of the last pull (vouch.go). A node on another
// host never reads its clone's own users, which are its own, not the
// server's.
const (
	usersQuery        = `SELECT login, coalesce(cap, ''), coalesce(info, '') FROM user ORDER BY login`
	vouchedUsersQuery = `SELECT login, cap, '' FROM fx_ocx_user ORDER BY login`
	userQuery         = `SELECT login, coalesce(cap, ''), coalesce(info, '') FROM user WHERE login=?`
	vouchedUserQuery  = `SELECT login, cap, '' FROM fx_ocx_user WHERE login=?`
	capsQuery         = `SELECT login, coalesce(cap, '') FROM user WHERE login IN (?, 'nobody', 'anonymous', 'reader', 'developer')`
	vouchedCapsQuery  = `SELECT login, cap FROM fx_ocx_user WHERE login IN (?, 'nobody', 'anonymous', 'reader', 'developer')`
)

// pick is q, or its vouched form on a vouched clone.
func (r *Repo) pick(q, vouched string) string {
	if r.vouched {
		return vouched
	}
	return q
}

// users is Users in rd's transaction.
func (rd *reader) users() ([]User, error) {
	rows, err := rd.query(rd.r.pick(usersQuery, vouchedUsersQuery))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []User
	for rows.Next() {
		var u User
		if err := rows.Scan(&u.Login, &u.Caps, &u.Info); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// User returns one user; ErrNoSuchUser when the login does not exist.
func (r *Repo) User(ctx context.Context, login string) (User, error) {
	var u User
	err := r.read(ctx, "read user", func(rd *reader) error {
		found, err := rd.row(r.pick(userQuery, vouchedUserQuery), []any{login}, &u.Login, &u.Caps, &u.Info)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("read user %q in %s: %w", login, r.path, ErrNoSuchUser)
		}
		return nil
	})
	return u, err
}

// EffectiveCaps returns the capabilities a logged-in user really has: its
// own, plus those of nobody and anonymous (every logged-in user gets them),
// with u and v expanded to reader's and developer's and a and s to what
// they imply, as a sorted string of letters.
func (r *Repo) EffectiveCaps(ctx context.Context, login string) (string, error) {
	caps := map[string]string{}
	err := r.read(ctx, "read capabilities", func(rd *reader) error {
		rows, err := rd.query(r.pick(capsQuery, vouchedCapsQuery), login)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l, c string
			if err := rows.Scan(&l, &c); err != nil {
				return err
			}
			caps[l] = c
		}
		return rows.Err()
	})
	if err != nil {
		return "", err
	}
	own, ok := caps[login]
	if !ok {
		return "", fmt.Errorf("read capabilities of %q in %s: %w", login, r.path, ErrNoSuchUser)
	}
	return expandCaps(own+caps["nobody"]+caps["anonymous"], caps["reader"], caps["developer"]), nil
}

// expandCaps resolves u, v, a and s and returns the distinct letters sorted.
func expandCaps(caps, reader, developer string) string {
	if strings.ContainsRune(caps, 'u') {
		caps += reader
	}
	if strings.ContainsRune(caps, 'v') {
		caps += developer
	}
	if strings.ContainsAny(caps, "as") {
		caps += fullCaps
	}
	return sortedCaps(caps)
}

func sortedCaps(caps string) string {
	b := []byte(caps)
	slices.Sort(b)
	return string(slices.Compact(b))
}

// pseudo says whether login is one of Fossil's capability holders, which
// no receipt names as a sender.
func pseudo(login string) bool {
	switch login {
	case "nobody", "anonymous", "reader", "developer":
		return true
	}
	return false
}

// Privileged says whether login holds admin (a) or setup (s) here, its own
// or through nobody and anonymous (D7): the users whose notes count, who may
// stop a session, and whom a session hears by default. A login the
// repository does not hold is not privileged.
func (r *Repo) Privileged(ctx context.Context, login string) (bool, error) {
	if login == "" || pseudo(login) {
		return false, nil
	}
	caps, err := r.EffectiveCaps(ctx, login)
	if errors.Is(err, ErrNoSuchUser) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return strings.ContainsAny(caps, "as"), nil
}

// PrivilegedUsers lists, by login, the users holding admin or setup
// (Privileged), pseudo-users left out: one read of the user table.
func (r *Repo) PrivilegedUsers(ctx context.Context) ([]string, error) {
	users, err := r.Users(ctx)
	if err != nil {
		return nil, err
	}
	return PrivilegedAmong(users), nil
}

// PrivilegedAmong lists, by login, the users of a user table (Users)
// holding admin or setup as Privileged says it, pseudo-users left out.
func PrivilegedAmong(users []User) []string {
	caps := make(map[string]string, len(users))
	for _, u := range users {
		caps[u.Login] = u.Caps
	}
	out := []string{}
	for _, u := range users {
		if pseudo(u.Login) {
			continue
		}
		if c := expandCaps(u.Caps+caps["nobody"]+caps["anonymous"], caps["reader"], caps["developer"]); strings.ContainsAny(c, "as") {
			out = append(out, u.Login)
		}
	}
	return out
}
