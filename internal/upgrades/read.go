package upgrades

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/validate"
	"cluster-init.dev/cluster-init/internal/workspace"
)

// Read reads the clusters and components of the management cluster c (whose own Cluster is m)
// against what the workspace's checkout asks for.
func Read(ctx context.Context, c *kube.Cluster, w *workspace.Workspace, m ManagementCluster) (Plan, error) {
	clusters, err := Clusters(ctx, c.Client, m)
	if err != nil {
		return Plan{}, fmt.Errorf("read the clusters of the %s cluster: %w", c.Name, err)
	}
	checkout, err := readCheckout(ctx, w)
	if err != nil {
		return Plan{}, err
	}
	components, err := Components(ctx, c.Client, checkout)
	if err != nil {
		return Plan{}, fmt.Errorf("read the components of the %s cluster: %w", c.Name, err)
	}
	return Plan{Clusters: clusters, Components: components}, nil
}

// readCheckout renders the checkout's management cluster, as it runs after the pivot, and Flux as
// bootstrap installs it there, and lists the controllers (Deployments and their images) and the
// CustomResourceDefinitions (and their versions) of every unit that runs in the management
// cluster itself.
func readCheckout(ctx context.Context, w *workspace.Workspace) (Checkout, error) {
	objects, res, err := renderManagement(ctx, w)
	if err != nil {
		return Checkout{}, err
	}
	// A unit applied through a kubeconfig runs its objects in another cluster (a workload
	// cluster's CNI, metrics-server): not the management cluster's components.
	remote := map[string]bool{}
	checkout := Checkout{Units: map[string]client.ObjectKey{}}
	for _, u := range res.Graph.Enabled() {
		remote[u.Name] = u.Kubeconfig
		if !u.Kubeconfig {
			checkout.Units[u.Name] = client.ObjectKey{Namespace: names.Namespace, Name: u.Object}
		}
	}
	for _, o := range objects {
		if o.Unit == "" || remote[o.Unit] {
			continue
		}
		switch o.Object.GroupVersionKind().GroupKind().String() {
		case "Deployment.apps":
			d := WantedDeployment{Unit: o.Unit, Namespace: o.Object.GetNamespace(), Name: o.Object.GetName()}
			d.Images = fieldOfEach(o.Object, "image", "spec", "template", "spec", "containers")
			checkout.Deployments = append(checkout.Deployments, d)
		case "CustomResourceDefinition.apiextensions.k8s.io":
			crd := WantedCRD{Unit: o.Unit, Name: o.Object.GetName()}
			crd.Versions = fieldOfEach(o.Object, "name", "spec", "versions")
			checkout.CRDs = append(checkout.CRDs, crd)
		}
	}
	return checkout, nil
}

// renderManagement renders the release of the management cluster after the pivot, and Flux
// (its objects under the unit "flux").
func renderManagement(ctx context.Context, w *workspace.Workspace) ([]render.Object, *render.Result, error) {
	opts := w.RenderOptions(render.ContextManagement)
	for _, t := range validate.Targets() {
		if t.Context == render.ContextManagement && len(t.State) > 0 {
			opts.State = t.State // after the pivot: the release that runs there
		}
	}
	r, err := w.Renderer()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	res, err := r.Render(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("render the checkout's management cluster: %w", err)
	}
	flux, err := r.Flux(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("render the checkout's Flux: %w", err)
	}
	objects := make([]render.Object, 0, len(flux)+len(res.Objects))
	for _, o := range flux {
		objects = append(objects, render.Object{Unit: "flux", Object: o})
	}
	return append(objects, res.Objects...), res, nil
}

// fieldOfEach is the string field of each item of the list at path in obj.
func fieldOfEach(obj *unstructured.Unstructured, field string, path ...string) []string {
	items, _, _ := unstructured.NestedSlice(obj.Object, path...)
	var out []string
	for _, item := range items {
		if m, ok := item.(map[string]any); ok {
			if v, ok := m[field].(string); ok {
				out = append(out, v)
			}
		}
	}
	return out
}
