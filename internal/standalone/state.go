// Package standalone keeps the state of standalone clusters on the user's machine: clusters that
// run with no management cluster, whose Cluster API objects wait in a directory until a command
// (scale, delete) brings a temporary management cluster back for the time of a change.
//
// A cluster's state directory (mode 0700, every file 0600) holds:
//
//	state.json        what the cluster is, what manages it, the operation under way
//	objects/          its Cluster API objects as clusterctl move --to-directory writes them; the
//	                  Secrets (CA and service account keys, kubeconfig, bootstrap data) age-encrypted
//	management/       what the temporary management cluster runs, as built when the cluster was
//	                  created: its CNI and the providers (a file per unit, applied in order)
//	values.yaml.age   the values it was created with, encrypted (they hold the credentials)
//	kubeconfig        the cluster's admin kubeconfig
//	lock              held (flock) by the command working on the cluster
//
// The state depends on no checkout: it can be exported, backed up and imported on another
// machine, and managing the cluster again needs only it and the age key.
package standalone

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"cluster-init.dev/cluster-init/internal/atomicfile"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/registrymirror"
	"cluster-init.dev/cluster-init/internal/steps"
)

// CNIUnit is the first management unit: the temporary cluster's pod network.
const CNIUnit = "bootstrap-cni"

// FormatVersion is the version of the state directory's layout; a state of a newer version is
// refused rather than guessed at, one of an older version is read as its version wrote it.
// Version 2 records the steps of the operation under way as the step machine does (version 1:
// the flags restored, applied, finished).
const FormatVersion = 2

// The files and directories of a state directory.
const (
	stateFile      = "state.json"
	objectsDir     = "objects"
	managementDir  = "management"
	valuesFile     = "values.yaml" + sealedSuffix
	kubeconfigFile = "kubeconfig"
	lockFile       = "lock"
	stagingSuffix  = ".new"
	replacedSuffix = ".old"
	sealedSuffix   = ".age"
	dirMode        = 0o700
	fileMode       = 0o600
)

