package fluxobjects

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var suspendPatch = client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))

// Suspend stops Flux reconciling obj (a Kustomization, a HelmRelease or a source), as
// `flux suspend` does. Only its name and namespace are read: an object that is gone, or of a kind
// this cluster does not serve, has nothing to suspend.
func Suspend(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Patch(ctx, obj, suspendPatch); client.IgnoreNotFound(err) != nil && !apimeta.IsNoMatchError(err) {
		return fmt.Errorf("suspend %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// SuspendAll suspends every Kustomization and HelmRelease of namespace and returns what it
// suspended.
func SuspendAll(ctx context.Context, c client.Client, namespace string) (Objects, error) {
	objs, err := List(ctx, c, client.InNamespace(namespace))
	if err != nil {
		return objs, fmt.Errorf("list the Flux objects of %s: %w", namespace, err)
	}
	for _, o := range objs.All() {
		if err := Suspend(ctx, c, o); err != nil {
			return objs, err
		}
	}
	return objs, nil
}
