// Package statedir owns cluster-init's state directory on the user's machine: where it is, what
// lives in it, and the version of its layout. Nothing else builds a path in it.
//
//	layout                                 the version of the layout, when it is not 1 (Layout)
//	kind/<cluster>/                        the files mounted into a kind cluster's node
//	environments/<env>/management.kubeconfig   the self-managed (or adopted) management cluster
//	environments/<env>/clusters/<ns>.<name>.kubeconfig   `bootstrap kubeconfig`'s default output
//	environments/<env>/containers.json     the CAPD containers of the environment's clusters
//	environments/<env>/adopted             the API server of an adopted management cluster
//	standalone/<env>/                      a standalone cluster's state (internal/standalone)
//	diagnostics/                           the bundles written when a run fails
//
// Two paths are outside it, on purpose, and defined here too: the build cache (BuildCache), and
// the age key of standalone states (StandaloneKeyFile).
package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Layout is the version of the layout this build reads and writes. A directory of a newer
// layout is refused (a newer cluster-init wrote it); an older one would be brought to this one by
// Open.
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

// Open opens the directory in this build's layout, writing nothing (a command refused for bad
// input leaves no state behind): a directory of a newer layout is refused; one without a mark is
// of layout 1 (the layout before it was versioned, and this one). A build that changes the layout
// migrates the older ones here, one version at a time, and marks the directory with its own.
func Open(path string) (Dir, error) {
	d := Dir{Path: path}
	data, err := os.ReadFile(d.layoutFile())
	switch {
	case errors.Is(err, os.ErrNotExist):
		return d, nil
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
	return d, nil
}

func (d Dir) layoutFile() string { return filepath.Join(d.Path, "layout") }

// KindClusters is where the files mounted into kind clusters' nodes live, a directory per cluster.
func (d Dir) KindClusters() string { return filepath.Join(d.Path, "kind") }

// Standalone is where the states of the standalone clusters live (internal/standalone).
func (d Dir) Standalone() string { return filepath.Join(d.Path, "standalone") }

// Diagnostics is where the bundles of failed runs are written.
func (d Dir) Diagnostics() string { return filepath.Join(d.Path, "diagnostics") }

// Environments is where what the directory keeps of each environment lives.
func (d Dir) Environments() string { return filepath.Join(d.Path, "environments") }

// Environment is what the directory keeps of one environment.
func (d Dir) Environment(env string) Environment {
	return Environment{path: filepath.Join(d.Environments(), env)}
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
// kept, for cleanup once the clusters that know them are gone (records.RecordContainers).
func (e Environment) ContainersRecord() string { return filepath.Join(e.path, "containers.json") }

// TakenBackRecord is where cleanup records that it moved the environment's self-managed cluster
// into a kind cluster to delete it there: a cleanup run again after that knows the management
// cluster is no longer the record of what was created.
func (e Environment) TakenBackRecord() string { return filepath.Join(e.path, "taken-back") }

// RestoreRecord is where `bootstrap restore` records, once the backup is checked and before it
// creates anything, the backup it restores: a run again continues from that backup, and treats the
// environment's management kubeconfig as the new cluster's, never as the lost one's.
func (e Environment) RestoreRecord() string { return filepath.Join(e.path, "restore") }

// AdoptedRecord is where bootstrap --adopt records that the environment's management cluster was
// adopted (its API server's address): cleanup leaves such a cluster, even when its own state is
// gone or it does not answer.
func (e Environment) AdoptedRecord() string { return filepath.Join(e.path, "adopted") }

// BuildCache is where unit builds are kept between commands, outside the state directory (a
// cache, which may go at any time): $CLUSTER_INIT_BUILD_CACHE ("off" for none), else
// cluster-init/builds in the user's cache directory; "" for none.
func BuildCache() string {
	if d := os.Getenv("CLUSTER_INIT_BUILD_CACHE"); d != "" {
		if d == "off" {
			return ""
		}
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "cluster-init", "builds")
}

// StandaloneKeyFile is where cluster-init keeps its own age key for standalone states: in the
// user's configuration directory ($XDG_CONFIG_HOME, else ~/.config), outside every state
// directory, so that a state that is copied or backed up never carries what decrypts it.
func StandaloneKeyFile() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("the age key of standalone states: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "cluster-init", "standalone.agekey"), nil
}
