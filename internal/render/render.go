// Package render computes, offline, every object a cluster-init environment sends to a cluster:
// the environment's ConfigMaps and Secret, the umbrella chart's output (the units as Flux
// Kustomizations, their sources, the unit graph), the kustomize build of every enabled unit, and
// the charts of HelmRelease units, all with the code Flux runs in the cluster.
package render

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	fluxchartutil "github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/ssa/utils"
	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/chart"
	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kustomize"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/source"
	"cluster-init.dev/cluster-init/internal/units"
	"cluster-init.dev/cluster-init/internal/values"
)

// Contexts a release renders in.
const (
	ContextBootstrap  = "bootstrap"
	ContextManagement = "management"
	ContextWorkload   = "workload"
)

// UmbrellaChart is the chart of the cluster-init release.
const UmbrellaChart = "charts/cluster-init"

// Options says what to render.
type Options struct {
	Env *environment.Environment
	// Context: bootstrap, management or workload.
	Context string
	// Overrides are values layers that come after the environment values (before its secrets):
	// --values files. They reach the cluster as the ConfigMap cluster-init-overrides.
	Overrides []values.Layer
	// Source, if set, replaces the `source` values (what bootstrap computes for the checkout).
	Source map[string]any
	// State are the values layers of the cluster's state (managementstate: self_managed after the
	// pivot, adopted), last, as the release reads its state ConfigMap last.
	State []values.Layer
	// SecretsRevision is what bootstrap read back of the Secrets it applied (their resource
	// versions): a value of the release, so that a change of credentials alone changes what the
	// management-configs Job carries and the copy runs again, with nothing derived from a secret.
	SecretsRevision string
	// Platform are values layers between the context's and the environment's: what a workload
	// cluster shares with its management cluster.
	Platform []values.Layer
	// Units, if set, limits the unit builds to these units (the chart's own output is complete).
	Units []string
	// Release and Namespace name the umbrella release: cluster-init in its namespace, unless a
	// workload cluster's release is rendered.
	Release, Namespace string
}

func (o Options) release() (name, namespace string) {
	name, namespace = o.Release, o.Namespace
	if name == "" {
		name = names.Release
	}
	if namespace == "" {
		namespace = names.Namespace
	}
	return name, namespace
}

// Object is a rendered object and what produced it.
type Object struct {
	// Unit is the unit whose Kustomization applies the object; empty for the objects the
	// bootstrap command applies itself and for the umbrella chart's own output.
	Unit string
	// Origin is the file, chart or kustomization the object was built from.
	Origin string
	// Release, for an object a unit's HelmRelease renders, is that HelmRelease (helm-controller
	// applies the object, not the unit's Kustomization).
	Release *client.ObjectKey
	Object  *unstructured.Unstructured
}

// Values are the values of a release, checked against the chart's schema.
type Values struct {
	// Layers are the values layers in precedence order, chart defaults first.
	Layers []values.Layer
	Merged map[string]any
	// Settings is the typed view of Merged that Go code reads.
	Settings values.Settings
}

// Result is a rendered environment.
type Result struct {
	Values
	Graph   *units.Graph
	Objects []Object
	// Options are the options it was rendered with.
	Options Options
}

// Renderer renders the environments of one checkout. It takes one snapshot of the source (what the
// clusters reconcile from) and keeps every unit build by content, so that a command rendering
// several contexts pays for each distinct build once. It is safe for concurrent use; Close removes
// the snapshot.
type Renderer struct {
	repoRoot    string
	kubeVersion string
	snapshot    string
	builds      *kustomize.Builder
}

// New snapshots the source of the checkout at repoRoot; kubeVersion is the Kubernetes version
// templates see. buildCache, if set, is a directory that keeps unit builds across processes.
func New(repoRoot, kubeVersion, buildCache string) (*Renderer, error) {
	snap, err := os.MkdirTemp("", "cluster-init-source-")
	if err != nil {
		return nil, err
	}
	if err := source.Snapshot(repoRoot, snap); err != nil {
		os.RemoveAll(snap)
		return nil, err
	}
	var opts []kustomize.Option
	if buildCache != "" {
		opts = append(opts, kustomize.WithDiskCache(buildCache))
	}
	builds, err := kustomize.NewBuilder(snap, opts...)
	if err != nil {
		os.RemoveAll(snap)
		return nil, err
	}
	return &Renderer{repoRoot: repoRoot, kubeVersion: kubeVersion, snapshot: snap, builds: builds}, nil
}

