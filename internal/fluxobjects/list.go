package fluxobjects

import (
	"context"
	"fmt"
	"reflect"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Objects are the Flux objects that apply things: Kustomizations and HelmReleases.
type Objects struct {
	Kustomizations []kustomizev1.Kustomization
	HelmReleases   []helmv2.HelmRelease
}

// List lists the Kustomizations and HelmReleases that match opts (a namespace, labels, an
// index). A kind this cluster does not serve (Flux not installed) lists as none.
func List(ctx context.Context, c client.Client, opts ...client.ListOption) (Objects, error) {
	var out Objects
	ks := &kustomizev1.KustomizationList{}
	if err := c.List(ctx, ks, opts...); err != nil && !apimeta.IsNoMatchError(err) {
		return out, fmt.Errorf("list Kustomizations: %w", err)
	}
	hrs := &helmv2.HelmReleaseList{}
	if err := c.List(ctx, hrs, opts...); err != nil && !apimeta.IsNoMatchError(err) {
		return out, fmt.Errorf("list HelmReleases: %w", err)
	}
	out.Kustomizations, out.HelmReleases = ks.Items, hrs.Items
	return out, nil
}

// All are the objects, Kustomizations first, each with its kind set (a typed list leaves it
// empty), pointing into o.
func (o Objects) All() []client.Object {
	out := make([]client.Object, 0, len(o.Kustomizations)+len(o.HelmReleases))
	for i := range o.Kustomizations {
		o.Kustomizations[i].SetGroupVersionKind(kustomizev1.GroupVersion.WithKind(kustomizev1.KustomizationKind))
		out = append(out, &o.Kustomizations[i])
	}
	for i := range o.HelmReleases {
		o.HelmReleases[i].SetGroupVersionKind(helmv2.GroupVersion.WithKind(helmv2.HelmReleaseKind))
		out = append(out, &o.HelmReleases[i])
	}
	return out
}

// kindOf names obj's kind for a message, from its type when its kind is not set.
func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return reflect.TypeOf(obj).Elem().Name()
}
