package cleanup

import (
	"context"
	"fmt"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/clusterdeletion"
	"cluster-init.dev/cluster-init/internal/envmarker"
	"cluster-init.dev/cluster-init/internal/fluxobjects"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/units"
)

// removeAdopted removes what cluster-init installed into the adopted management cluster and
// the workload clusters it made, and leaves the cluster itself running.
func (c *cleaner) removeAdopted(ctx context.Context, m *kube.Cluster) error {
	t, log := c.t, c.log
	log("the management cluster of %s is adopted (%s): removing what cluster-init installed, the cluster itself stays", t.Environment, m.Config.Host)
	flux, err := t.flux(ctx)
	if err != nil {
		return err
	}
	workloads, err := uninstall(ctx, m, flux, log)
	if err != nil {
		return err
	}
	// Their machines, should Cluster API have left one.
	if t.CAPD && len(workloads) > 0 {
		if err := removeContainers(ctx, c.containers, workloads, c.owned, log); err != nil {
			return err
		}
	}
	return c.rec.Forget(log)
}

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
	// The applications first: they may run on the workload clusters, which must still answer
	// for Flux to remove them there.
	if err := deleteApplications(ctx, c, log); err != nil {
		log("%v: going on", err)
	}
	workloads, err := deleteWorkloadClustersOf(ctx, c, log)
	if err != nil {
		// Their containers are removed directly afterwards.
		log("%v: going on", err)
	}
	if err := deleteUnits(ctx, c, log); err != nil {
		return workloads, err
	}
	log("deleting namespace %s (the release, its values and sources)", names.Namespace)
	if err := deleteAndWait(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.Namespace}}, log); err != nil {
		return workloads, err
	}
	// As `flux uninstall` does: what Flux objects are left (a taken-over installation's) are let
	// go without garbage collection, then the controllers and the CRDs go.
	if err := releaseFluxObjects(ctx, c, log); err != nil {
		return workloads, err
	}
	log("deleting Flux (%d objects)", len(flux))
	if _, err := apply.New(c).Delete(ctx, flux, stepTimeout); err != nil {
		return workloads, err
	}
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: envmarker.Namespace, Name: envmarker.Name}}
	if err := c.Client.Delete(ctx, marker); client.IgnoreNotFound(err) != nil {
		return workloads, fmt.Errorf("delete the marker ConfigMap %s/%s: %w", marker.Namespace, marker.Name, err)
	}
	return workloads, nil
}

// suspendSources suspends the umbrella release, the Kustomizations that apply it and its values,
// and everything of the tenants (their Kustomizations and their clusters' releases): from then on
// only cleanup removes things, and nothing comes back from git.
func suspendSources(ctx context.Context, c *kube.Cluster, log func(string, ...any)) error {
	namespaces, err := tenantNamespaces(ctx, c)
	if err != nil {
		return err
	}
	// The sources first: no new commit arrives while cleanup runs.
	for _, src := range []client.Object{
		&sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.SourceRepository}},
		&sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.SourceRepository}},
		&helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.Release}},
	} {
		if err := fluxobjects.Suspend(ctx, c.Client, src); err != nil {
			return err
		}
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
				if err := fluxobjects.Suspend(ctx, c.Client, &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: unit.Object}}); err != nil {
					return err
				}
			}
		}
	}
	for _, ns := range namespaces {
		suspended, err := fluxobjects.SuspendAll(ctx, c.Client, ns)
		if err != nil {
			return fmt.Errorf("tenant %s: %w", ns, err)
		}
		log("suspended tenant %s: %d Kustomizations, %d releases", ns, len(suspended.Kustomizations), len(suspended.HelmReleases))
	}
	return nil
}

// deleteWorkloadClustersOf deletes the workload clusters of the tenants (the Cluster API
// clusters in their namespaces) through Cluster API, which still runs, and waits until they are
// gone.
func deleteWorkloadClustersOf(ctx context.Context, c *kube.Cluster, log func(string, ...any)) ([]string, error) {
	tenants, err := tenantNamespaces(ctx, c)
	if err != nil {
		return nil, err
	}
	var workloads []string
	var keys []client.ObjectKey
	for _, ns := range tenants {
		list := &clusterv1.ClusterList{}
		if err := c.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			if apimeta.IsNoMatchError(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("list the workload clusters of tenant %s: %w", ns, err)
		}
		for i := range list.Items {
			cl := &list.Items[i]
			workloads = append(workloads, cl.Name)
			keys = append(keys, client.ObjectKeyFromObject(cl))
			log("deleting workload cluster %s/%s (its machines go with it)", cl.Namespace, cl.Name)
		}
	}
	_, err = clusterdeletion.Run(ctx, c.Client, clusterdeletion.Deletion{Clusters: keys, Timeout: 10 * time.Minute, Progress: progressLog("the workload clusters", log)})
	return workloads, err
}

// tenantNamespaces are the namespaces of the tenants of workload clusters.
func tenantNamespaces(ctx context.Context, c *kube.Cluster) ([]string, error) {
	list := &corev1.NamespaceList{}
	if err := c.Client.List(ctx, list, client.HasLabels{names.TenantLabel}); err != nil {
		return nil, fmt.Errorf("list the tenants' namespaces: %w", err)
	}
	var out []string
	for _, ns := range list.Items {
		out = append(out, ns.Name)
	}
	return out, nil
}

