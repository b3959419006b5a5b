package standalone

import (
	"context"
	"fmt"
	"strings"

	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
)

// The flows of a standalone cluster, beside the state they own: its creation's last phase
// (creating.go: the cluster kept in the state directory, the bootstrap cluster deleted) and the
// change of a cluster that exists (changing.go: management brought back in a temporary kind
// cluster for the time of one command). The CLI's session runs their phases (it shows and times
// them, stops after --until, bounds them with --timeout); the work of each is here.

// Reporter is where a flow says what it does: the CLI's progress printer.
type Reporter interface {
	Log(format string, args ...any)
	Waiting(what string, pending []string)
}

// Phase is one phase of a flow.
type Phase struct {
	Name string
	Run  func(ctx context.Context) error
}

// KindClusters is what a flow asks of kind: a kindcluster.Manager.
type KindClusters interface {
	Exists(name string) (bool, error)
	Ensure(ctx context.Context, cfg kindcluster.Config) (c *kube.Cluster, created bool, err error)
	KubeconfigPath(name string) string
	Delete(name string) error
}

// Temporary is how a flow reaches the temporary management cluster (the kind cluster the state
// records).
type Temporary struct {
	Kind KindClusters
	// BeforeDelete, if set, runs before the kind cluster is deleted: what the command runs in it
	// (pulling images) stops first.
	BeforeDelete func()
}

// NewTemporary reaches the kind clusters whose files are under dir, reporting kind's messages.
func NewTemporary(dir string, out Reporter, beforeDelete func()) Temporary {
	return Temporary{
		Kind:         kindcluster.New(dir, func(msg string) { out.Log("kind: %s", strings.TrimSpace(msg)) }),
		BeforeDelete: beforeDelete,
	}
}

// exists tells whether the temporary management cluster of st exists.
func (t Temporary) exists(st *State) (bool, error) { return t.Kind.Exists(st.BootstrapCluster.Name) }

// kubeconfig is the kubeconfig file of the temporary management cluster of st.
func (t Temporary) kubeconfig(st *State) string {
	return t.Kind.KubeconfigPath(st.BootstrapCluster.Name)
}

// delete deletes the temporary management cluster of st, if it exists.
func (t Temporary) delete(out Reporter, st *State) error {
	name := st.BootstrapCluster.Name
	exists, err := t.Kind.Exists(name)
	if err != nil || !exists {
		return err
	}
	if t.BeforeDelete != nil {
		t.BeforeDelete()
	}
	out.Log("deleting the temporary management cluster %s", name)
	if err := t.Kind.Delete(name); err != nil {
		return fmt.Errorf("delete the temporary management cluster %s: %w", name, err)
	}
	return nil
}