// Close removes the snapshot.
func (r *Renderer) Close() error { return os.RemoveAll(r.snapshot) }

// Snapshot is the directory holding the source as the clusters receive it.
func (r *Renderer) Snapshot() string { return r.snapshot }

// Flux is Flux's controllers as bootstrap installs them into a cluster that stays (and cleanup
// removes them from an adopted one).
func (r *Renderer) Flux(ctx context.Context) ([]*unstructured.Unstructured, error) {
	return r.Build(ctx, "flux-system", "./kustomize-components/flux-system", nil)
}

// BootstrapFlux is Flux's controllers as bootstrap installs them into its kind cluster, which lives
// for one bootstrap: the same objects, tuned for a graph of units that wait on each other.
func (r *Renderer) BootstrapFlux(ctx context.Context) ([]*unstructured.Unstructured, error) {
	return r.Build(ctx, "flux-system", "./kustomize-components/flux-system-bootstrap", nil)
}

// Build renders a kustomize component of the source as a Flux Kustomization named name would,
// with inline postBuild substitutions.
func (r *Renderer) Build(ctx context.Context, name, path string, substitute map[string]string) ([]*unstructured.Unstructured, error) {
	ks := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": name, "namespace": names.Namespace},
		"spec":     map[string]any{"path": path},
	}}
	if substitute != nil {
		vars := map[string]any{}
		for k, v := range substitute {
			vars[k] = v
		}
		_ = unstructured.SetNestedMap(ks.Object, map[string]any{"substitute": vars}, "spec", "postBuild")
	}
	return r.builds.Build(ctx, ks)
}

// VendoredObjects are the objects of every vendored upstream manifest
// (kustomize-components/*/upstream/), enabled or not: their CRDs are what an API server with every
// component would know. Kept like a unit build.
func (r *Renderer) VendoredObjects(ctx context.Context) ([]*unstructured.Unstructured, error) {
	return r.builds.Keep(ctx, "vendored-objects", func() ([]*unstructured.Unstructured, error) {
		var out []*unstructured.Unstructured
		root := filepath.Join(r.snapshot, "kustomize-components")
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Base(filepath.Dir(path)) != "upstream" || !strings.HasSuffix(path, ".yaml") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			objs, err := utils.ReadObjects(bytes.NewReader(data))
			if err != nil {
				return fmt.Errorf("%s: %w", strings.TrimPrefix(path, r.snapshot+"/"), err)
			}
			out = append(out, objs...)
			return nil
		})
		return out, err
	})
}

