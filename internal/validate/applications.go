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
	c := appsCheck{repoRoot: repoRoot, dir: dir, snap: snap, builder: b, clusters: clusters, validator: validator, problems: problems,
		rules: placement.Rules{Management: client.ObjectKey{Namespace: names.Namespace, Name: management.Settings.Cluster.Name},
			OnManagement: management.Settings.Applications.OnManagement},
		known: map[string]bool{}, copied: map[string]bool{dir: true}}
	for _, cl := range clusters {
		c.known[cl] = true
	}
	var rendered []*unstructured.Unstructured
	for _, o := range management.Objects {
		rendered = append(rendered, o.Object)
	}
	account, _, _ := unstructured.NestedString(fromGit.Object, "spec", "serviceAccountName")
	writes := rbacrules.Of(rendered, fromGit.GetNamespace(), account)
	for _, o := range objs {
		if why := refusedWrite(validator, writes, fmt.Sprintf("the applications' account (ServiceAccount %s/%s)", fromGit.GetNamespace(), account), o); why != "" {
			problems.add("applications", fmt.Sprintf("%s: %s %s: %s: kustomize-controller would apply none of the directory, and no application would change; expected Applications only", path, o.GetKind(), o.GetName(), why))
			continue
		}
		if o.GroupVersionKind() == appsv1alpha1.GroupVersion.WithKind(appsv1alpha1.ApplicationKind) {
			c.application(ctx, o)
		}
	}
}

// appsCheck is the check of the committed Applications, one at a time, against the checkout
// (repoRoot; the applications' directory dir, copied with what the applications build from into
// snap, which builder builds) and the clusters of the management cluster.
type appsCheck struct {
	repoRoot, dir, snap string
	builder             *kustomize.Builder
	clusters            []string
	known               map[string]bool // the clusters, as a set
	copied              map[string]bool // the directories copied into snap
	rules               placement.Rules
	validator           *schemas.Validator
	problems            *findings
}

// application checks one Application: as the API server will see it (the CRD's schema and rules,
// generated from the API's types), where it is placed, and what it runs.
func (c appsCheck) application(ctx context.Context, o *unstructured.Unstructured) {
	target := "application " + o.GetName()
	if errs := c.validator.Validate(ctx, o); len(errs) > 0 {
		for _, e := range errs {
			c.problems.add(target, e.Error())
		}
		return
	}
	var app appsv1alpha1.Application
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &app); err != nil {
		c.problems.add(target, fmt.Sprintf("spec: %v", err))
		return
	}
	c.placement(target, app.Spec.Placement)
	spec := app.Spec
	if spec.SourceRef.Name != "" && spec.SourceRef.Name != names.SourceRepository {
		return // another repository: not in this checkout
	}
	if spec.Chart != nil {
		// helm-controller packages the chart of the source's directory.
		if _, err := os.Stat(filepath.Join(c.repoRoot, filepath.Clean(spec.Chart.Path), "Chart.yaml")); err != nil {
			c.problems.add(target, fmt.Sprintf("spec.chart.path: %s is not a Helm chart of the checkout (no Chart.yaml)", spec.Chart.Path))
		}
		return
	}
	c.manifests(ctx, target, o, spec)
}

// placement checks an Application's selector, and that the clusters it names are this
// management cluster's and the values let applications run there.
func (c appsCheck) placement(target string, p appsv1alpha1.Placement) {
	if p.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(p.Selector); err != nil {
			c.problems.add(target, fmt.Sprintf("placement.selector: %v: expected a label selector the API server parses (matchLabels, matchExpressions with In, NotIn, Exists, DoesNotExist)", err))
		}
	}
	for _, name := range p.Clusters {
		key := placement.Key(names.Namespace, name)
		if !c.known[key.String()] {
			c.problems.add(target, fmt.Sprintf("placement.clusters: %q is not a cluster of this management cluster: expected one of %s (a name alone is a cluster of namespace %s; another namespace's is namespace/name)",
				name, strings.Join(c.clusters, ", "), names.Namespace))
		} else if why := c.rules.Refuses(key); why != "" {
			c.problems.add(target, fmt.Sprintf("placement.clusters: %q: %s", name, why))
		}
	}
}

// manifests builds an Application's manifests as Flux builds them for a cluster: the path of the
// checkout (read bounded into the snapshot), the cluster's name substituted.
func (c appsCheck) manifests(ctx context.Context, target string, o *unstructured.Unstructured, spec appsv1alpha1.ApplicationSpec) {
	ks := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": o.GetName(), "namespace": o.GetNamespace()},
		"spec": map[string]any{"path": spec.Path, "targetNamespace": spec.TargetNamespace,
			"postBuild": map[string]any{"substitute": map[string]any{"CLUSTER_NAME": "cluster", "CLUSTER_NAMESPACE": "namespace"}}},
	}}
	rel := filepath.ToSlash(filepath.Clean(spec.Path))
	if st, err := os.Lstat(filepath.Join(c.repoRoot, rel)); err != nil || !st.IsDir() {
		c.problems.add(target, fmt.Sprintf("spec.path: %s is not a directory of the checkout", spec.Path))
		return
	}
	if !c.copied[rel] && !strings.HasPrefix(rel, c.dir+"/") {
		c.copied[rel] = true
		tree, err := boundedfile.ReadTree(c.repoRoot, rel, boundedfile.PlacedManifest, nil)
		if err == nil {
			err = tree.Write(c.snap)
		}
		if err != nil {
			c.problems.add(target, fmt.Sprintf("spec.path: %v", err))
			return
		}
		for _, e := range tree.Unread {
			c.problems.add(target, fmt.Sprintf("spec.path: %v", e))
		}
	}
	if _, err := c.builder.Build(ctx, ks); err != nil {
		c.problems.add(target, fmt.Sprintf("spec.path %s does not build: %v", spec.Path, err))
	}
}
