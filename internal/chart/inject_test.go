package chart

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"

	"cluster-init.dev/cluster-init/internal/checkout"
)

// payloads are what a hostile value holds: a document of its own, and a key of the object it is
// printed in. Printed as data, neither is anything but a string.
var payloads = []string{
	"x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: injected\n",
	"x\ninjected: true",
	"x\n  injected: true",
	"{{ fail \"evaluated\" }}\ninjected: true",
}

// chartCase is a chart rendered with values that reach every template it has.
type chartCase struct {
	name   string
	chart  string
	values []string // values files of the chart, in order, relative to the checkout
	extra  map[string]any
}

func chartCases() []chartCase {
	mirrors := map[string]any{"hosts_config": map[string]any{"registry.example": []any{map[string]any{"mirror_url": "http://mirror.example:5000/v2/registry.example", "override_path": true}}}}
	proxies := map[string]any{"http_proxy": "http://proxy.example:3128", "https_proxy": "http://proxy.example:3128", "no_proxy": "internal.example"}
	var cases []chartCase
	for _, b := range []string{"kubeadm", "rke2"} {
		for _, i := range []string{"capd", "capo"} {
			cases = append(cases, chartCase{
				name: "capi-cluster/" + b + "-" + i, chart: "charts/capi-cluster",
				values: []string{"charts/capi-cluster/values.yaml"},
				extra: map[string]any{
					"cluster": map[string]any{
						"name": "wl1", "providers": map[string]any{"bootstrap": b, "infrastructure": i},
						"rke2_air_gapped": map[string]any{"enabled": true, "artifacts_checksum": strings.Repeat("a", 64)},
						"capo": map[string]any{"image_name": "img", "external_network_id": "net", "ssh_key_name": "key",
							"dns_nameservers": []any{"10.0.0.1"}, "control_plane_endpoint_floating_ip": "10.0.0.2"},
						"control_plane": map[string]any{"replicas": 1, "flavor": "m1"},
						"workers":       map[string]any{"replicas": 2, "flavor": "m1"},
					},
					"registry_mirrors": mirrors, "proxies": proxies,
					"credentials": map[string]any{"openstack": map[string]any{"clouds_yaml": "clouds: {}", "cacert": "pem"}},
				},
			})
		}
	}
	cases = append(cases,
		chartCase{
			name: "workload-clusters", chart: "charts/workload-clusters",
			values: []string{"charts/workload-clusters/values.yaml"},
			extra: map[string]any{
				"workload_clusters": map[string]any{"tenants": map[string]any{
					"team-a": map[string]any{"path": "./clusters/management/team-a", "name_prefix": "a-", "limits": map[string]any{"clusters": 2}},
				}},
				"registry_mirrors": mirrors, "proxies": proxies,
				"source": map[string]any{"type": "git", "url": "https://git.example/platform.git", "ref": map[string]any{"branch": "main"}, "secret_ref": "auth", "interval": "1m"},
			},
		},
		// A workload cluster's release: the chart every tenant's values go through.
		chartCase{
			name: "cluster-init/workload", chart: "charts/cluster-init",
			values: []string{"charts/cluster-init/values.yaml", "charts/cluster-init/workload-cluster.values.yaml"},
			extra: map[string]any{
				"cluster":          map[string]any{"name": "wl1", "network": map[string]any{"pods_cidr": "10.48.0.0/16", "services_cidr": "10.160.0.0/12", "service_domain": "cluster.local"}},
				"service_account":  "cluster-builder",
				"registry_mirrors": mirrors, "proxies": proxies,
				"source": map[string]any{"type": "git", "url": "https://git.example/platform.git", "ref": map[string]any{"branch": "main"}, "secret_ref": "auth", "interval": "1m", "namespace": "cluster-init"},
			},
		},
	)
	return cases
}

// Every value a template prints is data: a value holding a newline, a document separator or a
// template never adds an object or a key to what a chart renders, even with the schema check
// switched off (the templates alone hold). Each value of each chart is tried with each payload.
func TestAValueIsDataNeverStructure(t *testing.T) {
	root, err := checkout.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range chartCases() {
		t.Run(c.name, func(t *testing.T) {
			base := map[string]any{}
			for _, f := range c.values {
				v, err := common.ReadValuesFile(filepath.Join(root, f))
				if err != nil {
					t.Fatal(err)
				}
				base = util.MergeTables(v, base)
			}
			base = util.MergeTables(deepCopy(c.extra).(map[string]any), base)
			dir := filepath.Join(root, c.chart)
			rel := Release{Name: "wl1", Namespace: "workload-clusters"}
			clean, err := render(ctx, dir, rel, deepCopy(base).(map[string]any), true)
			if err != nil {
				t.Fatalf("render without a hostile value: %v", err)
			}
			want := kinds(clean)
			paths := leafPaths(base, nil)
			if len(paths) < 10 {
				t.Fatalf("only %d values found: %v", len(paths), paths)
			}
			tried := 0
			for _, p := range paths {
				for _, payload := range payloads {
					vals := deepCopy(base).(map[string]any)
					setPath(vals, p, payload)
					docs, err := render(ctx, dir, rel, vals, true)
					if err != nil {
						continue // refused: nothing rendered
					}
					tried++
					// Nothing added; a value may leave an object out (a Secret named by
					// cluster.capo.credentials_secret is the platform's, not rendered).
					if got := kinds(docs); !within(got, want) {
						t.Errorf("%s = %q: rendered %v, want %v or fewer", strings.Join(p, "."), payload, got, want)
					}
					for _, d := range docs {
						if d.Object.GetName() == "injected" || hasKey(d.Object.Object, "injected") {
							t.Errorf("%s = %q: %s %s of %s took the value as structure", strings.Join(p, "."), payload, d.Object.GetKind(), d.Object.GetName(), d.Template)
						}
					}
				}
			}
			t.Logf("%d values × %d payloads, %d rendered", len(paths), len(payloads), tried)
			if tried == 0 {
				t.Error("every hostile value was refused: nothing shows the templates hold")
			}
		})
	}
}

// within reports whether every kind of got is in want at least as many times.
func within(got, want []string) bool {
	left := map[string]int{}
	for _, k := range want {
		left[k]++
	}
	for _, k := range got {
		if left[k]--; left[k] < 0 {
			return false
		}
	}
	return true
}

func kinds(docs []Document) []string {
	var out []string
	for _, d := range docs {
		out = append(out, d.Object.GetKind())
	}
	sort.Strings(out)
	return out
}

// leafPaths lists the paths of the scalar values of v (map keys; list items by index).
func leafPaths(v any, prefix []string) [][]string {
	var out [][]string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out = append(out, leafPaths(e, append(slices.Clone(prefix), k))...)
		}
	case []any:
		for i, e := range x {
			out = append(out, leafPaths(e, append(slices.Clone(prefix), fmt.Sprint(i)))...)
		}
	default:
		out = append(out, prefix)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i], ".") < strings.Join(out[j], ".") })
	return out
}

func setPath(v any, path []string, value any) {
	for i, k := range path {
		last := i == len(path)-1
		switch x := v.(type) {
		case map[string]any:
			if last {
				x[k] = value
				return
			}
			v = x[k]
		case []any:
			var n int
			fmt.Sscan(k, &n)
			if last {
				x[n] = value
				return
			}
			v = x[n]
		}
	}
}

func hasKey(v any, key string) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == key || hasKey(e, key) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasKey(e, key) {
				return true
			}
		}
	}
	return false
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case common.Values:
		return deepCopy(map[string]any(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return x
	}
}
