package standalone

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"cluster-init.dev/cluster-init/internal/atomicfile"
)

// maxArchiveFile bounds what an import extracts per file: a state's largest files are the
// providers' manifests, a few MiB.
const maxArchiveFile = 64 << 20

// Export writes the state of d to the file out (0600), locked against a command that changes it:
// a state with an interrupted command is refused, as not complete. It returns the state and the
// number of files written.
func Export(d Dir, out string) (*State, int, error) {
	lock, err := d.Lock("bootstrap standalone export")
	if err != nil {
		return nil, 0, err
	}
	defer lock.Release()
	st, err := d.Load()
	if err != nil {
		return nil, 0, err
	}
	if st.Pending != nil {
		return st, 0, fmt.Errorf("standalone cluster %s has an interrupted `%s`: finish it first (run it again), the state is not complete", st.Cluster, st.Pending.Command)
	}
	var buf bytes.Buffer
	n, err := d.Archive(&buf)
	if err != nil {
		return st, 0, fmt.Errorf("export the state of %s: %w", st.Cluster, err)
	}
	return st, n, atomicfile.Write(out, buf.Bytes(), fileMode)
}

// Archive writes the state as a gzipped tar: what it holds is what the directory holds, the
// secrets still encrypted; the age key is not in it.
func (d Dir) Archive(w io.Writer) (files int, err error) {
	names, err := d.Files()
	if err != nil {
		return 0, err
	}
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(d.Path, filepath.FromSlash(name)))
		if err != nil {
			return 0, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: fileMode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return 0, err
		}
		if _, err := tw.Write(data); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return len(names), zw.Close()
}

// allowedInArchive tells whether an archive entry is a file a state directory holds.
func allowedInArchive(name string) bool {
	if name != path.Clean(name) || path.IsAbs(name) || strings.HasPrefix(name, "../") || strings.HasPrefix(name, ".") {
		return false
	}
	dir, base := path.Split(name)
	switch dir {
	case "":
		return base == stateFile || base == valuesFile || base == kubeconfigFile
	case objectsDir + "/", managementDir + "/":
		return !strings.HasPrefix(base, ".")
	}
	return false
}

// Import reads an archive Export (Archive) wrote and makes it the state of its environment under
// root, after checking it with the key. An environment that already has a state is refused:
// two states of one cluster would each think they own it.
func Import(root string, r io.Reader, k *Key) (Dir, *State, error) {
	if err := os.MkdirAll(root, dirMode); err != nil {
		return Dir{}, nil, fmt.Errorf("import: %w", err)
	}
	staging, err := os.MkdirTemp(root, ".import-")
	if err != nil {
		return Dir{}, nil, err
	}
	defer os.RemoveAll(staging)
	if err := extract(r, staging); err != nil {
		return Dir{}, nil, fmt.Errorf("not a standalone state archive: %w", err)
	}
	tmp := Dir{Path: staging, Environment: "(import)"}
	st, err := tmp.Check(k)
	if err != nil {
		return Dir{}, nil, err
	}
	d, err := DirOf(root, st.Environment)
	if err != nil {
		return Dir{}, nil, err
	}
	// Under the lock: a creation of the same environment may be running, its state not yet saved.
	lock, err := d.Lock("bootstrap standalone import")
	if err != nil {
		return Dir{}, nil, err
	}
	defer lock.Release()
	if exists, err := d.Exists(); err != nil {
		return Dir{}, nil, err
	} else if exists {
		return Dir{}, nil, fmt.Errorf("a standalone cluster of environment %s already has a state (%s): delete the cluster, or move that directory away, before importing another", st.Environment, d.Path)
	}
	// state.json last: until it is there, the directory holds no state.
	entries, err := os.ReadDir(staging)
	if err != nil {
		return Dir{}, nil, err
	}
	for _, e := range append(entries, nil) {
		name := stateFile
		if e != nil {
			if e.Name() == stateFile {
				continue
			}
			name = e.Name()
		}
		_ = os.RemoveAll(filepath.Join(d.Path, name))
		if err := os.Rename(filepath.Join(staging, name), filepath.Join(d.Path, name)); err != nil {
			return Dir{}, nil, fmt.Errorf("import into %s: %w", d.Path, err)
		}
	}
	return d, st, nil
}

func extract(r io.Reader, dir string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || !allowedInArchive(h.Name) {
			return fmt.Errorf("unexpected entry %q", h.Name)
		}
		if h.Size > maxArchiveFile {
			return fmt.Errorf("entry %q: %d bytes, more than a state holds", h.Name, h.Size)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(target), dirMode); err != nil {
			return err
		}
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, io.LimitReader(tr, maxArchiveFile))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}
