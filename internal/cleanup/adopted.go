package cleanup

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/units"
)

// stepTimeout bounds each wait of the removal from an adopted cluster: past it, what still waits
// on a finalizer is named and released, so that cleanup never hangs.
const stepTimeout = 5 * time.Minute

// uninstall removes from an adopted management cluster what cluster-init installed into it, and
// leaves the cluster itself running. In an order where every controller still runs while it has
// something to remove: the workload clusters through Cluster API, then the units, dependents
// first, each through Flux (which deletes what it applied, CRDs and namespaces included), then
// the release's namespace, then Flux itself and the marker.
func uninstall(ctx context.Context, c *kube.Cluster, flux []*unstructured.Unstructured, log func(string, ...any)) ([]string, error) {
	// Nothing may re-create what is being removed: the releases stop (the umbrella and the workload
	// clusters'), and so do the Kustomizations that apply them from git.
	if err := suspendSources(ctx, c, log); err != nil {
		return nil, err
	}
	workloads, err := deleteAllClusters(ctx, c, log)
	if err != nil {
		return workloads, err
	}
	if err := deleteUnits(ctx, c, log); err != nil {
		return workloads, err
	}
	log("deleting namespace %s (the release, its values and sources)", names.Namespace)
	if err := deleteAndWait(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.Namespace}}, log); err != nil {
		return workloads, err
	}
	log("deleting Flux (%d objects)", len(flux))
	if _, err := apply.New(c).Delete(ctx, flux, stepTimeout); err != nil {
		return workloads, err
	}
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kindcluster.MarkerNamespace, Name: kindcluster.MarkerName}}
	if err := c.Client.Delete(ctx, marker); client.IgnoreNotFound(err) != nil {
		return workloads, fmt.Errorf("delete the marker ConfigMap %s/%s: %w", marker.Namespace, marker.Name, err)
	}
	return workloads, nil
}

