package registrymirror_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/registrymirror"
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
	res, err := render.Render(t.Context(), render.Options{RepoRoot: root, Env: env, Context: render.ContextBootstrap,
		Overrides: []values.Layer{values.FromMap("(test)", mirrors)}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := registrymirror.FromValues(res.Values)
	if err != nil {
		t.Fatal(err)
	}
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
		if files[path] != cfg.HostsTOML(host) {
			t.Errorf("%s differs:\nchart:\n%s\nCLI:\n%s", path, files[path], cfg.HostsTOML(host))
		}
	}
	if !strings.Contains(cfg.HostsTOML("quay.io"), "override_path = true") || len(cfg.Hosts()) != 2 {
		t.Errorf("unexpected config: %v", cfg)
	}
}
