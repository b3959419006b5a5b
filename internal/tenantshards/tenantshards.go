// Package tenantshards removes the Flux shard of tenants that are gone.
//
// A shard's controllers (kustomize-components/flux-shard) hold the finalizers of its tenants'
// Flux objects: when a tenant is removed, its namespace is deleted in the same upgrade of the
// workload-clusters release that drops its shard, and a shard removed at once would leave the
// namespace Terminating for ever. So the release orphans a shard's controllers
// (deletionPolicy Orphan), and this reconciler deletes them once no namespace of the shard is
// left, a Terminating one included, and no Kustomization of the platform makes the shard again.
package tenantshards

import (
	"context"
	"fmt"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"cluster-init.dev/cluster-init/internal/names"
)

// KustomizationOf is the platform's Kustomization of a shard's controllers (charts/workload-clusters).
func KustomizationOf(shard string) string { return "flux-shard-" + shard }

// Reconciler deletes the controllers of shards that no tenant has any more.
type Reconciler struct {
	Client client.Client
	// Namespace is the platform's, where the shards' Kustomizations are.
	Namespace string
	// Recheck is how often a shard still in use is looked at again.
	Recheck time.Duration
}

// SetupWithManager watches the shards' Deployments (Flux's namespace, label sharding.fluxcd.io/key)
// and the namespaces, whose going may free a shard.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ofShard := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == names.FluxNamespace && o.GetLabels()[names.ShardLabel] != ""
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("tenant-shards").
		For(&appsv1.Deployment{}, builder.WithPredicates(ofShard)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			shard := o.GetLabels()[names.ShardLabel]
			if shard == "" {
				return nil
			}
			deployments := &appsv1.DeploymentList{}
			if err := mgr.GetClient().List(ctx, deployments, client.InNamespace(names.FluxNamespace), client.MatchingLabels{names.ShardLabel: shard}); err != nil {
				return nil
			}
			var out []reconcile.Request
			for _, d := range deployments.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&d)})
			}
			return out
		})).
		Complete(r)
}

// Reconcile deletes a shard's Deployment if no namespace is of its shard and no Kustomization of
// the platform makes it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dep := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, dep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	shard := dep.Labels[names.ShardLabel]
	if req.Namespace != names.FluxNamespace || shard == "" || !dep.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	inUse := ctrl.Result{RequeueAfter: r.Recheck}
	ks := &kustomizev1.Kustomization{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: KustomizationOf(shard)}, ks); {
	case err == nil:
		return inUse, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("read the Kustomization of shard %s: %w", shard, err)
	}
	namespaces := &corev1.NamespaceList{}
	if err := r.Client.List(ctx, namespaces, client.MatchingLabels{names.ShardLabel: shard}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list the namespaces of shard %s: %w", shard, err)
	}
	if len(namespaces.Items) > 0 {
		return inUse, nil
	}
	ctrl.LoggerFrom(ctx).Info("removing the controller of a shard no tenant has", "shard", shard, "deployment", dep.Name)
	if err := r.Client.Delete(ctx, dep); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("remove %s of shard %s: %w", dep.Name, shard, err)
	}
	return ctrl.Result{}, nil
}