// PlatformNamespaces are the namespaces the components the platform vendors create or run in
// (kustomize-components/*/upstream: flux-system, cert-manager, the providers', kube-system...),
// whether their units are enabled or not. Kept like a unit build.
func (r *Renderer) PlatformNamespaces(ctx context.Context) ([]string, error) {
	kept, err := r.builds.Keep(ctx, "platform-namespaces", func() ([]*unstructured.Unstructured, error) {
		vendored, err := r.VendoredObjects(ctx)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, o := range vendored {
			if o.GetKind() == "Namespace" && o.GetAPIVersion() == "v1" {
				seen[o.GetName()] = true
			}
			if ns := o.GetNamespace(); ns != "" {
				seen[ns] = true
			}
		}
		var out []*unstructured.Unstructured
		for _, ns := range slices.Sorted(maps.Keys(seen)) {
			o := &unstructured.Unstructured{}
			o.SetAPIVersion("v1")
			o.SetKind("Namespace")
			o.SetName(ns)
			out = append(out, o)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(kept))
	for i, o := range kept {
		out[i] = o.GetName()
	}
	return out, nil
}

// Layers returns the values layers of a release, lowest precedence first: chart defaults,
// context values, environment values, overrides, environment secrets, source.
func Layers(repoRoot string, opts Options) ([]values.Layer, error) {
	read := func(rel string) (values.Layer, error) {
		data, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if err != nil {
			return values.Layer{}, fmt.Errorf("read %s: %w", rel, err)
		}
		return values.ParseLayer(rel, data, false)
	}
	defaults, err := read(UmbrellaChart + "/values.yaml")
	if err != nil {
		return nil, err
	}
	defaults.Defaults = true
	file := map[string]string{ContextBootstrap: "bootstrap", ContextManagement: "management", ContextWorkload: "workload-cluster"}[opts.Context]
	if file == "" {
		return nil, fmt.Errorf("--context: unknown context %q, expected bootstrap, management or workload", opts.Context)
	}
	ctxLayer, err := read(UmbrellaChart + "/" + file + ".values.yaml")
	if err != nil {
		return nil, err
	}
	layers := append([]values.Layer{defaults, ctxLayer}, opts.Platform...)
	layers = append(layers, opts.Env.Layers[0])
	layers = append(layers, opts.Overrides...)
	layers = append(layers, opts.Env.Layers[1:]...)
	if v := bootstrapValues(opts); len(v) > 0 {
		layers = append(layers, values.FromMap("(source of bootstrap)", v))
	}
	layers = append(layers, opts.State...)
	return layers, nil
}

// bootstrapValues are the values bootstrap decides for a run: the source of the checkout and the
// revision of the secrets it applied.
func bootstrapValues(opts Options) map[string]any {
	v := map[string]any{}
	// The name the backups are named after: the environment's directory's; a name the chart
	// would refuse (not a DNS label) is left out, and the backup unit says it needs one.
	if opts.Env != nil && opts.Env.ClusterName() != "" {
		v["environment"] = opts.Env.ClusterName()
	}
	if opts.Source != nil {
		v["source"] = opts.Source
	}
	if opts.SecretsRevision != "" {
		v["secrets_revision"] = opts.SecretsRevision
	}
	return v
}

// Unchecked merges the values of a release without checking them: for commands that must work
// whatever the values (cleanup) and only read names from them.
func Unchecked(repoRoot string, opts Options) (values.Settings, error) {
	layers, err := Layers(repoRoot, opts)
	if err != nil {
		return values.Settings{}, err
	}
	return values.Decode(values.Merge(layers...))
}

// Values merges the values of a release and checks them against the chart's schema, without
// rendering anything.
func ReleaseValues(repoRoot string, opts Options) (*Values, error) {
	layers, err := Layers(repoRoot, opts)
	if err != nil {
		return nil, err
	}
	fallback := values.Origin{File: opts.Env.Layers[0].File}
	schemaFile := UmbrellaChart + "/values.schema.json"
	schemaData, err := os.ReadFile(filepath.Join(repoRoot, schemaFile))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", schemaFile, err)
	}
	schema, err := values.CompileSchema(schemaFile, schemaData)
	if err != nil {
		return nil, err
	}
	if problems := schema.Validate(layers, fallback); len(problems) > 0 {
		return nil, problems
	}
	for _, o := range opts.Overrides {
		if line, ok := o.Has([]string{environment.CredentialKey}); ok {
			return nil, fmt.Errorf("%s:%d: %s: secret values belong in the environment's secrets file, not in --values", o.File, line, environment.CredentialKey)
		}
	}
	merged := values.Merge(layers...)
	settings, err := values.Decode(merged)
	if err != nil {
		return nil, err
	}
	if problems := values.Check(layers, merged, settings, fallback); len(problems) > 0 {
		return nil, problems
	}
	return &Values{Layers: layers, Merged: merged, Settings: settings}, nil
}

// Render renders the environment in one context, in its stages: the values (checked), what the
// bootstrap command applies itself, the umbrella chart and its unit graph, the units' builds, and
// the HelmReleases among them.
func (r *Renderer) Render(ctx context.Context, opts Options) (*Result, error) {
	vals, err := ReleaseValues(r.repoRoot, opts)
	if err != nil {
		return nil, err
	}
	if err := r.checkTenants(ctx, opts, vals); err != nil {
		return nil, err
	}
	res := &Result{Values: *vals, Options: opts}
	applied, err := bootstrapApplied(opts)
	if err != nil {
		return nil, err
	}
	res.Objects = append(res.Objects, applied...)
	chartObjs, err := r.renderUmbrella(ctx, res)
	if err != nil {
		return nil, err
	}
	build, built, err := r.buildUnits(ctx, res, chartObjs)
	if err != nil {
		return nil, err
	}
	if err := r.addUnitObjects(ctx, res, chartObjs, applied, build, built); err != nil {
		return nil, err
	}
	for _, o := range res.Objects {
		annotate(o)
	}
	return res, nil
}

// checkTenants checks the tenants' namespaces against the platform's: the tenants are the
// management cluster's (a workload cluster's release has none).
func (r *Renderer) checkTenants(ctx context.Context, opts Options, vals *Values) error {
	if opts.Context == ContextWorkload {
		return nil
	}
	platform, err := r.PlatformNamespaces(ctx)
	if err != nil {
		return err
	}
	if _, namespace := opts.release(); !slices.Contains(platform, namespace) {
		platform = append(platform, namespace)
	}
	fallback := values.Origin{File: opts.Env.Layers[0].File}
	if problems := values.TenantNamespaces(vals.Layers, vals.Merged, platform, fallback); len(problems) > 0 {
		return problems
	}
	return nil
}

// bootstrapApplied is what the bootstrap command applies itself: the environment, the --values
// overrides and the source values, each a valuesFrom layer of the cluster-init HelmRelease. Of
// the source, only what the bootstrap command decided: the context's and environment's source
// settings (intervals, ...) stay theirs.
func bootstrapApplied(opts Options) ([]Object, error) {
	srcCM, err := valuesConfigMap(names.SourceConfigMap, bootstrapValues(opts))
	if err != nil {
		return nil, err
	}
	overridesCM, err := valuesConfigMap(names.OverridesConfigMap, values.Merge(opts.Overrides...))
	if err != nil {
		return nil, err
	}
	var out []Object
	envOrigin := filepath.ToSlash(filepath.Join(environment.Dir, opts.Env.Name))
	for _, o := range envObjects(opts.Env) {
		out = append(out, Object{Origin: envOrigin, Object: o})
	}
	return append(out,
		Object{Origin: "bootstrap (--values)", Object: overridesCM},
		Object{Origin: "bootstrap (source of the checkout)", Object: srcCM}), nil
}

// renderUmbrella renders the umbrella chart with every layer but its own defaults, as the
// HelmRelease passes them, and reads the unit graph from it.
func (r *Renderer) renderUmbrella(ctx context.Context, res *Result) ([]*unstructured.Unstructured, error) {
	layers, opts := res.Values.Layers, res.Options
	release, namespace := opts.release()
	docs, err := chart.Render(ctx, filepath.Join(r.snapshot, UmbrellaChart),
		chart.Release{Name: release, Namespace: namespace, KubeVersion: r.kubeVersion}, values.Merge(layers[1:]...))
	if err != nil {
		return nil, explainChartError(err, layers, values.Origin{File: opts.Env.Layers[0].File})
	}
	var chartObjs []*unstructured.Unstructured
	for _, d := range docs {
		chartObjs = append(chartObjs, d.Object)
		res.Objects = append(res.Objects, Object{Origin: UmbrellaChart, Object: d.Object})
	}
	if res.Graph, err = units.Find(chartObjs, release); err != nil {
		return nil, err
	}
	if problems := disabledDependencies(res.Graph, layers); len(problems) > 0 {
		return nil, problems
	}
	return chartObjs, nil
}

// buildUnits builds the enabled units (those of opts.Units, if set) from their Kustomizations,
// independent builds in parallel; it returns the units and their objects, in the graph's order.
func (r *Renderer) buildUnits(ctx context.Context, res *Result, chartObjs []*unstructured.Unstructured) ([]*units.Unit, [][]*unstructured.Unstructured, error) {
	opts, layers := res.Options, res.Values.Layers
	var build []*units.Unit
	for _, u := range res.Graph.Enabled() {
		if opts.Units == nil || slices.Contains(opts.Units, u.Name) {
			build = append(build, u)
		}
	}
	kustomizations := kustomizationsOf(chartObjs)
	built := make([][]*unstructured.Unstructured, len(build))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(goruntime.GOMAXPROCS(0))
	for i, u := range build {
		ks, ok := kustomizations[u.Object]
		if !ok {
			return nil, nil, fmt.Errorf("unit %s: the chart rendered no Kustomization for it", u.Name)
		}
		if u.Role == units.RoleEnvironment {
			// The environment's directory is not part of the snapshot: its build is the
			// environment the CLI loaded (and decrypted), exactly what the unit applies.
			built[i] = envObjects(opts.Env)
			continue
		}
		g.Go(func() error {
			objs, err := r.builds.Build(gctx, ks)
			if err != nil {
				return UnitProblem(layers, u.Name, "kustomization_spec", fmt.Errorf("unit %s: %w", u.Name, err))
			}
			built[i] = objs
			return nil
		})
	}
	return build, built, g.Wait()
}

// kustomizationsOf are the chart's Flux Kustomizations by name.
func kustomizationsOf(chartObjs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range chartObjs {
		if o.GetKind() == "Kustomization" && strings.HasPrefix(o.GetAPIVersion(), "kustomize.toolkit.fluxcd.io/") {
			out[o.GetName()] = o
		}
	}
	return out
}

// addUnitObjects adds each unit's built objects to res, and what its HelmReleases render, with the
// values they read from the cluster: in-cluster, helm-controller reads valuesFrom there; offline,
// the objects the bootstrap command would have applied (applied) and the release's own Secrets
// and ConfigMaps (the credentials it checked, which its units' releases read) stand in for it.
func (r *Renderer) addUnitObjects(ctx context.Context, res *Result, chartObjs []*unstructured.Unstructured, applied []Object, build []*units.Unit, built [][]*unstructured.Unstructured) error {
	var stored []client.Object
	for _, o := range applied {
		stored = append(stored, toTyped(o.Object))
	}
	for _, o := range res.Objects {
		if o.Origin == UmbrellaChart && (o.Object.GetKind() == "Secret" || o.Object.GetKind() == "ConfigMap") {
			stored = append(stored, toTyped(o.Object.DeepCopy()))
		}
	}
	valuesStore := fake.NewClientBuilder().WithScheme(corev1Scheme()).WithObjects(stored...).Build()
	kustomizations := kustomizationsOf(chartObjs)
	for i, u := range build {
		ksPath, _, _ := unstructured.NestedString(kustomizations[u.Object].Object, "spec", "path")
		origin := strings.TrimPrefix(path.Clean(ksPath), "./")
		for _, o := range built[i] {
			res.Objects = append(res.Objects, Object{Unit: u.Name, Origin: origin, Object: o})
			if o.GetKind() != "HelmRelease" {
				continue
			}
			sources := append(append([]*unstructured.Unstructured{}, chartObjs...), built[i]...)
			rendered, err := renderHelmRelease(ctx, r.snapshot, o, sources, valuesStore, r.kubeVersion)
			if err != nil {
				if p, ok := userKeyProblem(err, res.Values.Layers); ok {
					return p
				}
				return fmt.Errorf("unit %s: %w", u.Name, err)
			}
			for _, ro := range rendered {
				ro.Unit = u.Name
				ro.Release = &client.ObjectKey{Namespace: cmp.Or(o.GetNamespace(), names.Namespace), Name: o.GetName()}
				res.Objects = append(res.Objects, ro)
			}
		}
	}
	return nil
}

func annotate(o Object) {
	ann := o.Object.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if o.Unit != "" {
		ann[names.UnitAnnotation] = o.Unit
	}
	ann[names.OriginAnnotation] = o.Origin
	o.Object.SetAnnotations(ann)
}

// envObjects are copies of the environment's ConfigMap and Secret (none for a workload cluster).
func envObjects(env *environment.Environment) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range []*unstructured.Unstructured{env.Values, env.Secrets} {
		if o != nil {
			out = append(out, o.DeepCopy())
		}
	}
	return out
}

