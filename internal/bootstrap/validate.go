package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/statedir"
	"cluster-init.dev/cluster-init/internal/validate"
	"cluster-init.dev/cluster-init/internal/values"
)

// validateBootstrap checks the environment in every context before anything is created, and
// returns its render in the bootstrap context: the plan the other phases follow.
func validateBootstrap(ctx context.Context, s *session, src *publishedSource) (*render.Result, error) {
	reports, err := validate.Environment(ctx, s.renderer, s.opts.RepoRoot, s.renderOptions("", src.values))
	if err != nil {
		return nil, fmt.Errorf("environment %s is invalid, nothing was created:\n%w", s.opts.Env.Name, err)
	}
	var plan *render.Result
	for _, r := range reports {
		s.out.Log("%s: %d units, %d objects valid", r.Target, r.Units, r.Objects)
		if r.Context == render.ContextBootstrap {
			plan = r.Result
		}
	}
	if plan == nil {
		return nil, fmt.Errorf("environment %s has no bootstrap context: is it a workload cluster's?", s.opts.Env.Name)
	}
	return plan, nil
}

// validateManagement checks the environment as its management cluster renders it after the pivot.
func validateManagement(ctx context.Context, s *session, src *publishedSource, state managementstate.State) (*render.Result, error) {
	opts := s.renderOptions(render.ContextManagement, src.values)
	opts.State = []values.Layer{state.Layer()}
	res, err := s.renderer.Render(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("environment %s is invalid, nothing was changed:\n%w", s.opts.Env.Name, err)
	}
	s.out.Log("management context: %d units, %d objects", len(res.Graph.Order), len(res.Objects))
	return res, nil
}

// refuseSelfManaged refuses to start again an environment whose management cluster is
// self-managed: a new kind cluster would create a second management cluster.
func refuseSelfManaged(ctx context.Context, stateDir statedir.Dir, env string) error {
	path := stateDir.Environment(env).ManagementKubeconfig()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("environment %s: %w", env, err)
	}
	m, err := kube.FromKubeconfig("management", data)
	if err != nil {
		return fmt.Errorf("environment %s was bootstrapped, but its management kubeconfig %s cannot be read (%v): if the cluster is gone, remove the file and run again", env, path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, _, err := managementstate.Read(ctx, m.Client)
	if err != nil {
		return fmt.Errorf("environment %s was bootstrapped (kubeconfig %s) but its management cluster does not answer (%v): if it is gone, remove %s and run again", env, path, err, path)
	}
	return fmt.Errorf("environment %s already has its management cluster, %s (kubeconfig %s): use `bootstrap apply %s` to change it", env, st, path, env)
}
