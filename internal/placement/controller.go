package placement

import (
	"context"
	"fmt"
	"sort"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// SetupWithManager runs the reconciler in a manager: an application is looked at again when it
// changes, when one of its Kustomizations changes (Flux reports on a cluster), and when any
// Cluster changes (a selector may match it now, a named cluster may appear or go).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(GVK)
	return ctrl.NewControllerManagedBy(mgr).
		Named("application").
		For(app).
		Watches(&kustomizev1.Kustomization{}, handler.EnqueueRequestsFromMapFunc(applicationOf)).
		Watches(&helmv2.HelmRelease{}, handler.EnqueueRequestsFromMapFunc(applicationOf)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.everyApplication)).
		Complete(r)
}

// applicationOf is the application a Flux object runs on a cluster, by its label.
func applicationOf(_ context.Context, obj client.Object) []reconcile.Request {
	ns, name, ok := strings.Cut(obj.GetLabels()[ApplicationLabel], ".")
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}}
}

func (r *Reconciler) everyApplication(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(GVK.GroupVersion().WithKind(GVK.Kind + "List"))
	if err := r.Client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list the applications")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, a := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
	}
	return out
}

// Observed is an application as a look at the management cluster finds it.
type Observed struct {
	Namespace, Name string
	Status          Status
}

// Ready is the summed Ready condition, if the controller has written one for this generation.
func (o Observed) Ready() *metav1.Condition {
	return apimeta.FindStatusCondition(o.Status.Conditions, "Ready")
}

// List reads every application of the management cluster with its placements; none when the
// cluster does not place applications (no CRD).
func List(ctx context.Context, c client.Reader) ([]Observed, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(GVK.GroupVersion().WithKind(GVK.Kind + "List"))
	if err := c.List(ctx, list); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list the applications: %w", err)
	}
	out := make([]Observed, 0, len(list.Items))
	for _, a := range list.Items {
		o := Observed{Namespace: a.GetNamespace(), Name: a.GetName()}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mapOf(a.Object["status"]), &o.Status); err != nil {
			return nil, fmt.Errorf("status of application %s: %w", a.GetName(), err)
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, nil
}
