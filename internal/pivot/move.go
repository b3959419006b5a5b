package pivot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
)

// move runs clusterctl move of the namespace, from the bootstrap cluster to the management
// cluster, through the clusterctl client library. clusterctl reads kubeconfig files: they are
// written into the work directory for the time of the move.
func (p *pivot) move(ctx context.Context, _ *State) error {
	m, err := p.connect(ctx)
	if err != nil {
		return err
	}
	from := filepath.Join(p.WorkDir, "bootstrap.kubeconfig")
	to := filepath.Join(p.WorkDir, "management.kubeconfig")
	if err := os.WriteFile(from, p.Bootstrap.Kubeconfig, 0o600); err != nil {
		return err
	}
	defer os.Remove(from)
	if err := os.WriteFile(to, m.Kubeconfig, 0o600); err != nil {
		return err
	}
	defer os.Remove(to)
	c, err := Clusterctl(ctx)
	if err != nil {
		return err
	}
	return c.Move(ctx, clusterctl.MoveOptions{
		FromKubeconfig: clusterctl.Kubeconfig{Path: from},
		ToKubeconfig:   clusterctl.Kubeconfig{Path: to},
		Namespace:      p.Namespace,
	})
}

// Clusterctl is a clusterctl client that reads no configuration file and no environment: what
// it moves is given to it, and nothing is fetched.
func Clusterctl(ctx context.Context) (clusterctl.Client, error) {
	cfg, err := config.New(ctx, "", config.InjectReader(config.NewMemoryReader()))
	if err != nil {
		return nil, fmt.Errorf("clusterctl configuration: %w", err)
	}
	c, err := clusterctl.New(ctx, "", clusterctl.InjectConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("clusterctl client: %w", err)
	}
	return c, nil
}
