package bootstrap

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// installFlux applies Flux from kustomize-components/flux-system and waits for it. A kind
// bootstrap cluster gets flux-system-bootstrap, and its CoreDNS is awaited with it: both start once
// the CNI runs, and Flux's controllers find each other through it.
func installFlux(ctx context.Context, s *session, bc *bootstrapCluster) error {
	if bc.kind == nil {
		objs, err := s.renderer.Flux(ctx)
		if err != nil {
			return err
		}
		return applyAndWait(ctx, s, bc.cluster, "Flux", objs, objs, 5*time.Minute)
	}
	objs, err := s.renderer.BootstrapFlux(ctx)
	if err != nil {
		return err
	}
	coredns := &unstructured.Unstructured{}
	coredns.SetAPIVersion("apps/v1")
	coredns.SetKind("Deployment")
	coredns.SetNamespace("kube-system")
	coredns.SetName("coredns")
	wait := append(append([]*unstructured.Unstructured{}, objs...), coredns)
	return applyAndWait(ctx, s, bc.cluster, "Flux and the cluster's DNS", objs, wait, 5*time.Minute)
}