// deleteUnits deletes the Kustomizations of the units, dependents first (in batches of those no
// remaining one depends on), each waited for until Flux has removed what it applied.
func deleteUnits(ctx context.Context, c *kube.Cluster, log func(string, ...any)) error {
	ks := &kustomizev1.KustomizationList{}
	if err := c.Client.List(ctx, ks, client.InNamespace(names.Namespace)); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("list the units: %w", err)
	}
	deps := map[string][]string{}
	applied := map[string]deletedWith{}
	for _, k := range ks.Items {
		applied[k.Name] = inventoryOf(&k)
		deps[k.Name] = []string{}
		for _, d := range k.Spec.DependsOn {
			if d.Namespace == "" || d.Namespace == names.Namespace {
				deps[k.Name] = append(deps[k.Name], d.Name)
			}
		}
	}
	for _, batch := range units.DependentsFirst(deps) {
		log("deleting units %s (Flux removes what each applied)", strings.Join(batch, ", "))
		for _, name := range batch {
			k := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: name}}
			if err := c.Client.Delete(ctx, k); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete unit %s: %w", name, err)
			}
		}
		for _, name := range batch {
			released, err := waitGone(ctx, c, &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: name}}, log)
			if err != nil {
				return err
			}
			if released {
				continue // its garbage collection did not run: nothing of it is being deleted
			}
			// Flux deleted them without waiting: a release is uninstalled by helm-controller, a
			// namespace empties. What runs there goes before what it depends on.
			for _, hr := range applied[name].releases {
				if _, err := waitGone(ctx, c, &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: hr.Namespace, Name: hr.Name}}, log); err != nil {
					return err
				}
			}
			gone := applied[name].namespaces
			if len(applied[name].releases) > 0 {
				// What the releases' uninstall deleted: the tenants' namespaces among them.
				tenants, err := tenantNamespaces(ctx, c)
				if err != nil {
					return err
				}
				gone = append(gone, tenants...)
			}
			for _, ns := range gone {
				if _, err := waitGone(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, log); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// deletedWith is what a Kustomization deletes with itself, as its inventory says.
type deletedWith struct {
	namespaces []string
	releases   []client.ObjectKey
}

// inventoryOf reads the namespaces ("_<name>__Namespace") and HelmReleases
// ("<ns>_<name>_helm.toolkit.fluxcd.io_HelmRelease") a Kustomization deletes with itself.
func inventoryOf(k *kustomizev1.Kustomization) deletedWith {
	var out deletedWith
	// Only a pruning Kustomization deletes what it applied.
	if k.Status.Inventory == nil || !k.Spec.Prune || k.Spec.Suspend {
		return out
	}
	for _, e := range k.Status.Inventory.Entries {
		parts := strings.Split(e.ID, "_")
		if len(parts) != 4 {
			continue
		}
		switch {
		case parts[0] == "" && parts[2] == "" && parts[3] == "Namespace":
			out.namespaces = append(out.namespaces, parts[1])
		case parts[2] == helmv2.GroupVersion.Group && parts[3] == helmv2.HelmReleaseKind:
			out.releases = append(out.releases, client.ObjectKey{Namespace: parts[0], Name: parts[1]})
		}
	}
	return out
}

// deleteAndWait deletes obj and waits until it is gone.
func deleteAndWait(ctx context.Context, c *kube.Cluster, obj client.Object, log func(string, ...any)) error {
	if err := c.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s: %w", describe(obj), err)
	}
	_, err := waitGone(ctx, c, obj, log)
	return err
}

// waitGone waits until obj is gone. Past stepTimeout its finalizers are released (their
// controller will not finish): it is named, with what they guarded, and released is true.
func waitGone(ctx context.Context, c *kube.Cluster, obj client.Object, log func(string, ...any)) (released bool, err error) {
	if err := waitDeleted(ctx, c, obj, log); err == nil || ctx.Err() != nil {
		return false, err
	}
	if _, ns := obj.(*corev1.Namespace); ns {
		// A namespace waits for its content (spec.finalizers), which nothing here can release.
		log("%s is still being deleted after %s: going on", describe(obj), stepTimeout)
		return false, nil
	}
	log("%s is still being deleted after %s: releasing its finalizers %v (what they guard may be left)", describe(obj), stepTimeout, obj.GetFinalizers())
	if err := c.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); client.IgnoreNotFound(err) != nil {
		return true, fmt.Errorf("release the finalizers of %s: %w", describe(obj), err)
	}
	return true, nil
}

// waitDeleted polls until obj is not found, for stepTimeout, saying every 15s what it waits for.
func waitDeleted(ctx context.Context, c *kube.Cluster, obj client.Object, log func(string, ...any)) error {
	start := time.Now()
	last := start
	return wait.PollUntilContextTimeout(ctx, 2*time.Second, stepTimeout, true, func(ctx context.Context) (bool, error) {
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

// releaseFluxObjects lets go, without garbage collection, of every Flux object left in the
// cluster (a taken-over installation's, or one whose controller could not finish): their
// finalizers removed, then deleted, so that Flux's CRDs can go.
func releaseFluxObjects(ctx context.Context, c *kube.Cluster, log func(string, ...any)) error {
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.Client.List(ctx, crds); err != nil {
		return fmt.Errorf("list the CRDs: %w", err)
	}
	for _, crd := range crds.Items {
		if !strings.HasSuffix(crd.Spec.Group, ".toolkit.fluxcd.io") {
			continue
		}
		version := ""
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				version = v.Name
			}
		}
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(crd.Spec.Group + "/" + version)
		list.SetKind(crd.Spec.Names.ListKind)
		if err := c.Client.List(ctx, list); err != nil {
			return fmt.Errorf("list the %s left: %w", crd.Spec.Names.Plural, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			log("letting go of %s %s/%s (no garbage collection)", o.GetKind(), o.GetNamespace(), o.GetName())
			if len(o.GetFinalizers()) > 0 {
				if err := c.Client.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); client.IgnoreNotFound(err) != nil {
					return fmt.Errorf("release %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
			if err := c.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
	}
	return nil
}
