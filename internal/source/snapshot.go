// Package source defines what of the checkout the clusters reconcile from (the charts and the
// kustomize components), and takes snapshots of it: the offline render builds the units from a
// snapshot exactly as Flux builds them from the source artifact.
package source

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Dirs are the directories of the checkout that make up the source artifact.
var Dirs = []string{"charts", "kustomize-components"}

// Snapshot copies the source content of the checkout at repoRoot into dst.
func Snapshot(repoRoot, dst string) error {
	for _, d := range Dirs {
		if err := CopyTree(filepath.Join(repoRoot, d), filepath.Join(dst, d)); err != nil {
			return fmt.Errorf("snapshot %s: %w", d, err)
		}
	}
	return nil
}

// CopyTree copies the directories and regular files under src to dst, writable (sources in the
// module cache are read-only); links and special files are left out, as from an artifact.
func CopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case e.IsDir():
			return os.MkdirAll(target, 0o755)
		case e.Type().IsRegular():
			return copyFile(path, target)
		default:
			return nil
		}
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
