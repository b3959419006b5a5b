package boundedfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxTreeFiles and MaxTreeBytes bound what one walk of a directory reads: a directory of
// workload clusters or applications holds tens of files, not thousands. A kind of file may bound
// its directories further (Kind.TreeBytes).
const (
	MaxTreeFiles = 2000
	MaxTreeBytes = 32 << 20
)

// TreeBytes is the most a directory of files of kind k may hold in all.
func (k Kind) TreeBytes() int {
	if k.MaxTreeBytes > 0 {
		return k.MaxTreeBytes
	}
	return MaxTreeBytes
}

// Tree is what ReadTree read of a directory.
type Tree struct {
	// Files are the files read, by path relative to the root, with slashes.
	Files map[string][]byte
	// Order is the paths of Files in the order of the walk (lexical).
	Order []string
	// Unread are the problems of the entries not read: links (never followed, as
	// source-controller leaves them out of the artifact), devices, FIFOs, sockets.
	Unread []error
}

// Select says what ReadTree does with an entry (rel: relative to the root, with slashes).
type Select func(rel string, d fs.DirEntry) Choice

// Choice is what ReadTree does with an entry.
type Choice int

const (
	// Read reads the file (a directory: walks it).
	Read Choice = iota
	// Skip leaves the entry alone (a directory: all it holds), as one the build never reads.
	Skip
)

// ReadTree reads the regular files under dir (relative to root) that sel keeps (nil: all), each
// with the bounds of k, at most MaxTreeFiles files and k.TreeBytes bytes in all; manifests
// (IsManifest) are checked as k (Kind.CheckIn), their aliases against one budget for all. A link, a device, a FIFO or a socket that sel keeps
// is never opened: it is one of Tree.Unread, as is dir itself when it is a link. More than a
// bound is an error.
func ReadTree(root, dir string, k Kind, sel Select) (*Tree, error) {
	t := &Tree{Files: map[string][]byte{}}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	start := filepath.ToSlash(filepath.Clean(dir))
	if err := noLinkOn(r, filepath.FromSlash(start), start); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return t, nil
		}
		t.Unread = append(t.Unread, err)
		return t, nil
	}
	total := 0
	budget := NewBudget("the directory")
	err = fs.WalkDir(r.FS(), start, func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if sel != nil && sel(rel, d) == Skip {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			t.Unread = append(t.Unread, LinkError(rel))
			return nil
		case !d.Type().IsRegular():
			t.Unread = append(t.Unread, SpecialError(rel, d.Type()))
			return nil
		}
		if len(t.Files) >= MaxTreeFiles {
			return fmt.Errorf("%s: more than %d files: expected a directory of at most %d", start, MaxTreeFiles, MaxTreeFiles)
		}
		data, err := readIn(r, filepath.FromSlash(rel), k, NoLinks)
		if err != nil {
			return err
		}
		if total += len(data); total > k.TreeBytes() {
			return fmt.Errorf("%s: more than %d MiB of files: expected a directory of at most %d MiB", start, k.TreeBytes()>>20, k.TreeBytes()>>20)
		}
		if IsManifest(rel) {
			if err := k.CheckIn(rel, data, budget); err != nil {
				return err
			}
		}
		t.Files[rel] = data
		t.Order = append(t.Order, rel)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// IsManifest tells whether kustomize reads a file as YAML of its own accord: a kustomization, or
// a file kustomize-controller lists from a directory without one (by these extensions).
func IsManifest(name string) bool {
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") || path.Base(name) == "Kustomization"
}

// Write writes the tree's files under dst, at their paths relative to the root.
func (t *Tree) Write(dst string) error {
	for _, rel := range t.Order {
		file := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(file, t.Files[rel], 0o644); err != nil {
			return err
		}
	}
	return nil
}
