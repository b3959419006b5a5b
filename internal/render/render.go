// Package render computes, offline, every object a cluster-init environment sends to a cluster:
// the environment's ConfigMaps and Secret, the umbrella chart's output (the units as Flux
// Kustomizations, their sources, the unit graph), the kustomize build of every enabled unit, and
// the charts of HelmRelease units, all with the code Flux runs in the cluster.
package render

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	fluxchartutil "github.com/fluxcd/pkg/chartutil"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/chart"
	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kustomize"
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

// The umbrella chart, its release, and the ConfigMap of the source values.
const (
	UmbrellaChart      = "charts/cluster-init"
	ReleaseName        = "cluster-init"
	SourceConfigMap    = "cluster-init-source"
	OverridesConfigMap = "cluster-init-overrides"
)

// Annotations set on every rendered object.
const (
	UnitAnnotation   = "cluster-init.dev/unit"
	OriginAnnotation = "cluster-init.dev/rendered-from"
)

// Options says what to render.
type Options struct {
	// RepoRoot is the checkout; its charts and kustomize-components are the source.
	RepoRoot string
	Env      *environment.Environment
	// Context: bootstrap, management or workload.
	Context string
	// Overrides are values layers that come after the environment values (before its secrets):
	// --values files. They reach the cluster as the ConfigMap cluster-init-overrides.
	Overrides []values.Layer
	// Source, if set, replaces the `source` values (what bootstrap computes for the checkout).
	Source map[string]any
	// KubeVersion is the Kubernetes version templates see.
	KubeVersion string
}

// Object is a rendered object and what produced it.
type Object struct {
	// Unit is the unit whose Kustomization applies the object; empty for the objects the
	// bootstrap command applies itself and for the umbrella chart's own output.
	Unit string
	// Origin is the file, chart or kustomization the object was built from.
	Origin string
	Object *unstructured.Unstructured
}

// Result is a rendered environment.
type Result struct {
	// Layers are the values layers in precedence order, chart defaults first.
	Layers  []values.Layer
	Values  map[string]any
	Graph   *units.Graph
	Objects []Object
}

