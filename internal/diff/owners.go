package diff

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/validate"
	"cluster-init.dev/cluster-init/internal/values"
	"cluster-init.dev/cluster-init/internal/workloads"
	"cluster-init.dev/cluster-init/internal/workspace"
)

// Owners renders the workspace's checkout as the management cluster c renders it (its recorded
// state) and groups the objects by the Flux object that applies them, the tenants' clusters from
// their checkouts (namespace → directory) too. skipped says what is not compared.
func Owners(ctx context.Context, c *kube.Cluster, w *workspace.Workspace, checkouts map[string]string) (owners []Owner, skipped []string, err error) {
	res, err := renderAsTheClusterDoes(ctx, c, w)
	if err != nil {
		return nil, nil, err
	}
	g := grouping{byKey: map[string]*Owner{}}
	g.addUnits(res)
	plan, err := workloads.Read(ctx, w.Root, res, checkouts)
	if err != nil {
		return nil, nil, fmt.Errorf("read the workload clusters of the checkout: %w", err)
	}
	g.addTenants(plan)
	for _, o := range g.byKey {
		owners = append(owners, *o)
	}
	sort.Slice(owners, func(i, j int) bool { return owners[i].Label < owners[j].Label })
	return owners, g.skipped, nil
}

// renderAsTheClusterDoes renders the management cluster's release with what bootstrap decided and
// recorded in the cluster c: the same values, or every run would differ.
func renderAsTheClusterDoes(ctx context.Context, c *kube.Cluster, w *workspace.Workspace) (*render.Result, error) {
	opts := w.RenderOptions(render.ContextManagement)
	// The release reads the source, the --values files and the secrets' revision from
	// ConfigMaps of the cluster.
	if err := fromCluster(ctx, c.Client, &opts); err != nil {
		return nil, err
	}
	st, found, err := managementstate.Read(ctx, c.Client)
	if err != nil {
		return nil, fmt.Errorf("read the state of the %s cluster: %w", c.Name, err)
	}
	if found {
		opts.State = []values.Layer{st.Layer()}
	} else {
		for _, t := range validate.Targets() {
			if t.Context == render.ContextManagement && len(t.State) > 0 {
				opts.State = t.State // after the pivot: the release that runs there
			}
		}
	}
	r, err := w.Renderer()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	res, err := r.Render(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("render the checkout's management cluster: %w", err)
	}
	return res, nil
}

// grouping gathers the rendered objects by the Flux object that applies them.
type grouping struct {
	byKey   map[string]*Owner
	skipped []string
}

func (g *grouping) owner(kind, namespace, name, label string) *Owner {
	key := kind + "/" + namespace + "/" + name
	if o, ok := g.byKey[key]; ok {
		return o
	}
	o := &Owner{Kind: kind, Namespace: namespace, Name: name, Label: label}
	g.byKey[key] = o
	return o
}

// addUnits groups the release's objects under the umbrella HelmRelease, a unit's Kustomization or
// a unit's HelmRelease; units applied into workload clusters are skipped.
func (g *grouping) addUnits(res *render.Result) {
	units := map[string]string{} // unit -> its Kustomization
	for _, u := range res.Graph.Enabled() {
		if u.Kubeconfig {
			g.skipped = append(g.skipped, fmt.Sprintf("unit %s (applied into workload clusters)", u.Name))
			continue
		}
		units[u.Name] = u.Object
	}
	for _, o := range res.Objects {
		var to *Owner
		switch {
		case o.Unit == "" && o.Origin == render.UmbrellaChart:
			to = g.owner(KindHelmRelease, names.Namespace, names.Release, "release "+names.Release)
		case o.Unit == "":
			continue // applied by the bootstrap command, not from git
		case o.Release != nil:
			if _, ok := units[o.Unit]; !ok {
				continue
			}
			to = g.owner(KindHelmRelease, o.Release.Namespace, o.Release.Name, fmt.Sprintf("unit %s, HelmRelease %s", o.Unit, o.Release.Name))
		default:
			ks, ok := units[o.Unit]
			if !ok {
				continue
			}
			to = g.owner(KindKustomization, names.Namespace, ks, "unit "+o.Unit)
		}
		to.Desired = append(to.Desired, asApplied(o.Object))
	}
}

// addTenants groups the tenants' clusters under their tenant's Kustomization, for the tenants
// whose checkout was given.
func (g *grouping) addTenants(plan *workloads.Plan) {
	for _, t := range plan.Tenants {
		if t.Checkout == "" {
			g.skipped = append(g.skipped, fmt.Sprintf("tenant %s (its repository %s: give --tenant %s=DIR)", t.Namespace, t.Repository, t.Namespace))
			continue
		}
		o := g.owner(KindKustomization, t.Namespace, t.Kustomization.GetName(), "tenant "+t.Namespace)
		o.Desired = []*unstructured.Unstructured{}
	}
	for _, cl := range plan.Clusters {
		if cl.Tenant.Checkout == "" {
			continue
		}
		o := g.owner(KindKustomization, cl.Tenant.Namespace, cl.Tenant.Kustomization.GetName(), "tenant "+cl.Tenant.Namespace)
		o.Desired = append(o.Desired, asApplied(cl.Release))
	}
}

// asApplied is a rendered object as Flux applies it: without the annotations the render adds to
// say where it comes from.
func asApplied(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	ann := out.GetAnnotations()
	delete(ann, names.UnitAnnotation)
	delete(ann, names.OriginAnnotation)
	if len(ann) == 0 {
		ann = nil
	}
	out.SetAnnotations(ann)
	return out
}

// fromCluster sets opts' source, overrides and secrets revision from the ConfigMaps bootstrap
// applied into the cluster (names.SourceConfigMap, names.OverridesConfigMap), where they exist.
func fromCluster(ctx context.Context, c client.Reader, opts *render.Options) error {
	read := func(name string) (values.Layer, bool, error) {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, client.ObjectKey{Namespace: names.Namespace, Name: name}, cm)
		if apierrors.IsNotFound(err) {
			return values.Layer{}, false, nil
		}
		if err != nil {
			return values.Layer{}, false, fmt.Errorf("read ConfigMap %s/%s: %w", names.Namespace, name, err)
		}
		l, err := values.ParseLayer(fmt.Sprintf("(ConfigMap %s/%s of the cluster)", names.Namespace, name), []byte(cm.Data[names.ValuesKey]), false)
		return l, err == nil, err
	}
	src, ok, err := read(names.SourceConfigMap)
	if err != nil {
		return err
	}
	if ok {
		merged := values.Merge(src)
		if s, isMap := merged["source"].(map[string]any); isMap {
			opts.Source = s
		}
		if r, isString := merged["secrets_revision"].(string); isString {
			opts.SecretsRevision = r
		}
	}
	overrides, ok, err := read(names.OverridesConfigMap)
	if err != nil {
		return err
	}
	if ok {
		opts.Overrides = []values.Layer{overrides}
	}
	return nil
}
