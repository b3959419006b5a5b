package bootstrap

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/names"
)

// connectManagement connects to the management cluster the bootstrap wrote the kubeconfig of (or
// the one given with --kubeconfig).
func connectManagement(s *session) (*bootstrapCluster, error) {
	path := s.opts.Kubeconfig
	if path == "" {
		path = ManagementKubeconfig(s.opts.StateDir, s.opts.Env.Name)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no management cluster for environment %s (%s): bootstrap it first, or give --kubeconfig", s.opts.Env.Name, path)
		}
	}
	c, err := kube.Load("management", path, s.opts.Context)
	if err != nil {
		return nil, err
	}
	s.out.Log("management cluster: %s (%s)", c.Config.Host, path)
	return &bootstrapCluster{cluster: c}, nil
}

// settleMachines waits until the cluster has the machines its definitions ask for, every one with
// a node whose Ready condition is true, as the cluster's own API says (nodes: the cluster itself
// when it is self-managed).
func settleMachines(ctx context.Context, s *session, c, nodes *kube.Cluster, name string) error {
	const timeout = 30 * time.Minute
	var last []string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		v, err := machines.Read(ctx, c.Client, names.Namespace, name)
		if err == nil {
			err = v.CheckNodes(ctx, nodes.Client)
		}
		if err != nil {
			last = []string{err.Error()}
			return false, nil
		}
		ok, pending := v.Settled()
		if ok {
			s.out.Log("cluster %s has its %d machines ready", name, len(v.Machines))
			return true, nil
		}
		last = pending
		s.out.Waiting(fmt.Sprintf("the %d machines of %s (%d now)", v.Wanted, name, len(v.Machines)), pending)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: machines not ready within %s: %v", name, timeout, last)
	}
	return nil
}
