package standalone

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/steps"
	"cluster-init.dev/cluster-init/internal/units"
	"cluster-init.dev/cluster-init/internal/values"
)

// Creating is a standalone creation's hold on its state directory (`bootstrap ENV
// --standalone`): the bootstrap flow creates the cluster, and its last phase (Keep) keeps it in
// the directory and deletes the bootstrap cluster. Nothing of management stays.
type Creating struct {
	// Root is the directory of the standalone states (statedir.Dir.Standalone).
	Root, Env string
	// Key encrypts the secrets of the state.
	Key       *Key
	Temporary Temporary
	Out       Reporter

	dir  Dir
	lock *Lock
	// state is the state of an interrupted creation being finished, nil for a new one.
	state *State
}

// RefuseCreated refuses a bootstrap of an environment that has a standalone cluster (under root):
// it would define that cluster a second time, with a second CA.
func RefuseCreated(root, env string) error {
	d, err := DirOf(root, env)
	if err != nil {
		return nil // no state can exist under a name that is not one
	}
	if exists, err := d.Exists(); err != nil || !exists {
		return err
	}
	return fmt.Errorf("environment %s has a standalone cluster (state %s): it would be defined a second time; change it with `bootstrap scale %s`, delete it with `bootstrap delete %s`", env, d.Path, env, env)
}

// Close lets the state go.
func (c *Creating) Close() { c.lock.Release() }

// Start locks the state directory of the environment's standalone cluster and says whether a
// creation may run: a cluster that exists is refused (a second creation would define it again,
// with a second CA); an interrupted creation is finished. done: the creation had only its
// bootstrap cluster left to delete, and it is gone.
func (c *Creating) Start() (done bool, err error) {
	if c.Key == nil {
		return false, errors.New("--standalone: no age key to encrypt the state's secrets with")
	}
	if c.dir, err = DirOf(c.Root, c.Env); err != nil {
		return false, err
	}
	if c.lock, err = c.dir.Lock("bootstrap " + c.Env + " --standalone"); err != nil {
		return false, err
	}
	c.dir.RemoveLeftovers()
	exists, err := c.dir.Exists()
	if err != nil || !exists {
		return false, err
	}
	st, err := c.dir.Load()
	if err != nil {
		return false, err
	}
	if st.Pending == nil || st.Pending.Command != CommandCreate {
		return false, fmt.Errorf("environment %s has a standalone cluster already (%s, state %s): change it with `bootstrap scale %s`, or delete it with `bootstrap delete %s`", st.Environment, st.Cluster, c.dir.Path, st.Environment, st.Environment)
	}
	c.state = st
	if !st.Pending.Complete() {
		// Its export was not complete: the bootstrap cluster is the only record of the cluster.
		// Without it, a new run would define the cluster again, with a second CA.
		if up, err := c.Temporary.exists(st); err != nil {
			return false, err
		} else if !up {
			return false, fmt.Errorf("the creation of standalone cluster %s was interrupted before its objects were exported, and its bootstrap cluster %s is gone: nothing can manage the cluster again; `bootstrap cleanup %s` removes its containers and this state", st.Cluster, st.BootstrapCluster.Name, st.Environment)
		}
		c.Out.Log("continuing the interrupted creation of standalone cluster %s", st.Cluster)
		return false, nil
	}
	if err := c.Temporary.delete(c.Out, st); err != nil {
		return false, err
	}
	st.Pending = nil
	if err := c.dir.Save(st); err != nil {
		return false, err
	}
	c.Out.Log("standalone cluster %s was created and exported; its bootstrap cluster is gone now", st.Cluster)
	return true, nil
}

// Created is what the bootstrap flow created, as the state keeps it.
type Created struct {
	// Settings are the release's values; Merged all of them (kept encrypted: they hold the
	// credentials), Source the source values among them.
	Settings values.Settings
	Merged   []byte
	Source   map[string]any
	// Versions are the checkout's pins.
	Versions map[string]string
	// CNI is the bootstrap cluster's pod network, Graph the release's units and ObjectsOf the
	// objects rendered of a unit: what a temporary management cluster runs again.
	CNI       []*unstructured.Unstructured
	Graph     *units.Graph
	ObjectsOf func(unit string) []*unstructured.Unstructured
	// Management is the bootstrap cluster, which manages the cluster now.
	Management *kube.Cluster
	// KeepBootstrap keeps the bootstrap cluster after the export (a later run deletes it).
	KeepBootstrap bool
}

