package bootstrap

import (
	"context"
	"fmt"
	"os"

	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/managementstate"
)

// connectManagement connects to the management cluster the bootstrap wrote the kubeconfig of (or
// the one given with --kubeconfig).
func connectManagement(ctx context.Context, s *session) (*bootstrapCluster, managementstate.State, error) {
	var st managementstate.State
	path := s.opts.Kubeconfig
	if path == "" {
		path = s.opts.StateDir.Environment(s.opts.Env.Name).ManagementKubeconfig()
		if _, err := os.Stat(path); err != nil {
			return nil, st, fmt.Errorf("no management cluster for environment %s (%s): bootstrap it first, or give --kubeconfig", s.opts.Env.Name, path)
		}
	}
	c, err := kube.Load("management", path, s.opts.Context)
	if err != nil {
		return nil, st, err
	}
	// An adopted cluster carries the mark of its environment: not another's values into it.
	if err := kindcluster.CheckMarker(ctx, c, s.opts.Env.Name); err != nil {
		return nil, st, fmt.Errorf("%s: %w", path, err)
	}
	st, found, err := managementstate.Read(ctx, c.Client)
	if err != nil {
		return nil, st, err
	}
	if !found || !st.Managed() {
		return nil, st, fmt.Errorf("%s (%s) is not a management cluster of cluster-init yet (no pivot has finished there, no adoption): finish its bootstrap with `bootstrap %s` (or `bootstrap %s --kubeconfig FILE --adopt`)", c.Config.Host, path, s.opts.Env.Name, s.opts.Env.Name)
	}
	s.out.Log("management cluster: %s (%s), %s", c.Config.Host, path, st)
	return &bootstrapCluster{cluster: c}, st, nil
}
