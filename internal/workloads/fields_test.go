package workloads_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// shardLabel is the label of the Flux controller shard of a tenant's Flux objects.
const shardLabel = "sharding.fluxcd.io/key"

// asApplied is a rendered object as its controller writes it into the tenant's namespace ns:
// without the annotations of this project's render (which no controller writes), with the
// labels and annotations Flux and Helm give it.
func asApplied(o render.Object, release, ns string) *unstructured.Unstructured {
	obj := o.Object.DeepCopy()
	obj.SetNamespace(ns)
	ann := obj.GetAnnotations()
	delete(ann, names.OriginAnnotation)
	delete(ann, names.UnitAnnotation)
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	if ann == nil {
		ann = map[string]string{}
	}
	switch {
	case o.Release != nil:
		release = o.Release.Name
		fallthrough
	case o.Unit == "":
		// helm-controller: the release's chart, the workload release's or a unit's.
		labels["helm.toolkit.fluxcd.io/name"], labels["helm.toolkit.fluxcd.io/namespace"] = release, ns
		ann["meta.helm.sh/release-name"], ann["meta.helm.sh/release-namespace"] = release, ns
	default:
		// kustomize-controller: the unit's Kustomization (<release>-<unit>).
		labels["kustomize.toolkit.fluxcd.io/name"], labels["kustomize.toolkit.fluxcd.io/namespace"] = release+"-"+o.Unit, ns
	}
	obj.SetLabels(labels)
	if len(ann) == 0 {
		ann = nil
	}
	obj.SetAnnotations(ann)
	return obj
}

// notAField is a key no chart sets anywhere.
const notAField = "notAField"

// strayFieldCases are, for each object the builder writes as the charts render it, one attack
// per map of its fields: the object with a key of its own there, which the build policy must
// refuse naming its path. A map of names (labels, a release's values, a selector) holds data, not
// fields: it is left out, and so are the maps below it.
func strayFieldCases(objs []*unstructured.Unstructured, user string) []admissionCase {
	var cases []admissionCase
	seen := map[string]bool{}
	for _, o := range objs {
		root := "spec"
		if o.GetKind() == "Secret" || o.GetKind() == "ConfigMap" {
			root = "data"
		}
		var paths []string
		var walk func(path string, v any)
		walk = func(path string, v any) {
			switch v := v.(type) {
			case map[string]any:
				last := path[strings.LastIndex(path, ".")+1:]
				if strings.HasPrefix(path, "spec.values.") || slices.Contains([]string{"matchLabels", "labels", "annotations"}, last) {
					return
				}
				if last == "mirrors" { // registry hosts, whose names have dots: attacked by name
					return
				}
				paths = append(paths, path)
				for k, c := range v {
					walk(path+"."+k, c)
				}
			case []any:
				if len(v) > 0 {
					walk(path+"[]", v[0])
				}
			}
		}
		if v, ok := o.Object[root]; ok {
			walk(root, v)
		}
		sort.Strings(paths)
		for _, p := range paths {
			key := o.GetKind() + " " + p
			if seen[key] {
				continue
			}
			seen[key] = true
			obj, path := o, p
			cases = append(cases, admissionCase{
				name: fmt.Sprintf("a key of its own in %s %s", obj.GetKind(), path), user: user, ns: obj.GetNamespace(),
				object: func() *unstructured.Unstructured {
					edited := obj.DeepCopy()
					setAt(edited.Object, path+"."+notAField, "x")
					return edited
				},
				refused: path + "." + notAField + ": not a field a workload cluster's unit sets",
			})
		}
	}
	return cases
}

// setAt sets the value at path, whose segments are fields or a list's first item (a[]).
func setAt(o map[string]any, path string, v any) {
	segs := strings.Split(path, ".")
	var cur any = o
	for i, s := range segs {
		m := cur.(map[string]any)
		if i == len(segs)-1 {
			m[s] = v
			return
		}
		if strings.HasSuffix(s, "[]") {
			cur = m[strings.TrimSuffix(s, "[]")].([]any)[0]
			continue
		}
		cur = m[s]
	}
}

// withMirrorsAndProxies are tenants of the platform's values with registry mirrors and proxies:
// the files and commands of the machines that go with them.
func withMirrorsAndProxies(tenants map[string]any) map[string]any {
	out := map[string]any{
		"registry_mirrors": map[string]any{"hosts_config": map[string]any{"docker.io": []any{map[string]any{"mirror_url": "https://mirror.example:5000", "override_path": true}}}},
		"proxies":          map[string]any{"http_proxy": "http://proxy.example:3128", "https_proxy": "http://proxy.example:3128", "no_proxy": "10.0.0.0/8"},
	}
	for k, v := range tenants {
		out[k] = v
	}
	return out
}

