package placement

import (
	"context"
	"fmt"
	"sort"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/revisions"
)

// SetupWithManager runs the reconciler in a manager: an application is looked at again when it
// changes, when one of its Kustomizations changes (Flux reports on a cluster), and when any
// Cluster changes (a selector may match it now, a named cluster may appear or go).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.IndexPlacedObjects(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("application").
		For(&appsv1alpha1.Application{}).
		Watches(&kustomizev1.Kustomization{}, handler.EnqueueRequestsFromMapFunc(applicationOf)).
		Watches(&helmv2.HelmRelease{}, handler.EnqueueRequestsFromMapFunc(applicationOf)).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.everyApplication)).
		Complete(r)
}

// applicationIndex is the field index of a cache's Flux objects by their ApplicationLabel.
const applicationIndex = "placement.applicationLabel"

// IndexPlacedObjects indexes a cache's Kustomizations and HelmReleases by their application, and
// has the reconciler list them through the index (the reconciler must read from that cache): a
// List by label goes through every object of the kind, and a full resync went through every
// placement once per application (BenchmarkPlacement). Before the cache starts.
func (r *Reconciler) IndexPlacedObjects(ctx context.Context, indexer client.FieldIndexer) error {
	for _, obj := range []client.Object{&kustomizev1.Kustomization{}, &helmv2.HelmRelease{}} {
		err := indexer.IndexField(ctx, obj, applicationIndex, func(o client.Object) []string {
			if id, ok := o.GetLabels()[ApplicationLabel]; ok {
				return []string{id}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("index the %T by application: %w", obj, err)
		}
	}
	r.indexed = true
	return nil
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
	list := &appsv1alpha1.ApplicationList{}
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

// List reads every application of the management cluster with its placements, sorted by
// namespace and name; none when the cluster does not place applications (no CRD).
func List(ctx context.Context, c client.Reader) ([]appsv1alpha1.Application, error) {
	list := &appsv1alpha1.ApplicationList{}
	if err := c.List(ctx, list); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list the applications: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return list.Items, nil
}

// Revisions are the commits an application of manifests runs, by cluster (as its status names
// them): what the Kustomization that applies it there last applied, and what its source fetched.
func Revisions(ctx context.Context, c client.Reader, rd *revisions.Reader, app *appsv1alpha1.Application) (map[string]revisions.Revision, error) {
	list := &kustomizev1.KustomizationList{}
	if err := c.List(ctx, list, client.MatchingLabels{ApplicationLabel: applicationID(app)}); err != nil {
		return nil, fmt.Errorf("list the Kustomizations of application %s/%s: %w", app.Namespace, app.Name, err)
	}
	out := map[string]revisions.Revision{}
	for i := range list.Items {
		ks := &list.Items[i]
		out[clusterName(placedOn(ks))] = rd.Of(ctx, ks)
	}
	return out, nil
}
