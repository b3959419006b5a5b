// Package kubeconfigreaders keeps, in each tenant's namespace, the Role that lets the tenant's
// people get the kubeconfigs of its clusters and no other Secret of the namespace.
//
// A Role names Secrets one by one (RBAC has no pattern), and a cluster's kubeconfig Secret comes
// and goes with the cluster, so the names are kept here: one per Cluster of the namespace. The
// namespace also holds Secrets the tenant's people must never read (the platform's cloud
// credentials, Cluster API's certificate authorities, Helm's records), which a Role granting the
// get of any Secret would give them.
//
// The Role is made by the workload-clusters chart, without rules, only where the tenant has people
// (readers_group); it is kept only in namespaces labelled as a tenant's. This reconciler reads and writes that Role alone (its RBAC names it, and its
// cache asks for it by name), and the admission policy cluster-init-tenant-readers admits no rule
// but the get of Secrets named <cluster>-kubeconfig.
package kubeconfigreaders

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capisecret "sigs.k8s.io/cluster-api/util/secret"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"cluster-init.dev/cluster-init/internal/names"
)

// CacheOptions has a manager's cache hold the readers' Roles only: the controller may list and
// watch no other Role (RBAC authorizes a list by name only with this field selector).
func CacheOptions() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&rbacv1.Role{}: {Field: fields.OneTermEqualSelector("metadata.name", names.TenantReadersKubeconfigsRole)},
	}
}

// Reconciler sets the rules of the readers' Role of a namespace from the Clusters there.
type Reconciler struct {
	Client client.Client
}

// SetupWithManager looks at a namespace again when its readers' Role changes (made, or its rules
// changed by anyone) and when one of its Clusters comes or goes. The manager's cache must be made
// with CacheOptions.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("kubeconfig-readers").
		For(&rbacv1.Role{}).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: names.TenantReadersKubeconfigsRole}}}
		})).
		Complete(r)
}

// Reconcile sets the rules of the readers' Role of the request's namespace, if it has one.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != names.TenantReadersKubeconfigsRole {
		return ctrl.Result{}, nil
	}
	var role rbacv1.Role
	if err := r.Client.Get(ctx, req.NamespacedName, &role); err != nil {
		// No Role: a namespace whose people read nothing (no readers_group), or not a tenant's.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A tenant's namespace only: a Role of that name elsewhere (the platform's namespace, where
	// the management cluster's kubeconfig is) is none of the tenants'.
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, client.ObjectKey{Name: req.Namespace}, &ns); err != nil {
		return ctrl.Result{}, fmt.Errorf("read namespace %s: %w", req.Namespace, err)
	}
	if ns.Labels[names.TenantLabel] != "true" {
		return ctrl.Result{}, nil
	}
	var clusters clusterv1.ClusterList
	if err := r.Client.List(ctx, &clusters, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list the clusters of namespace %s: %w", req.Namespace, err)
	}
	var clusterNames []string
	for _, c := range clusters.Items {
		clusterNames = append(clusterNames, c.Name)
	}
	want := Rules(clusterNames)
	if equality.Semantic.DeepEqual(role.Rules, want) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(role.DeepCopy())
	role.Rules = want
	if err := r.Client.Patch(ctx, &role, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("set the kubeconfigs the people of namespace %s may get (Role %s): %w", req.Namespace, req.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("the tenant's people may get the kubeconfigs of its clusters", "namespace", req.Namespace, "clusters", clusterNames)
	return ctrl.Result{}, nil
}

// Rules are the rules that let get the kubeconfig Secrets of the named clusters: none for no
// cluster, since a rule with no resourceNames would grant every Secret.
func Rules(clusterNames []string) []rbacv1.PolicyRule {
	if len(clusterNames) == 0 {
		return []rbacv1.PolicyRule{}
	}
	secrets := make([]string, 0, len(clusterNames))
	for _, c := range clusterNames {
		secrets = append(secrets, capisecret.Name(c, capisecret.Kubeconfig))
	}
	sort.Strings(secrets)
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: secrets}}
}