// Layers returns the values layers of a release, lowest precedence first: chart defaults,
// context values, environment values, overrides, environment secrets, source.
func Layers(opts Options) ([]values.Layer, error) {
	read := func(rel string) (values.Layer, error) {
		data, err := os.ReadFile(filepath.Join(opts.RepoRoot, rel))
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
	layers := []values.Layer{defaults, ctxLayer, opts.Env.Layers[0]}
	layers = append(layers, opts.Overrides...)
	layers = append(layers, opts.Env.Layers[1:]...)
	if opts.Source != nil {
		layers = append(layers, values.FromMap("(source of bootstrap)", map[string]any{"source": opts.Source}))
	}
	return layers, nil
}

// Render renders the environment in one context.
func Render(ctx context.Context, opts Options) (*Result, error) {
	layers, err := Layers(opts)
	if err != nil {
		return nil, err
	}
	fallback := values.Origin{File: opts.Env.Layers[0].File}

	schemaFile := UmbrellaChart + "/values.schema.json"
	schemaData, err := os.ReadFile(filepath.Join(opts.RepoRoot, schemaFile))
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
	res := &Result{Layers: layers, Values: values.Merge(layers...)}

	// What the bootstrap command applies itself: the environment, the --values overrides and the
	// source values, each a valuesFrom layer of the cluster-init HelmRelease.
	// Only what the bootstrap command decided: the context's and environment's source settings
	// (intervals, ...) stay theirs.
	srcValues := map[string]any{}
	if opts.Source != nil {
		srcValues["source"] = opts.Source
	}
	srcCM, err := valuesConfigMap(SourceConfigMap, srcValues)
	if err != nil {
		return nil, err
	}
	overridesCM, err := valuesConfigMap(OverridesConfigMap, values.Merge(opts.Overrides...))
	if err != nil {
		return nil, err
	}
	envOrigin := filepath.ToSlash(filepath.Join(environment.Dir, opts.Env.Name))
	res.Objects = append(res.Objects,
		Object{Origin: envOrigin, Object: opts.Env.Values},
		Object{Origin: envOrigin, Object: opts.Env.Secrets},
		Object{Origin: "bootstrap (--values)", Object: overridesCM},
		Object{Origin: "bootstrap (source of the checkout)", Object: srcCM})

	// The umbrella chart gets every layer but its own defaults, as the HelmRelease passes them.
	userValues := values.Merge(layers[1:]...)
	docs, err := chart.Render(ctx, filepath.Join(opts.RepoRoot, UmbrellaChart),
		chart.Release{Name: ReleaseName, Namespace: environment.Namespace, KubeVersion: opts.KubeVersion}, userValues)
	if err != nil {
		return nil, explainChartError(err, layers, fallback)
	}
	var chartObjs []*unstructured.Unstructured
	for _, d := range docs {
		chartObjs = append(chartObjs, d.Object)
		res.Objects = append(res.Objects, Object{Origin: UmbrellaChart, Object: d.Object})
	}
	if res.Graph, err = units.Find(chartObjs); err != nil {
		return nil, err
	}

	// Build the units from a snapshot of the source, as kustomize-controller does from the artifact.
	snap, err := os.MkdirTemp("", "cluster-init-source-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(snap)
	if err := source.Snapshot(opts.RepoRoot, snap); err != nil {
		return nil, err
	}
	kustomizations := map[string]*unstructured.Unstructured{}
	for _, o := range chartObjs {
		if o.GetKind() == "Kustomization" && strings.HasPrefix(o.GetAPIVersion(), "kustomize.toolkit.fluxcd.io/") {
			kustomizations[o.GetName()] = o
		}
	}
	// In-cluster, helm-controller reads valuesFrom from the cluster; offline, the objects the
	// bootstrap command would have applied stand in for it.
	valuesStore := fake.NewClientBuilder().WithScheme(corev1Scheme()).
		WithObjects(toTyped(opts.Env.Values), toTyped(opts.Env.Secrets), toTyped(overridesCM), toTyped(srcCM)).Build()

	for _, u := range res.Graph.Enabled() {
		ks, ok := kustomizations[u.Name]
		if !ok {
			return nil, fmt.Errorf("unit %s: the chart rendered no Kustomization for it", u.Name)
		}
		built, err := kustomize.Build(ctx, snap, ks)
		if err != nil {
			return nil, fmt.Errorf("unit %s: %w", u.Name, err)
		}
		ksPath, _, _ := unstructured.NestedString(ks.Object, "spec", "path")
		origin := strings.TrimPrefix(path.Clean(ksPath), "./")
		for _, o := range built {
			res.Objects = append(res.Objects, Object{Unit: u.Name, Origin: origin, Object: o})
			if o.GetKind() != "HelmRelease" {
				continue
			}
			sources := append(append([]*unstructured.Unstructured{}, chartObjs...), built...)
			rendered, err := renderHelmRelease(ctx, snap, o, sources, valuesStore, opts.KubeVersion)
			if err != nil {
				return nil, fmt.Errorf("unit %s: %w", u.Name, err)
			}
			for _, r := range rendered {
				r.Unit = u.Name
				res.Objects = append(res.Objects, r)
			}
		}
	}
	for _, o := range res.Objects {
		annotate(o)
	}
	return res, nil
}

func annotate(o Object) {
	ann := o.Object.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if o.Unit != "" {
		ann[UnitAnnotation] = o.Unit
	}
	ann[OriginAnnotation] = o.Origin
	o.Object.SetAnnotations(ann)
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
	cm.SetNamespace(environment.Namespace)
	cm.SetLabels(map[string]string{"app.kubernetes.io/part-of": "cluster-init", "reconcile.fluxcd.io/watch": "Enabled"})
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
		hr.Namespace = environment.Namespace
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
	for _, d := range docs {
		if d.Object.GetNamespace() == "" {
			d.Object.SetNamespace(hr.GetReleaseNamespace())
		}
		out = append(out, Object{Origin: chartPath + " (HelmRelease " + hr.Name + ")", Object: d.Object})
	}
	return out, nil
}

// localChart returns the path in the source of a HelmRelease's chart, or "" if it is elsewhere.
func localChart(hr *helmv2.HelmRelease, sources []*unstructured.Unstructured) (string, error) {
	if hr.Spec.Chart != nil {
		ref := hr.Spec.Chart.Spec.SourceRef
		if ref.Kind == "GitRepository" && ref.Name == "cluster-init" {
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