// valuesConfigMap holds values for a valuesFrom layer of the cluster-init HelmRelease.
func valuesConfigMap(name string, vals map[string]any) (*unstructured.Unstructured, error) {
	data, err := yaml.Marshal(vals)
	if err != nil {
		return nil, fmt.Errorf("values of ConfigMap %s: %w", name, err)
	}
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetName(name)
	cm.SetNamespace(names.Namespace)
	cm.SetLabels(names.Labels(true))
	if err := unstructured.SetNestedStringMap(cm.Object, map[string]string{"values.yaml": string(data)}, "data"); err != nil {
		return nil, err
	}
	return cm, nil
}

// renderHelmRelease renders the chart of a unit's HelmRelease when the chart is part of the source
// (a path of a GitRepository source, or a chart OCIRepository of an OCI source).
func renderHelmRelease(ctx context.Context, snap string, obj *unstructured.Unstructured, sources []*unstructured.Unstructured, store client.Client, kubeVersion string) ([]Object, error) {
	hr := &helmv2.HelmRelease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, hr); err != nil {
		return nil, fmt.Errorf("HelmRelease %s: %w", obj.GetName(), err)
	}
	if hr.Namespace == "" {
		hr.Namespace = names.Namespace
	}
	chartPath, err := localChart(hr, sources)
	if err != nil || chartPath == "" || chartPath == UmbrellaChart {
		// The umbrella chart is the release being rendered (or, for the management cluster, the
		// same chart in another context: `render --context management`).
		return nil, err
	}
	vals, err := fluxchartutil.ChartValuesFromReferences(ctx, logr.Discard(), store, hr.Namespace, hr.GetValues(), hr.Spec.ValuesFrom...)
	if err != nil {
		return nil, fmt.Errorf("HelmRelease %s: values: %w", hr.Name, err)
	}
	docs, err := chart.Render(ctx, filepath.Join(snap, chartPath),
		chart.Release{Name: hr.GetReleaseName(), Namespace: hr.GetReleaseNamespace(), KubeVersion: kubeVersion}, vals)
	if err != nil {
		return nil, fmt.Errorf("HelmRelease %s: %w", hr.Name, err)
	}
	out := make([]Object, 0, len(docs))
	// The charts of the units name the namespace of every namespaced object (Helm would put one
	// without it into the release's namespace, which the offline render cannot tell from a
	// cluster-scoped object).
	for _, d := range docs {
		out = append(out, Object{Origin: chartPath + " (HelmRelease " + hr.Name + ")", Object: d.Object})
	}
	return out, nil
}

