package fossilio

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// checkin is one check-in of a repository: its full hash and its time.
type checkin struct {
	Hash string
	Time time.Time
}

// Checkin resolves a check-in by its full hash or by a prefix of at least
// MinPrefix hex digits, among the repository's check-ins only: a prefix
// that two check-ins share is refused with ErrAmbiguous naming them, one
// that no check-in has with ErrNotFound (even when another kind of
// artifact has it).
func (r *Repo) Checkin(ctx context.Context, hashOrPrefix string) (checkin, error) {
	var c checkin
	err := r.read(ctx, "resolve check-in", func(rd *reader) error {
		p := strings.ToLower(strings.TrimSpace(hashOrPrefix))
		if len(p) < MinPrefix || len(p) > sha3Len || !isLowerHex(p) {
			return &HashError{Op: "resolve check-in", Repo: r.path, Hash: hashOrPrefix, Err: ErrBadHash}
		}
		rows, err := rd.query(`SELECT b.uuid, e.mtime FROM blob b JOIN event e ON e.objid=b.rid AND e.type='ci'
			WHERE b.uuid>=? AND b.uuid<? AND b.size>=0 ORDER BY b.uuid LIMIT 4`, p, p+"g")
		if err != nil {
			return err
		}
		defer rows.Close()
		var matches []checkin
		for rows.Next() {
			var m checkin
			var jd float64
			if err := rows.Scan(&m.Hash, &jd); err != nil {
				return err
			}
			m.Time = julianToTime(jd)
			matches = append(matches, m)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		switch len(matches) {
		case 0:
			return &HashError{Op: "resolve check-in", Repo: r.path, Hash: hashOrPrefix, Err: ErrNotFound}
		case 1:
			c = matches[0]
			return nil
		}
		hs := make([]string, len(matches))
		for i, m := range matches {
			hs[i] = m.Hash
		}
		return &HashError{Op: "resolve check-in", Repo: r.path, Hash: hashOrPrefix, Matches: hs, Err: ErrAmbiguous}
	})
	return c, err
}

// CheckinHasFile says whether the check-in holds a file at name, reading
// its manifest and, for a delta manifest, its baseline.
func (r *Repo) CheckinHasFile(ctx context.Context, checkin, name string) (bool, error) {
	_, art, err := r.Artifact(ctx, checkin)
	if err != nil {
		return false, err
	}
	for _, f := range art.Files {
		if f.Name == name {
			return f.Hash != "", nil
		}
	}
	if art.Baseline == "" {
		return false, nil
	}
	_, base, err := r.Artifact(ctx, art.Baseline)
	if err != nil {
		return false, err
	}
	for _, f := range base.Files {
		if f.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// Export writes the files of a check-in of the repository file repo into
// dir, which must not exist yet: fossil tarball, read here. Only files and
// directories are written, with the check-in's executable bits; an entry
// that would land outside dir, or that is anything else (a link), is
// refused and nothing is left.
func (f *Fossil) Export(ctx context.Context, repo, checkin, dir string) (err error) {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%w: export into %q: not an absolute path", ErrBadInput, dir)
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%w: export into %s: it exists already", ErrBadInput, dir)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dir), ".export-*.tar.gz")
	if err != nil {
		return fmt.Errorf("export %s: %w", checkin, err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if _, err := f.Run(ctx, []string{"tarball", checkin, tmp.Name(), "-R", repo, "--name", "src"}); err != nil {
		return fmt.Errorf("export %s of %s: %w", checkin, repo, err)
	}
	in, err := os.Open(tmp.Name()) // trust:outside the export's own temporary file beside dir, which the release manager names in the release root
	if err != nil {
		return fmt.Errorf("export %s: %w", checkin, err)
	}
	defer in.Close()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("export %s: %w", checkin, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := untar(in, dir); err != nil {
		return fmt.Errorf("export %s of %s: %w", checkin, repo, err)
	}
	return nil
}

// untar writes a gzipped tar whose entries all lie under one top directory
// into dir, without that directory.
func untar(r io.Reader, dir string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		_, rel, ok := strings.Cut(name, "/")
		if !ok || rel == "" {
			if h.Typeflag == tar.TypeDir {
				continue // the top directory itself
			}
			return fmt.Errorf("tarball entry %q is not under its top directory", h.Name)
		}
		if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("tarball entry %q leaves the directory", h.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(rel))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode) // trust:outside dir, made just now by this export in the release root
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("tarball entry %q is not a file or a directory (type %q); a release is built from files only", h.Name, h.Typeflag)
		}
	}
}
