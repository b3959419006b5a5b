package validate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/kustomize"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/placement"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/schemas"
	"cluster-init.dev/cluster-init/internal/source"
)

// applications validates the Applications committed for the management cluster (what its
// applications unit applies from clusters/<name>/apps), as far as the checkout can tell: each
// names clusters of this management cluster (the management cluster's own and the committed
// workload clusters: a name alone in the platform's namespace, namespace/name elsewhere) where the
// values let applications run, it is valid for the Application CRD, and its manifests build as Flux will build them for each cluster. A selector is left to the controller: the clusters' labels are the cluster's.
func applications(ctx context.Context, repoRoot string, management *render.Result, clusters []string, validator *schemas.Validator, problems *findings) {
	var fromGit *unstructured.Unstructured
	for _, o := range management.Objects {
		if o.Object.GetKind() == "Kustomization" && o.Object.GetName() == names.ApplicationsKustomization {
			fromGit = o.Object
		}
	}
	if fromGit == nil {
		return
	}
	path, _, _ := unstructured.NestedString(fromGit.Object, "spec", "path")
	if _, err := os.Stat(filepath.Join(repoRoot, filepath.Clean(path))); errors.Is(err, fs.ErrNotExist) {
		return // no application committed
	}
	snap, err := os.MkdirTemp("", "cluster-init-apps-")
	if err != nil {
		problems.add("applications", err.Error())
		return
	}
	defer os.RemoveAll(snap)
	if err := source.CopyTree(filepath.Join(repoRoot, "clusters"), filepath.Join(snap, "clusters")); err != nil {
		problems.add("applications", fmt.Sprintf("the applications of the checkout: %v", err))
		return
	}
	b, err := kustomize.NewBuilder(snap)
	if err != nil {
		problems.add("applications", err.Error())
		return
	}
	objs, err := b.Build(ctx, fromGit)
	if err != nil {
		problems.add("applications", fmt.Sprintf("%s does not build: %v", path, err))
		return
	}
	rules := placement.Rules{Management: client.ObjectKey{Namespace: names.Namespace, Name: management.Settings.Cluster.Name},
		OnManagement: management.Settings.Applications.OnManagement}
	for _, o := range objs {
		if o.GroupVersionKind() != appsv1.GroupVersion.WithKind(appsv1.ApplicationKind) {
			continue
		}
		target := "application " + o.GetName()
		// As the API server will see it: the CRD's schema and rules (generated from the API's types).
		if errs := validator.Validate(ctx, o); len(errs) > 0 {
			for _, e := range errs {
				problems.add(target, e.Error())
			}
			continue
		}
		var app appsv1.Application
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &app); err != nil {
			problems.add(target, fmt.Sprintf("spec: %v", err))
			continue
		}
		spec := app.Spec
		for _, name := range spec.Placement.Clusters {
			key := placement.Key(names.Namespace, name)
			if !slices.Contains(clusters, key.String()) {
				problems.add(target, fmt.Sprintf("placement.clusters: %q is not a cluster of this management cluster: expected one of %s (a name alone is a cluster of namespace %s; another namespace's is namespace/name)",
					name, strings.Join(clusters, ", "), names.Namespace))
			} else if why := rules.Refuses(key); why != "" {
				problems.add(target, fmt.Sprintf("placement.clusters: %q: %s", name, why))
			}
		}
		if spec.SourceRef.Name != "" && spec.SourceRef.Name != names.SourceRepository {
			continue // another repository: not in this checkout
		}
		if spec.Chart != nil {
			// helm-controller packages the chart of the source's directory.
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.Clean(spec.Chart.Path), "Chart.yaml")); err != nil {
				problems.add(target, fmt.Sprintf("spec.chart.path: %s is not a Helm chart of the checkout (no Chart.yaml)", spec.Chart.Path))
			}
			continue
		}
		// As Flux builds it for a cluster: the path of the checkout, the cluster's name substituted.
		ks := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
			"metadata": map[string]any{"name": o.GetName(), "namespace": o.GetNamespace()},
			"spec": map[string]any{"path": spec.Path, "targetNamespace": spec.TargetNamespace,
				"postBuild": map[string]any{"substitute": map[string]any{"CLUSTER_NAME": "cluster", "CLUSTER_NAMESPACE": "namespace"}}},
		}}
		rel := filepath.Clean(spec.Path)
		if st, err := os.Stat(filepath.Join(repoRoot, rel)); err != nil || !st.IsDir() {
			problems.add(target, fmt.Sprintf("spec.path: %s is not a directory of the checkout", spec.Path))
			continue
		}
		if !strings.HasPrefix(rel, "clusters"+string(filepath.Separator)) {
			if err := source.CopyTree(filepath.Join(repoRoot, rel), filepath.Join(snap, rel)); err != nil {
				problems.add(target, err.Error())
				continue
			}
		}
		if _, err := b.Build(ctx, ks); err != nil {
			problems.add(target, fmt.Sprintf("spec.path %s does not build: %v", spec.Path, err))
		}
	}
}