// localChart returns the path in the source of a HelmRelease's chart, or "" if it is elsewhere.
func localChart(hr *helmv2.HelmRelease, sources []*unstructured.Unstructured) (string, error) {
	if hr.Spec.Chart != nil {
		ref := hr.Spec.Chart.Spec.SourceRef
		if ref.Kind == "GitRepository" && ref.Name == names.SourceRepository {
			return path.Clean(strings.TrimPrefix(hr.Spec.Chart.Spec.Chart, "./")), nil
		}
		return "", nil
	}
	if hr.Spec.ChartRef != nil && hr.Spec.ChartRef.Kind == "OCIRepository" {
		for _, o := range sources {
			if o.GetKind() == "OCIRepository" && o.GetName() == hr.Spec.ChartRef.Name {
				url, _, _ := unstructured.NestedString(o.Object, "spec", "url")
				return "charts/" + path.Base(url), nil
			}
		}
		return "", fmt.Errorf("HelmRelease %s: chartRef names OCIRepository %s, which neither the chart nor the unit renders", hr.Name, hr.Spec.ChartRef.Name)
	}
	return "", nil
}

func corev1Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	return s
}

func toTyped(u *unstructured.Unstructured) client.Object {
	var obj client.Object
	switch u.GetKind() {
	case "Secret":
		obj = &corev1.Secret{}
	default:
		obj = &corev1.ConfigMap{}
	}
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
	return obj
}

