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
		src := filepath.Join(repoRoot, d)
		err := filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(repoRoot, path)
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
				return nil // symlinks and special files are not part of an artifact
			}
		})
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", d, err)
		}
	}
	return nil
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
