package bootstrap

import (
	"context"
	"time"

	"cluster-init.dev/cluster-init/internal/kube"
)

// installFlux applies Flux from kustomize-components/flux-system and waits for it.
func installFlux(ctx context.Context, s *session, c *kube.Cluster) error {
	objs, err := s.renderer.Flux(ctx)
	if err != nil {
		return err
	}
	return applyAndWait(ctx, s, c, "Flux", objs, objs, 5*time.Minute)
}
