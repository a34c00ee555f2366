package fossilio

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// osFiles keeps password files through the os package, following links:
// for a file a caller names outside the agents root (`--password-file`)
// and for tests. Below the agents root the node uses unixhost.Below,
// which follows none (docs/trust.md).
type osFiles struct{}

// ReadSecret reads the regular file at p, at most max bytes, refusing one
// its group or others may read.
func (osFiles) ReadSecret(p string, max int64) ([]byte, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("mode %v lets others read it", st.Mode().Perm())
	}
	f, err := os.Open(p) // trust:outside a file the caller names, outside the agents root
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, max)
	}
	return b, nil
}

// WriteFile writes data to p atomically, with exactly perm.
func (osFiles) WriteFile(p string, data []byte, perm fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+"-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// MkdirAll is os.MkdirAll.
func (osFiles) MkdirAll(p string, perm fs.FileMode) error { return os.MkdirAll(p, perm) }

// Rename is os.Rename.
func (osFiles) Rename(from, to string) error { return os.Rename(from, to) }

// Remove is os.Remove.
func (osFiles) Remove(p string) error { return os.Remove(p) }