// renderRKE2TenantTestbed is the default tenant of an rke2-capd management cluster, with registry
// mirrors and proxies, and wl1 written by it.
func renderRKE2TenantTestbed(t *testing.T) *tenantTestbed {
	t.Helper()
	return renderTenantTestbedOf(t, "rke2-capd", withMirrorsAndProxies(map[string]any{
		"cluster": map[string]any{"name": "wl-management"},
		"workload_clusters": map[string]any{"tenants": map[string]any{
			"workload-clusters": map[string]any{"name_prefix": "wl", "path": "./clusters/management/workload-clusters"},
		}},
	}), wl1WithoutProviders(t, "wl1"))
}

// renderSimulatedTenantTestbed is the default tenant of a kubeadm-capd management cluster,
// simulated in memory, with registry mirrors and proxies, and wl1 written by it.
func renderSimulatedTenantTestbed(t *testing.T) *tenantTestbed {
	t.Helper()
	return renderTenantTestbedOf(t, "kubeadm-capd", withMirrorsAndProxies(map[string]any{
		"cluster": map[string]any{"name": "wl-management"},
		"workload_clusters": map[string]any{"tenants": map[string]any{
			"workload-clusters": map[string]any{"name_prefix": "wl", "path": "./clusters/management/workload-clusters", "infrastructure": "in-memory"},
		}},
	}), wl1WithoutProviders(t, "wl1"))
}

// What the builder writes for a cluster of an rke2 management cluster with registry mirrors and
// proxies is admitted by the API server; a key of its own anywhere is not.
func TestTheAPIServerHoldsAnRKE2TenantsBuildToItsFields(t *testing.T) {
	tb := renderRKE2TenantTestbed(t).start(t)
	tb.admit(t, tb.casesWith(nil))
	tb.refusesEveryOtherField(t)
}

// builtInTheManagementCluster are the objects of a workload cluster's render that its builder
// writes into the management cluster: the workload release's own (its units' Kustomizations and
// unit graph), what its units apply there (not through the cluster's kubeconfig) and what their
// releases render.
func builtInTheManagementCluster(res *render.Result) []render.Object {
	intoTheCluster := map[string]bool{}
	for _, o := range res.Objects {
		if o.Unit == "" && o.Object.GetKind() == "Kustomization" {
			_, kubeconfig, _ := unstructured.NestedMap(o.Object.Object, "spec", "kubeConfig")
			intoTheCluster[o.Object.GetLabels()["cluster-init.dev/unit"]] = kubeconfig
		}
	}
	var out []render.Object
	for _, o := range res.Objects {
		switch {
		case o.Unit == "" && o.Origin != render.UmbrellaChart: // the render's own values, no controller's
		case o.Unit != "" && o.Release == nil && intoTheCluster[o.Unit]:
		default:
			out = append(out, o)
		}
	}
	return out
}

// Every key the charts do not set in what the builder writes is refused, naming its path: for
// each map of fields of each object (of every provider, with registry mirrors and proxies), the
// object with a key of its own there, as validate evaluates the policy. (The API server drops a
// key that is no field of the kind's schema before any policy sees it: TestTheAPIServerHolds…
// attacks through the schema's own fields.)
func TestEveryFieldTheChartsDoNotSetIsRefused(t *testing.T) {
	for name, tb := range map[string]*tenantTestbed{"kubeadm-capd": renderTenantTestbed(t), "kubeadm-capo": renderCAPOTenantTestbed(t),
		"rke2-capd": renderRKE2TenantTestbed(t), "in-memory": renderSimulatedTenantTestbed(t)} {
		pols := tb.compiled(t)
		cases := strayFieldCases(tb.built, builderA)
		if len(cases) < 10 {
			t.Errorf("%s: only %d maps of fields in what the builder writes", name, len(cases))
		}
		for _, tc := range cases {
			for _, obj := range tb.objects(t, tc) {
				refused := strings.Join(tb.offline(t, pols, tc.user, obj), "\n")
				if !strings.Contains(refused, tc.refused) {
					t.Errorf("%s: %s: %q, want %q", name, tc.name, refused, tc.refused)
				}
			}
		}
	}
}

// withProviderDefaults is obj as the defaulting webhooks of its provider make it before the
// policies see it (Cluster API v1.14's MachineDeployment and KubeadmControlPlane, CAPRKE2's
// RKE2ControlPlane and RKE2ConfigTemplate, CAPD's DockerCluster and DevCluster), which no
// provider runs in these tests.
func withProviderDefaults(obj *unstructured.Unstructured) *unstructured.Unstructured {
	o := obj.DeepCopy()
	set := func(v any, path ...string) { _ = unstructured.SetNestedField(o.Object, v, path...) }
	switch o.GetKind() {
	case "MachineDeployment":
		set(map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0)}}, "spec", "rollout", "strategy")
	case "KubeadmControlPlane":
		set(map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(1)}}, "spec", "rollout", "strategy")
	case "RKE2ControlPlane":
		set("cloud-config", "spec", "agentConfig", "format")
		set(o.GetNamespace(), "spec", "machineTemplate", "infrastructureRef", "namespace")
		for _, timeout := range []string{"nodeDrainTimeout", "nodeVolumeDetachTimeout", "nodeDeletionTimeout"} {
			set("10s", "spec", "machineTemplate", timeout)
		}
	case "RKE2ConfigTemplate":
		set("cloud-config", "spec", "template", "spec", "agentConfig", "format")
	case "DockerCluster":
		// CAPD's webhook marshals its defaulted spec, whose load balancer is a struct.
		set(int64(6443), "spec", "controlPlaneEndpoint", "port")
		set(map[string]any{}, "spec", "loadBalancer")
	case "DevCluster":
		set(int64(6443), "spec", "controlPlaneEndpoint", "port")
	}
	return o
}

