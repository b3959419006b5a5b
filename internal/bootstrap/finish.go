package bootstrap

import (
	"context"
	"fmt"

	"cluster-init.dev/cluster-init/internal/atomicfile"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/pivot"
	"cluster-init.dev/cluster-init/internal/records"
	"cluster-init.dev/cluster-init/internal/values"
)

// finish checks the pivot from the management side, writes the management kubeconfig and deletes
// the bootstrap cluster, which is only ever deleted after a verified pivot.
func finish(ctx context.Context, s *session, bc *bootstrapCluster, v values.Settings, keepBootstrap bool) error {
	name := v.Cluster.Name
	if bc.kind == nil {
		s.out.Log("bootstrapped from an existing cluster: no pivot, the cluster keeps managing %s", name)
		return nil
	}
	st, err := pivot.ReadState(ctx, bc.cluster.Client, names.Namespace)
	if err == nil {
		err = st.CheckComplete()
	}
	if err != nil {
		return fmt.Errorf("the bootstrap cluster is kept: %w", err)
	}
	m, err := pivot.SavedManagement(ctx, bc.cluster.Client, names.Namespace)
	if err != nil {
		return fmt.Errorf("the bootstrap cluster is kept: %w", err)
	}
	view, err := machines.Read(ctx, m.Client, names.Namespace, name)
	if err == nil && (!view.Found || !view.Available) {
		err = fmt.Errorf("Cluster %s is not Available from the management side (found: %t)", name, view.Found)
	}
	if err != nil {
		return fmt.Errorf("the bootstrap cluster is kept: %w", err)
	}
	path := s.opts.StateDir.Environment(s.opts.Env.Name).ManagementKubeconfig()
	if err := atomicfile.Write(path, m.Kubeconfig, 0o600); err != nil {
		return err
	}
	s.result.Management = path
	if v.Cluster.OnDocker() {
		if err := records.RecordContainers(ctx, s.opts.StateDir.Environment(s.opts.Env.Name).ContainersRecord(), m.Client); err != nil {
			s.out.Log("could not record the containers of %s for cleanup: %v", name, err)
		}
	}
	s.out.Log("management cluster %s is self-managed: %d machines, its Flux reconciles its own units", name, len(view.Machines))
	s.out.Log("kubeconfig of the management cluster (mode 0600): %s", path)
	if keepBootstrap {
		s.out.Log("keeping the bootstrap cluster (--keep-bootstrap): %s", s.result.Bootstrap)
		return nil
	}
	s.stopBackground()
	s.out.Log("deleting the bootstrap cluster %s", v.BootstrapCluster.Name)
	return bc.kind.Delete(v.BootstrapCluster.Name)
}
