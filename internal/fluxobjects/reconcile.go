package fluxobjects

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RequestReconcile asks Flux to reconcile obj (a Kustomization or a HelmRelease) now rather than
// at its next interval, as `flux reconcile` does, and returns the request's value: Flux reports
// it in status.lastHandledReconcileAt once it has handled it.
func RequestReconcile(ctx context.Context, c client.Client, obj client.Object, at time.Time) (string, error) {
	value := at.Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, meta.ReconcileRequestAnnotation, value)
	return value, c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
}
