// Package statedir owns cluster-init's state directory on the user's machine: where it is, what
// lives in it, and the version of its layout. Nothing else builds a path in it.
//
//	layout                                 the version of this layout (Layout)
//	kind/<cluster>/                        the files mounted into a kind cluster's node
//	environments/<env>/management.kubeconfig   the self-managed (or adopted) management cluster
//	environments/<env>/clusters/<ns>.<name>.kubeconfig   `bootstrap kubeconfig`'s default output
//	environments/<env>/containers.json     the CAPD containers of the environment's clusters
//	environments/<env>/adopted             the API server of an adopted management cluster
//	standalone/<env>/                      a standalone cluster's state (internal/standalone)
//	diagnostics/                           the bundles written when a run fails
package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"cluster-init.dev/cluster-init/internal/atomicfile"
)

// Layout is the version of the layout this build reads and writes. A directory of a newer
// layout is refused (a newer cluster-init wrote it); an older one is brought to this one by Open.
const Layout = 1

// Dir is the state directory.
type Dir struct{ Path string }

// Default is the state directory of this user: $CLUSTER_INIT_STATE_DIR, else
// $XDG_STATE_HOME/cluster-init, else ~/.local/state/cluster-init.
func Default() (Dir, error) {
	if d := os.Getenv("CLUSTER_INIT_STATE_DIR"); d != "" {
		return Dir{Path: d}, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return Dir{Path: filepath.Join(d, "cluster-init")}, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return Dir{}, fmt.Errorf("state directory: %w", err)
	}
	return Dir{Path: filepath.Join(home, ".local", "state", "cluster-init")}, nil
}

// Open makes sure the directory exists in this build's layout: a new or empty one is marked with
// it, a directory without a mark is of layout 1 (the layout before it was versioned), and one
// of a newer layout is refused.
func Open(path string) (Dir, error) {
	d := Dir{Path: path}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return d, fmt.Errorf("state directory %s: %w", path, err)
	}
	data, err := os.ReadFile(d.layoutFile())
	switch {
	case errors.Is(err, os.ErrNotExist):
		return d, d.markLayout()
	case err != nil:
		return d, fmt.Errorf("state directory %s: %w", path, err)
	}
	version, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return d, fmt.Errorf("state directory %s: %s: expected a layout version (an integer), got %q", path, d.layoutFile(), strings.TrimSpace(string(data)))
	}
	if version > Layout {
		return d, fmt.Errorf("state directory %s is of layout %d, written by a newer cluster-init; this one reads layout %d: use the newer cluster-init, or another directory (CLUSTER_INIT_STATE_DIR)", path, version, Layout)
	}
	// Older layouts are migrated here, one version at a time, when there are any.
	return d, nil
}

func (d Dir) layoutFile() string { return filepath.Join(d.Path, "layout") }

func (d Dir) markLayout() error {
	if err := atomicfile.Write(d.layoutFile(), []byte(strconv.Itoa(Layout)+"\n"), 0o600); err != nil {
		return fmt.Errorf("state directory %s: %w", d.Path, err)
	}
	return nil
}

// KindClusters is where the files mounted into kind clusters' nodes live, a directory per cluster.
func (d Dir) KindClusters() string { return filepath.Join(d.Path, "kind") }

// Standalone is where the states of the standalone clusters live (internal/standalone).
func (d Dir) Standalone() string { return filepath.Join(d.Path, "standalone") }

// Diagnostics is where the bundles of failed runs are written.
func (d Dir) Diagnostics() string { return filepath.Join(d.Path, "diagnostics") }

// Environment is what the directory keeps of one environment.
func (d Dir) Environment(env string) Environment {
	return Environment{path: filepath.Join(d.Path, "environments", env)}
}

// Environment is the part of the state directory that belongs to one environment.
type Environment struct{ path string }

// ManagementKubeconfig is the kubeconfig of the environment's management cluster (self-managed
// after the pivot, or adopted).
func (e Environment) ManagementKubeconfig() string {
	return filepath.Join(e.path, "management.kubeconfig")
}

// WorkloadKubeconfig is where `bootstrap kubeconfig` writes the kubeconfig of a cluster of the
// environment's management cluster by default.
func (e Environment) WorkloadKubeconfig(namespace, name string) string {
	return filepath.Join(e.path, "clusters", namespace+"."+name+".kubeconfig")
}

// ContainersRecord is where the names of the containers of the environment's CAPD clusters are
// kept, for cleanup once the clusters that know them are gone (cleanup.RecordContainers).
func (e Environment) ContainersRecord() string { return filepath.Join(e.path, "containers.json") }

// AdoptedRecord is where bootstrap --adopt records that the environment's management cluster was
// adopted (its API server's address): cleanup leaves such a cluster, even when its own state is
// gone or it does not answer.
func (e Environment) AdoptedRecord() string { return filepath.Join(e.path, "adopted") }