// chartFail matches the message of a template's `fail`, which our charts start with a values key.
var chartFail = regexp.MustCompile(`execution error at \([^)]*\): ([A-Za-z0-9_][A-Za-z0-9_.\-]*): (.*)$`)

// chartFailAtKey is chartFail where the key may be followed by what it holds ("KEY "a-" and
// KEY2 "a-b-" overlap").
var chartFailAtKey = regexp.MustCompile(`execution error at \([^)]*\): ([A-Za-z0-9_][A-Za-z0-9_.\-]*):? (.*)$`)

// explainChartError points a chart's template error at the values file and line of its key.
func explainChartError(err error, layers []values.Layer, fallback values.Origin) error {
	m := chartFail.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	key, msg := m[1], m[2]
	// A cycle is reported at one of its units; point at a dependency the user set, if any.
	if _, loop, ok := strings.Cut(msg, "dependency cycle: "); ok {
		units := strings.Split(loop, " -> ")
		for i := 0; i+1 < len(units); i++ {
			k := fmt.Sprintf("units.%s.depends_on.%s", units[i], units[i+1])
			if _, set := values.Set(layers, values.ParseKey(k)); set {
				key = k
				break
			}
		}
	}
	return values.Problems{{Origin: values.Locate(layers, values.ParseKey(key), fallback), Key: key, Message: msg}}
}

