package consolepage

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ocx-go/ocx/host/unixhost"
)

// keyFile is the console's secret in the agents root: 32 random bytes, as
// hex, mode 0600, readable by the node's user alone. A form's token is an
// HMAC of the viewer's login cookie under it.
const keyFile = "console.key"

// LoadKey reads the console's key, making it the first time. Two consoles
// starting at once make it once: the key is written whole beside its name
// and linked in, which fails if another got there first.
func LoadKey(agents string) ([]byte, error) {
	path := filepath.Join(agents, keyFile)
	key, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("console: make the key: %w", err)
	}
	tmp, err := os.CreateTemp(agents, ".console.key.*")
	if err != nil {
		return nil, fmt.Errorf("console: make the key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(raw) + "\n")
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return nil, fmt.Errorf("console: write the key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("console: put the key in place: %w", err)
	}
	return readKey(path)
}

func readKey(path string) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("console: %s is not a regular file of mode 0600 (%s); remove it and the console makes another", path, st.Mode())
	}
	data, err := unixhost.Below(filepath.Dir(path)).ReadSecret(path, unixhost.SmallFile)
	if err != nil {
		return nil, fmt.Errorf("console: read the key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("console: %s does not hold 32 bytes of hex; remove it and the console makes another", path)
	}
	return key, nil
}

// Token is a form's token for a viewer's login cookie: it proves that the
// form was served to the holder of that cookie (a page elsewhere can make
// the browser send the cookie, but cannot read the token).
func Token(key []byte, cookie string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("ocx console token\x00"))
	m.Write([]byte(cookie))
	return hex.EncodeToString(m.Sum(nil))
}

// Refusal is a request the console will not act on: the status it gets
// and the reason, shown to the viewer.
type Refusal struct {
	Status int
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }
