package cleanup

import (
	"context"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/pivot"
)

// removeKind is the cleanup of a cluster whose machines are not this host's and that has no
// management cluster of its own: it was only ever in the kind cluster, and goes with it.
func (c *cleaner) removeKind(ctx context.Context) error {
	deleted, err := c.deleteKindCluster(ctx, nil)
	if err != nil {
		return err
	}
	if deleted {
		c.log("Cluster %s is deleted, and nothing its provider made is left", c.t.Cluster)
	}
	return c.rec.Forget(c.log)
}

// deleteKindCluster deletes the Cluster through the environment's kind cluster when it is defined
// there, then the kind cluster, and says whether the Cluster was deleted with everything its
// provider made. A kind cluster that is not this environment's is refused; one whose Cluster's
// machines are elsewhere than this host and could not be deleted is kept, the only record of
// what its provider created. management is the environment's management cluster (nil if none).
func (c *cleaner) deleteKindCluster(ctx context.Context, management *kube.Cluster) (deleted bool, err error) {
	t := c.t
	exists, err := c.kind.Exists(t.Kind)
	if err != nil {
		return false, err
	}
	if !exists {
		c.log("no kind cluster %s", t.Kind)
		return false, nil
	}
	kc, err := c.kind.Connect(t.Kind)
	if err != nil {
		return false, err
	}
	if err := c.kind.Owns(ctx, kc, t.Kind, t.Environment); err != nil {
		return false, fmt.Errorf("kind cluster %s: %w: not deleting it", t.Kind, err)
	}
	c.remember(ctx, kc)
	// After the move, the machines are defined in the management cluster, which the pivot's
	// copy of its kubeconfig reaches even when the bootstrap did not finish.
	if management == nil {
		if m, err := pivot.SavedManagement(ctx, kc.Client, t.Namespace); err == nil {
			c.remember(ctx, m)
		}
	}
	// Defined here: not moved to the management cluster by a pivot.
	defined := kc.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Cluster}, &clusterv1.Cluster{}) == nil
	err = deleteCluster(ctx, kc, t, c.log)
	deleted = defined && err == nil
	if err != nil {
		if !t.CAPD {
			// Machines elsewhere than this host: the kind cluster is the only record of what
			// the provider created there, and goes only once nothing is.
			left, lerr := recordedResources(ctx, kc.Client, t.Namespace, t.Cluster)
			deleted = defined && lerr == nil && len(left) == 0
			if !deleted {
				return false, fmt.Errorf("cluster %s/%s was not deleted through Cluster API: %v; its provider recorded what it created (%s): kind cluster %s is kept, the only record of it. Run cleanup again once the provider can reach its infrastructure, or delete those resources there and then the kind cluster", t.Namespace, t.Cluster, err, describeLeft(left, lerr), t.Kind)
			}
		} else {
			c.log("could not delete Cluster %s through Cluster API: %v (removing its containers directly)", t.Cluster, err)
		}
	}
	c.log("deleting kind cluster %s", t.Kind)
	return deleted, c.kind.Delete(t.Kind)
}
