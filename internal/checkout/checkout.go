// Package checkout locates the cluster-init repository the CLI works on and shows paths
// relative to it.
package checkout

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// marker is a file only a cluster-init checkout has.
const marker = "charts/cluster-init/Chart.yaml"

// Root returns the checkout containing dir (or one of its parents).
func Root(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, marker)); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not inside a cluster-init checkout (no %s in it or its parents); use --repo", abs, marker)
		}
	}
}

// Relative returns path relative to root when it is inside root, else path unchanged.
func Relative(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return path
	}
	return filepath.ToSlash(rel)
}