// suspendSources suspends the umbrella release, the Kustomizations that apply it and its values,
// and everything of the tenants (their Kustomizations and their clusters' releases): from then on
// only cleanup removes things, and nothing comes back from git.
func suspendSources(ctx context.Context, c *kube.Cluster, log func(string, ...any)) error {
	tenants := &corev1.NamespaceList{}
	if err := c.Client.List(ctx, tenants, client.HasLabels{names.TenantLabel}); err != nil {
		return fmt.Errorf("list the tenants' namespaces: %w", err)
	}
	var namespaces []string
	for _, ns := range tenants.Items {
		namespaces = append(namespaces, ns.Name)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))
	suspend := func(obj client.Object) error {
		if err := c.Client.Patch(ctx, obj, patch); client.IgnoreNotFound(err) != nil && !isNoMatch(err) {
			return fmt.Errorf("suspend %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
		return nil
	}
	if err := suspend(&helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.Release}}); err != nil {
		return err
	}
	// The units that apply the release and its values, as the release's graph names them.
	u, err := readiness.ReadUnits(ctx, c.Client, names.Namespace)
	if err != nil {
		return err
	}
	if u.Graph != nil {
		for _, role := range []string{units.RoleRelease, units.RoleEnvironment} {
			if unit, ok := u.Graph.ByRole(role); ok {
				log("suspending unit %s (nothing comes back from git)", unit.Name)
				if err := suspend(&kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: unit.Object}}); err != nil {
					return err
				}
			}
		}
	}
	for _, ns := range namespaces {
		tks := &kustomizev1.KustomizationList{}
		if err := c.Client.List(ctx, tks, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list the Kustomizations of tenant %s: %w", ns, err)
		}
		hrs := &helmv2.HelmReleaseList{}
		if err := c.Client.List(ctx, hrs, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list the releases of tenant %s: %w", ns, err)
		}
		log("suspending tenant %s: %d Kustomizations, %d releases", ns, len(tks.Items), len(hrs.Items))
		for i := range tks.Items {
			if err := suspend(&tks.Items[i]); err != nil {
				return err
			}
		}
		for i := range hrs.Items {
			if err := suspend(&hrs.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteAllClusters deletes every Cluster API cluster the adopted cluster manages (the workload
// clusters: it defines none of its own) through Cluster API, which still runs, and waits until
// they are gone.
func deleteAllClusters(ctx context.Context, c *kube.Cluster, log func(string, ...any)) ([]string, error) {
	list := &clusterv1.ClusterList{}
	if err := c.Client.List(ctx, list); err != nil {
		if isNoMatch(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list the workload clusters: %w", err)
	}
	var workloads []string
	for i := range list.Items {
		cl := &list.Items[i]
		workloads = append(workloads, cl.Name)
		log("deleting workload cluster %s/%s (its machines go with it)", cl.Namespace, cl.Name)
		if err := c.Client.Delete(ctx, cl); client.IgnoreNotFound(err) != nil {
			return workloads, fmt.Errorf("delete Cluster %s/%s: %w", cl.Namespace, cl.Name, err)
		}
	}
	if len(workloads) == 0 {
		return nil, nil
	}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 3*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		left := &clusterv1.ClusterList{}
		if err := c.Client.List(ctx, left); err != nil {
			return false, nil
		}
		if len(left.Items) > 0 {
			log("waiting for %d workload clusters to be deleted (%s)", len(left.Items), time.Since(start).Round(time.Second))
		}
		return len(left.Items) == 0, nil
	})
	if err != nil {
		return workloads, fmt.Errorf("the workload clusters are still being deleted after %s: %w", time.Since(start).Round(time.Second), err)
	}
	return workloads, nil
}

// deleteUnits deletes the Kustomizations of the units, dependents first (in batches of those no
// remaining one depends on), each waited for until Flux has removed what it applied.
func deleteUnits(ctx context.Context, c *kube.Cluster, log func(string, ...any)) error {
	ks := &kustomizev1.KustomizationList{}
	if err := c.Client.List(ctx, ks, client.InNamespace(names.Namespace)); err != nil {
		if isNoMatch(err) {
			return nil
		}
		return fmt.Errorf("list the units: %w", err)
	}
	deps := map[string][]string{}
	namespaces := map[string][]string{} // the namespaces each unit applied
	for _, k := range ks.Items {
		namespaces[k.Name] = inventoryNamespaces(&k)
		for _, d := range k.Spec.DependsOn {
			if d.Namespace == "" || d.Namespace == names.Namespace {
				deps[k.Name] = append(deps[k.Name], d.Name)
			}
		}
		if deps[k.Name] == nil {
			deps[k.Name] = []string{}
		}
	}
	for _, batch := range dependentsFirst(deps) {
		log("deleting units %s (Flux removes what each applied)", strings.Join(batch, ", "))
		for _, name := range batch {
			k := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: name}}
			if err := c.Client.Delete(ctx, k); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete unit %s: %w", name, err)
			}
		}
		for _, name := range batch {
			if err := waitGone(ctx, c, &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: name}}, log); err != nil {
				return err
			}
			// Flux deleted its namespaces without waiting for them: what runs there goes before
			// what it depends on.
			for _, ns := range namespaces[name] {
				if err := waitGone(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, log); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// inventoryNamespaces are the namespaces a Kustomization deletes with itself, as its inventory
// says ("_<name>__Namespace").
func inventoryNamespaces(k *kustomizev1.Kustomization) []string {
	// Only a pruning Kustomization deletes what it applied.
	if k.Status.Inventory == nil || !k.Spec.Prune || k.Spec.Suspend {
		return nil
	}
	var out []string
	for _, e := range k.Status.Inventory.Entries {
		if name, ok := strings.CutSuffix(strings.TrimPrefix(e.ID, "_"), "__Namespace"); ok && strings.HasPrefix(e.ID, "_") {
			out = append(out, name)
		}
	}
	return out
}

// dependentsFirst orders a dependency graph (name -> its dependencies) for deletion: batches of
// names no remaining one depends on. A cycle (which the chart refuses) ends in one last batch.
func dependentsFirst(deps map[string][]string) [][]string {
	left := map[string]bool{}
	for n := range deps {
		left[n] = true
	}
	var batches [][]string
	for len(left) > 0 {
		needed := map[string]bool{}
		for n := range left {
			for _, d := range deps[n] {
				needed[d] = true
			}
		}
		var batch []string
		for n := range left {
			if !needed[n] {
				batch = append(batch, n)
			}
		}
		if len(batch) == 0 {
			for n := range left {
				batch = append(batch, n)
			}
		}
		sort.Strings(batch)
		for _, n := range batch {
			delete(left, n)
		}
		batches = append(batches, batch)
	}
	return batches
}

// deleteAndWait deletes obj and waits until it is gone.
func deleteAndWait(ctx context.Context, c *kube.Cluster, obj client.Object, log func(string, ...any)) error {
	if err := c.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s: %w", describe(obj), err)
	}
	return waitGone(ctx, c, obj, log)
}

// waitGone waits until obj is gone. Past stepTimeout its finalizers are released (their
// controller will not finish): it is named, with what may be left behind.
func waitGone(ctx context.Context, c *kube.Cluster, obj client.Object, log func(string, ...any)) error {
	start := time.Now()
	last := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, stepTimeout, true, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if time.Since(last) > 15*time.Second {
			log("waiting for %s to be deleted (%s)", describe(obj), time.Since(start).Round(time.Second))
			last = time.Now()
		}
		return false, nil
	})
	if err == nil || ctx.Err() != nil {
		return err
	}
	log("%s is still being deleted after %s: releasing its finalizers %v (what they guard may be left)", describe(obj), stepTimeout, obj.GetFinalizers())
	if err := c.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("release the finalizers of %s: %w", describe(obj), err)
	}
	return nil
}

func describe(obj client.Object) string {
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
	if i := strings.LastIndex(kind, "."); i >= 0 {
		kind = kind[i+1:]
	}
	if obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

func isNoMatch(err error) bool { return apimeta.IsNoMatchError(err) }
