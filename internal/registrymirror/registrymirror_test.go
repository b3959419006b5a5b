package registrymirror_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/values"
)

// The kind bootstrap cluster (hosts.toml written by the CLI) and the machines (hosts.toml written
// by charts/capi-cluster) get the same containerd configuration.
func TestCLIAndChartWriteTheSameHostsTOML(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	mirrors := map[string]any{"registry_mirrors": map[string]any{"hosts_config": map[string]any{
		"quay.io":         []any{map[string]any{"mirror_url": "http://cluster-init-registry:5000/v2/quay.io", "override_path": true}},
		"mirror.test:443": []any{map[string]any{"mirror_url": "https://a.test", "skip_verify": true, "capabilities": []any{"pull"}}, map[string]any{"mirror_url": "https://b.test"}},
	}}}
	res, err := render.Render(t.Context(), root, "", render.Options{Env: env, Context: render.ContextBootstrap,
		Overrides: []values.Layer{values.FromMap("(test)", mirrors)}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := res.Settings.RegistryMirrors.HostsConfig
	files := map[string]string{}
	for _, o := range res.Objects {
		if o.Object.GetKind() != "KubeadmControlPlane" {
			continue
		}
		list, _, _ := unstructured.NestedSlice(o.Object.Object, "spec", "kubeadmConfigSpec", "files")
		for _, f := range list {
			m := f.(map[string]any)
			files[m["path"].(string)] = m["content"].(string)
		}
	}
	for _, host := range cfg.Hosts() {
		path := "/etc/containerd/certs.d/" + host + "/hosts.toml"
		cli, err := cfg.HostsTOML(host)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := parseHosts(t, files[path]), parseHosts(t, cli); !reflect.DeepEqual(a, b) {
			t.Errorf("%s differs:\nchart:\n%s\nCLI:\n%s", path, files[path], cli)
		}
	}
	quay, _ := cfg.HostsTOML("quay.io")
	if !strings.Contains(quay, "override_path = true") || len(cfg.Hosts()) != 2 {
		t.Errorf("unexpected config: %v", cfg)
	}
}

// mirrorTable is what containerd reads of a hosts.toml: the mirrors in the order of their tables,
// with their settings.
type mirrorTable struct {
	URL      string
	Settings map[string]any
}

func parseHosts(t *testing.T, doc string) []mirrorTable {
	t.Helper()
	var v struct {
		Host map[string]map[string]any `toml:"host"`
	}
	md, err := toml.Decode(doc, &v)
	if err != nil {
		t.Fatalf("%v:\n%s", err, doc)
	}
	var out []mirrorTable
	for _, k := range md.Keys() {
		if len(k) == 2 && k[0] == "host" {
			out = append(out, mirrorTable{URL: k[1], Settings: v.Host[k[1]]})
		}
	}
	return out
}
