package cleanup

import (
	"context"

	"cluster-init.dev/cluster-init/internal/kube"
)

// removeCAPD is the cleanup of clusters whose machines are containers of this host: the kind
// cluster (with the Cluster, deleted through Cluster API while it is defined there), the workload
// clusters through the management cluster's Cluster API, then whatever container of the
// environment's clusters is left, removed directly.
func (c *cleaner) removeCAPD(ctx context.Context, management *kube.Cluster) error {
	if _, err := c.deleteKindCluster(ctx, management); err != nil {
		return err
	}
	workloads, err := deleteWorkloadClusters(ctx, management, c.t, c.log)
	if err != nil {
		c.log("could not delete the workload clusters through Cluster API: %v (removing their containers directly)", err)
	}
	if err := removeContainers(ctx, c.containers, append(workloads, c.t.Cluster), c.owned, c.log); err != nil {
		return err
	}
	return c.rec.Forget(c.log)
}