// Keep is the last phase of a standalone creation: what manages the cluster again (the
// providers as built now, the bootstrap cluster's settings), then the cluster's objects, go to
// the state directory; then the bootstrap cluster is deleted.
func (c *Creating) Keep(ctx context.Context, cr Created) error {
	v := cr.Settings
	st := c.state
	if st == nil {
		st = &State{}
	}
	st.Environment = c.Env
	st.Cluster = v.Cluster.Name
	st.Namespace = names.Namespace
	st.Bootstrap = v.Cluster.Providers.Bootstrap
	st.Infrastructure = v.Cluster.Providers.Infrastructure
	st.KubernetesVersion = v.Cluster.KubernetesVersion
	st.Versions = cr.Versions
	st.Source = withoutCredentials(cr.Source)
	st.BootstrapCluster = BootstrapClusterOf(v)
	st.Recipient = c.Key.Recipient()
	// The cluster is created, and its objects are where a change would restore them to.
	attempts := 0
	if st.Pending != nil {
		attempts = st.Pending.Attempts
	}
	st.Pending = &Operation{Command: CommandCreate, Started: time.Now().UTC(), Record: steps.Record{Done: []string{StepRestore, StepChange}, Attempts: attempts}}
	mgmt, err := c.dir.storeManagement(c.Key, cr.CNI, cr.Graph, cr.ObjectsOf)
	if err != nil {
		return fmt.Errorf("keep what manages standalone cluster %s: %w", st.Cluster, err)
	}
	st.ManagementUnits = mgmt
	if err := c.dir.StoreValues(c.Key, cr.Merged); err != nil {
		return err
	}
	if err := c.dir.Save(st); err != nil {
		return err
	}
	m := &steps.Machine{Record: &st.Pending.Record, Save: func(context.Context) error { return c.dir.Save(st) }, What: CommandCreate}
	if err := m.Begin(ctx); err != nil {
		return err
	}
	if err := m.Do(ctx, steps.Step{Name: StepExport, Run: func(ctx context.Context) error {
		return exportObjects(ctx, c.Out, c.dir, c.Key, cr.Management, c.Temporary.kubeconfig(st), st)
	}}); err != nil {
		return err
	}
	if cr.KeepBootstrap {
		c.Out.Log("keeping the bootstrap cluster (--keep-bootstrap): %s; `bootstrap %s --standalone` deletes it", c.Temporary.kubeconfig(st), st.Environment)
		return nil
	}
	if err := c.Temporary.delete(c.Out, st); err != nil {
		return err
	}
	st.Pending = nil
	if err := c.dir.Save(st); err != nil {
		return err
	}
	c.Out.Log("standalone cluster %s runs with no management: %d control plane and %d worker machines", st.Cluster, st.ControlPlane, st.Workers)
	c.Out.Log("kubeconfig (mode 0600): %s", c.dir.KubeconfigPath())
	c.Out.Log("state (mode 0700, secrets encrypted to %s): %s", st.Recipient, c.dir.Path)
	c.Out.Log("change it: bootstrap scale %s --workers N; delete it: bootstrap delete %s; back up its state: bootstrap standalone export %s -o FILE", st.Environment, st.Environment, st.Environment)
	return nil
}

// KubeconfigPath is the cluster's admin kubeconfig, once kept.
func (c *Creating) KubeconfigPath() string { return c.dir.KubeconfigPath() }

// withoutCredentials is the source values as state.json keeps them: a URL's user information (a
// token, say) is dropped.
func withoutCredentials(src map[string]any) map[string]any {
	if src == nil {
		return nil
	}
	out := map[string]any{}
	for k, val := range src {
		out[k] = val
	}
	if raw, ok := out["url"].(string); ok {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			u.User = nil
			out["url"] = u.String()
		}
	}
	return out
}

// BootstrapClusterOf is the kind cluster of the values, as a standalone state records it (the
// bootstrap cluster is made from this record too, so that a temporary management cluster is the
// same kind cluster).
func BootstrapClusterOf(v values.Settings) BootstrapCluster {
	kc := v.BootstrapCluster
	return BootstrapCluster{
		Name:          kc.Name,
		NodeImage:     kc.NodeImage,
		PodSubnet:     kc.PodsCIDR,
		ServiceSubnet: kc.ServicesCIDR,
		Mirrors:       v.RegistryMirrors.HostsConfig,
	}
}