// buildFields are the fields of what the builder writes (charts/workload-clusters/build-fields.yaml):
// kind -> path -> the keys allowed there.
func buildFields(t *testing.T) map[string]map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Checkout(t), "charts", "workload-clusters", "build-fields.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]map[string][]string
	if err := sigsyaml.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	return fields
}

// schemaAt is the schema of the map at path (segments a, a[]) of a CRD's version schema.
func schemaAt(s *apiextensionsv1.JSONSchemaProps, path string) *apiextensionsv1.JSONSchemaProps {
	for _, seg := range strings.Split(path, ".") {
		list := strings.HasSuffix(seg, "[]")
		p, ok := s.Properties[strings.TrimSuffix(seg, "[]")]
		if !ok {
			return nil
		}
		s = &p
		if list {
			if s.Items == nil || s.Items.Schema == nil {
				return nil
			}
			s = s.Items.Schema
		}
	}
	return s
}

// sampleOf is a value the schema admits for a field, if a simple one will do.
func sampleOf(s apiextensionsv1.JSONSchemaProps) (any, bool) {
	switch {
	case len(s.Enum) > 0:
		var v any
		if json.Unmarshal(s.Enum[0].Raw, &v) != nil {
			return nil, false
		}
		return v, true
	case s.XIntOrString:
		return int64(1), true
	case s.Type == "string" && s.Pattern == "" && s.Format == "" && (s.MinLength == nil || *s.MinLength <= 1):
		return "x", true
	case s.Type == "boolean":
		return true, true
	case s.Type == "integer" && (s.Minimum == nil || *s.Minimum <= 1) && (s.Maximum == nil || *s.Maximum >= 1):
		return int64(1), true
	case s.Type == "object" && len(s.Required) == 0 && s.MinProperties == nil:
		return map[string]any{}, true
	case s.Type == "array" && s.MinItems == nil:
		return []any{}, true
	}
	return nil, false
}

// refusesEveryOtherField: for each map of fields of what the builder writes, every field of the
// kind's schema there that the charts do not set, given a value the schema admits, is refused by
// the API server, and by validate's evaluation naming the build policy's reason.
func (tb *tenantTestbed) refusesEveryOtherField(t *testing.T) {
	t.Helper()
	fields := buildFields(t)
	schemas := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, crd := range testenv.CRDs(t) {
		for _, v := range crd.Spec.Versions {
			schemas[crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
		}
	}
	pols := tb.compiled(t)
	attacks := 0
	for _, o := range tb.built {
		schema := schemas[o.GetAPIVersion()+"/"+o.GetKind()]
		if schema == nil {
			continue // Secrets and ConfigMaps: no schema of fields
		}
		for path, allowed := range fields[o.GetKind()] {
			at := schemaAt(schema, path)
			if at == nil || !hasPath(o.Object, path) {
				continue
			}
			for field, fs := range at.Properties {
				value, ok := sampleOf(fs)
				if slices.Contains(allowed, field) || !ok {
					continue
				}
				attacks++
				obj := o.DeepCopy()
				setAt(obj.Object, path+"."+field, value)
				want := path + "." + field + ": not a field a workload cluster's unit sets"
				if off := strings.Join(tb.offline(t, pols, builderA, obj), "\n"); !strings.Contains(off, want) {
					t.Errorf("%s %s with %s.%s: validate answers %q, want %q", obj.GetKind(), obj.GetName(), path, field, off, want)
				}
				if err := tb.create(t, builderA, obj); err == nil {
					t.Errorf("%s %s with %s.%s admitted", obj.GetKind(), obj.GetName(), path, field)
				}
			}
		}
	}
	if attacks < 50 {
		t.Errorf("only %d fields of the schemas attacked", attacks)
	}
	t.Logf("%d fields the charts do not set, each refused", attacks)
}

// hasPath: obj has a map at path (segments a, a[]: the first item).
func hasPath(obj map[string]any, path string) bool {
	var cur any = obj
	for _, seg := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if strings.HasSuffix(seg, "[]") {
			l, ok := m[strings.TrimSuffix(seg, "[]")].([]any)
			if !ok || len(l) == 0 {
				return false
			}
			cur = l[0]
			continue
		}
		if cur, ok = m[seg]; !ok {
			return false
		}
	}
	_, ok := cur.(map[string]any)
	return ok
}