// userKeyProblem points the template error of a unit's chart at the values file and line of its
// key, when that key is the user's: the charts the umbrella chart passes its own values to (the
// tenants of workload-clusters) name them as the user wrote them.
func userKeyProblem(err error, layers []values.Layer) (values.Problems, bool) {
	m := chartFailAtKey.FindStringSubmatch(err.Error())
	if m == nil {
		return nil, false
	}
	origin := values.Locate(layers, values.ParseKey(m[1]), values.Origin{})
	if origin.File == "" || strings.HasPrefix(origin.File, "charts/") {
		return nil, false
	}
	return values.Problems{{Origin: origin, Key: m[1], Message: m[2]}}, true
}

// UnitProblem points an error found in what a unit renders at the values key the user set for
// that unit, deepest first (units.NAME.SPEC.FIELD..., then units.NAME.SPEC, then units.NAME), so
// that the message names the file and line to fix. Without such a key (the chart's own unit) the
// error is returned as it is.
func UnitProblem(layers []values.Layer, unit, spec string, err error, field ...string) error {
	path := append([]string{"units", unit, spec}, field...)
	for n := len(path); n >= 2; n-- {
		if origin, set := values.Set(layers, path[:n]); set && !strings.HasPrefix(origin.File, "charts/") {
			return values.Problems{{Origin: origin, Key: values.Key(path[:n]), Message: err.Error()}}
		}
	}
	return err
}

// disabledDependencies finds the units a values file disabled although enabled units depend on
// them. The chart drops a dependency on a disabled unit, which is what lets a unit depend on
// every provider it may run with; a unit the user disabled on purpose is another matter: what
// needs it would run without it.
func disabledDependencies(g *units.Graph, layers []values.Layer) values.Problems {
	needed := map[string][]string{}
	for _, name := range g.Order {
		for _, dep := range g.Units[name].Dropped {
			needed[dep] = append(needed[dep], name)
		}
	}
	var problems values.Problems
	for _, dep := range slices.Sorted(maps.Keys(needed)) {
		path := []string{"units", dep, "enabled"}
		origin, set := values.Set(layers, path)
		if !set || strings.HasPrefix(origin.File, "charts/") {
			continue
		}
		problems = append(problems, values.Problem{Origin: origin, Key: values.Key(path),
			Message: fmt.Sprintf("disabled, but %s depends on it: expected it enabled, %s disabled too, or, if what it installs comes another way, units.%s.depends_on.%s: false",
				strings.Join(needed[dep], ", "), strings.Join(needed[dep], ", "), needed[dep][0], dep)})
	}
	return problems
}

// Render renders one release with a renderer of its own (and no build cache).
func Render(ctx context.Context, repoRoot, kubeVersion string, opts Options) (*Result, error) {
	r, err := New(repoRoot, kubeVersion, "")
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Render(ctx, opts)
}
