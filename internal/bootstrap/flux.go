package bootstrap

import (
	"context"
	"slices"
	"time"
)

// installFlux applies Flux from kustomize-components/flux-system (flux-system-bootstrap in a kind
// bootstrap cluster, together with whose CoreDNS it starts) and waits for it.
func installFlux(ctx context.Context, s *session, bc *bootstrapCluster) error {
	render, what := s.renderer.Flux, "Flux"
	if bc.kind != nil {
		render, what = s.renderer.BootstrapFlux, "Flux and the cluster's DNS"
	}
	objs, err := render(ctx)
	if err != nil {
		return err
	}
	wait := objs
	if bc.kind != nil {
		wait = append(slices.Clone(objs), kindDNS())
	}
	return applyAndWait(ctx, s, bc.cluster, what, objs, wait, 5*time.Minute)
}