// State is what state.json says of a standalone cluster.
type State struct {
	Version     int    `json:"version"`
	Environment string `json:"environment"`
	Cluster     string `json:"cluster"`
	Namespace   string `json:"namespace"`
	// Bootstrap and Infrastructure are the cluster's providers (kubeadm|rke2, capd|capo).
	Bootstrap         string `json:"bootstrap_provider"`
	Infrastructure    string `json:"infrastructure_provider"`
	KubernetesVersion string `json:"kubernetes_version"`
	// Versions are the pinned versions of the checkout the cluster was created from (the
	// providers', cert-manager's, ...), Revision its commit.
	Versions map[string]string `json:"versions"`
	// Source is what the cluster's units were read from (type, url, ref).
	Source map[string]any `json:"source,omitempty"`
	// BootstrapCluster is the kind cluster a command brings back to manage the cluster.
	BootstrapCluster BootstrapCluster `json:"bootstrap_cluster"`
	// ManagementUnits are what the temporary management cluster runs (the files of
	// management/), in the order they are applied.
	ManagementUnits []ManagementUnit `json:"management_units"`
	// ControlPlane and Workers are the machine counts the cluster was last left with.
	ControlPlane int `json:"control_plane"`
	Workers      int `json:"workers"`
	// Machines map every machine to its provider ID, as last exported; Before is that map when
	// the pending operation started (a restore must replace none of them).
	Machines map[string]string `json:"machines"`
	Before   map[string]string `json:"machines_before,omitempty"`
	// Recipient is the age public key the secrets of the state are encrypted to.
	Recipient string    `json:"age_recipient"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	// Pending is the operation under way; a command run again finishes it.
	Pending *Operation `json:"pending,omitempty"`
}

// ManagementUnit is a unit of the temporary management cluster.
type ManagementUnit struct {
	Name string `json:"name"`
	// WaitFor are the units that must be ready before it is applied (a dependency on another
	// unit's CRDs alone only needs that unit applied before it).
	WaitFor []string `json:"wait_for,omitempty"`
}

// The commands that change a standalone cluster, as its state records them.
const (
	CommandCreate  = "create"
	CommandScale   = "scale"
	CommandDelete  = "delete"
	CommandUpgrade = "upgrade"
)

// Operation is a change under way: set before the temporary management cluster is created,
// cleared once the state is exported again and the temporary cluster is gone.
type Operation struct {
	Command string    `json:"command"` // one of the Command constants
	Started time.Time `json:"started"`
	// Record holds the steps of the change done or begun (the project's step machine,
	// internal/steps): StepRestore, StepChange, StepExport.
	steps.Record
	// Workers and ControlPlane are the counts a scale asks for (nil: unchanged).
	Workers      *int `json:"workers,omitempty"`
	ControlPlane *int `json:"control_plane,omitempty"`
	// KubernetesVersion is the version an upgrade asks for.
	KubernetesVersion string `json:"kubernetes_version,omitempty"`
}

// The recorded steps of a change.
const (
	// StepRestore: the objects are in the temporary management cluster. From then on that cluster,
	// not the directory, holds the truth, and the objects are never restored again while it exists.
	StepRestore = "restore"
	// StepChange: the change is made (the replicas set, the version asked for, the Cluster
	// deleted; for a creation, the cluster created). Begun, it may have happened.
	StepChange = "change"
	// StepExport: the objects are exported again into the directory.
	StepExport = "export"
)

// Steps are the recorded steps of the operation's command, in order.
func (o *Operation) Steps() []string {
	if o.Command == CommandDelete {
		return []string{StepRestore, StepChange}
	}
	return []string{StepRestore, StepChange, StepExport}
}

// Complete tells whether the change is made and kept (the objects exported again, or the cluster
// gone): only the temporary management cluster remains to be deleted.
func (o *Operation) Complete() bool { return o.AllDone(o.Steps()...) }

// BootstrapCluster is the kind cluster a command brings back to manage a standalone cluster, as
// state.json records it: a type of the file format, so that a change of kindcluster's own
// Config does not change what a state reads (its keys are those the first format wrote).
type BootstrapCluster struct {
	Name          string                `json:"Name"`
	NodeImage     string                `json:"NodeImage"`
	PodSubnet     string                `json:"PodSubnet,omitempty"`
	ServiceSubnet string                `json:"ServiceSubnet,omitempty"`
	Mirrors       registrymirror.Config `json:"Mirrors,omitempty"`
}

// Kind is the configuration of the kind cluster, for the environment env.
func (b BootstrapCluster) Kind(env string) kindcluster.Config {
	return kindcluster.Config{Name: b.Name, NodeImage: b.NodeImage, PodSubnet: b.PodSubnet, ServiceSubnet: b.ServiceSubnet, Mirrors: b.Mirrors, Environment: env}
}

// Dir is a standalone cluster's state directory.
type Dir struct {
	Path        string
	Environment string
}

var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// DirOf is the state directory of the standalone cluster of an environment, under root (the
// state directory's statedir.Dir.Standalone). Environments below environment-values/ may be
// paths: their slashes become "_".
func DirOf(root, env string) (Dir, error) {
	parts := strings.Split(strings.Trim(filepath.ToSlash(env), "/"), "/")
	for _, p := range parts {
		if !safeName.MatchString(p) {
			return Dir{}, fmt.Errorf("environment %q: not usable as the name of a standalone cluster's state (path elements of letters, digits, '.', '_', '-', starting with a letter or digit)", env)
		}
	}
	flat := strings.Join(parts, "_")
	return Dir{Path: filepath.Join(root, flat), Environment: env}, nil
}

func (d Dir) file(name string) string { return filepath.Join(d.Path, name) }

// KubeconfigPath is the cluster's admin kubeconfig.
func (d Dir) KubeconfigPath() string { return d.file(kubeconfigFile) }

// Exists tells whether the directory holds a state (complete or not).
func (d Dir) Exists() (bool, error) {
	_, err := os.Stat(d.file(stateFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("standalone state of %s: %w", d.Environment, err)
	}
}

// Load reads state.json and checks that it is a state this version can use.
func (d Dir) Load() (*State, error) {
	data, err := os.ReadFile(d.file(stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no standalone cluster for environment %s: %s does not exist (create one with `bootstrap %s --standalone`, or `bootstrap standalone import`)", d.Environment, d.file(stateFile), d.Environment)
	}
	if err != nil {
		return nil, fmt.Errorf("read the state of standalone cluster %s: %w", d.Environment, err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: damaged: %v", d.file(stateFile), err)
	}
	if err := st.readVersion1(data); err != nil {
		return nil, fmt.Errorf("%s: damaged: %v", d.file(stateFile), err)
	}
	if err := st.check(); err != nil {
		return nil, fmt.Errorf("%s: damaged: %w", d.file(stateFile), err)
	}
	return &st, nil
}

// readVersion1 reads the operation under way as version 1 recorded it: restored, applied (the
// change begun) and finished (the change kept).
func (st *State) readVersion1(data []byte) error {
	if st.Version != 1 || st.Pending == nil {
		return nil
	}
	var v1 struct {
		Pending struct{ Restored, Applied, Finished bool } `json:"pending"`
	}
	if err := json.Unmarshal(data, &v1); err != nil {
		return err
	}
	p, old := st.Pending, v1.Pending
	for _, step := range p.Steps() {
		switch {
		case old.Finished,
			step == StepRestore && old.Restored,
			// A creation's change is the cluster's creation: made before its record began.
			step == StepChange && p.Command == CommandCreate:
			p.Done = append(p.Done, step)
		case step == StepChange && old.Applied:
			p.Running = step
		}
	}
	return nil
}

func (st *State) check() error {
	if st.Version < 1 || st.Version > FormatVersion {
		return fmt.Errorf("version: %d, expected 1 to %d", st.Version, FormatVersion)
	}
	for key, v := range map[string]string{
		"environment": st.Environment, "cluster": st.Cluster, "namespace": st.Namespace,
		"age_recipient": st.Recipient, "bootstrap_cluster.Name": st.BootstrapCluster.Name,
		"bootstrap_cluster.NodeImage": st.BootstrapCluster.NodeImage,
	} {
		if v == "" {
			return fmt.Errorf("%s: missing", key)
		}
	}
	if len(st.ManagementUnits) == 0 {
		return errors.New("management_units: none")
	}
	return nil
}

// Save writes state.json (atomically, 0600), stamping Updated.
func (d Dir) Save(st *State) error {
	st.Version = FormatVersion
	st.Updated = time.Now().UTC().Truncate(time.Second)
	if st.Created.IsZero() {
		st.Created = st.Updated
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.Path, dirMode); err != nil {
		return fmt.Errorf("create %s: %w", d.Path, err)
	}
	return atomicfile.Write(d.file(stateFile), append(data, '\n'), fileMode)
}

// Remove deletes the state directory: the cluster is gone.
func (d Dir) Remove() error {
	if err := os.RemoveAll(d.Path); err != nil {
		return fmt.Errorf("remove the state of standalone cluster %s: %w", d.Environment, err)
	}
	return nil
}

// Entry is one standalone cluster of List.
type Entry struct {
	Dir   Dir
	State *State
	// Err says why the state could not be read.
	Err error
}

// List reads every standalone cluster's state under root, sorted by environment.
func List(root string) ([]Entry, error) {
	dirs, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list standalone clusters: %w", err)
	}
	var out []Entry
	for _, e := range dirs {
		if !e.IsDir() {
			continue
		}
		d := Dir{Path: filepath.Join(root, e.Name()), Environment: e.Name()}
		st, err := d.Load()
		if st != nil {
			d.Environment = st.Environment
		}
		out = append(out, Entry{Dir: d, State: st, Err: err})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir.Environment < out[j].Dir.Environment })
	return out, nil
}
