package validate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/boundedfile"
	"cluster-init.dev/cluster-init/internal/kustomize"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/placement"
	"cluster-init.dev/cluster-init/internal/rbacrules"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/schemas"
)

// applications validates the Applications committed for the management cluster (what its
// applications unit applies from clusters/<name>/apps), as far as the checkout can tell: the
// directory holds only what the applications' account may write, each Application names clusters
// of this management cluster (the management cluster's own and the committed workload clusters: a
// name alone in the platform's namespace, namespace/name elsewhere) where the values let
// applications run, it is valid for the Application CRD, its selector parses, and its manifests
// build as Flux will build them for each cluster. What a selector matches is left to the
// controller: the clusters' labels are the cluster's. Every file is read bounded (boundedfile).
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
	dir := filepath.ToSlash(filepath.Clean(path))
	// The applications' directory as source-controller packs it (no link, no special file),
	// each file read within its bounds and checked before kustomize parses it.
	tree, err := boundedfile.ReadTree(repoRoot, dir, boundedfile.PlacedManifest, nil)
	if err != nil {
		problems.add("applications", err.Error()) // names the file, or the bound
		return
	}
	for _, e := range tree.Unread {
		problems.add("applications", fmt.Sprintf("%v", e))
	}
	if len(tree.Files) == 0 {
		return // no application committed
	}
	snap, err := os.MkdirTemp("", "cluster-init-apps-")
	if err != nil {
		problems.add("applications", err.Error())
		return
	}
	defer os.RemoveAll(snap)
	if err := tree.Write(snap); err != nil {
		problems.add("applications", err.Error())
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
	var rendered []*unstructured.Unstructured
	for _, o := range management.Objects {
		rendered = append(rendered, o.Object)
	}
	account, _, _ := unstructured.NestedString(fromGit.Object, "spec", "serviceAccountName")
	writes := rbacrules.Of(rendered, fromGit.GetNamespace(), account)
	copied := map[string]bool{dir: true}
	known := map[string]bool{}
	for _, c := range clusters {
		known[c] = true
	}
	for _, o := range objs {
		if why := refusedWrite(validator, writes, fmt.Sprintf("the applications' account (ServiceAccount %s/%s)", fromGit.GetNamespace(), account), o); why != "" {
			problems.add("applications", fmt.Sprintf("%s: %s %s: %s: kustomize-controller would apply none of the directory, and no application would change; expected Applications only", path, o.GetKind(), o.GetName(), why))
			continue
		}
		if o.GroupVersionKind() != appsv1alpha1.GroupVersion.WithKind(appsv1alpha1.ApplicationKind) {
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
		var app appsv1alpha1.Application
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &app); err != nil {
			problems.add(target, fmt.Sprintf("spec: %v", err))
			continue
		}
		spec := app.Spec
		if spec.Placement.Selector != nil {
			if _, err := metav1.LabelSelectorAsSelector(spec.Placement.Selector); err != nil {
				problems.add(target, fmt.Sprintf("placement.selector: %v: expected a label selector the API server parses (matchLabels, matchExpressions with In, NotIn, Exists, DoesNotExist)", err))
			}
		}
		for _, name := range spec.Placement.Clusters {
			key := placement.Key(names.Namespace, name)
			if !known[key.String()] {
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
		rel := filepath.ToSlash(filepath.Clean(spec.Path))
		if st, err := os.Lstat(filepath.Join(repoRoot, rel)); err != nil || !st.IsDir() {
			problems.add(target, fmt.Sprintf("spec.path: %s is not a directory of the checkout", spec.Path))
			continue
		}
		if !copied[rel] && !strings.HasPrefix(rel, dir+"/") {
			copied[rel] = true
			manifests, err := boundedfile.ReadTree(repoRoot, rel, boundedfile.PlacedManifest, nil)
			if err == nil {
				err = manifests.Write(snap)
			}
			if err != nil {
				problems.add(target, fmt.Sprintf("spec.path: %v", err))
				continue
			}
			for _, e := range manifests.Unread {
				problems.add(target, fmt.Sprintf("spec.path: %v", e))
			}
		}
		if _, err := b.Build(ctx, ks); err != nil {
			problems.add(target, fmt.Sprintf("spec.path %s does not build: %v", spec.Path, err))
		}
	}
}
