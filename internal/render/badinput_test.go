package render_test

import (
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// Every bad input fails before anything reaches a cluster, with a message naming the file (and
// line when there is one), the key and what was expected.
func TestBadInputsNameTheFileAndTheKey(t *testing.T) {
	root := testenv.Checkout(t)
	appendValues := func(extra string) map[string]func(string) string {
		return map[string]func(string) string{"values.yaml": func(s string) string { return s + extra }}
	}
	replaceIn := func(file, old, new string) map[string]func(string) string {
		return map[string]func(string) string{file: func(s string) string {
			if !strings.Contains(s, old) {
				t.Fatalf("%s has no %q to replace", file, old)
			}
			return strings.Replace(s, old, new, 1)
		}}
	}
	cases := []struct {
		name  string
		base  string
		edits map[string]func(string) string
		want  []string // substrings of the error
	}{
		{
			name: "dependency cycle",
			base: "kubeadm-capd",
			edits: appendValues(`units:
  capi:
    depends_on:
      cluster-ready: true
`),
			want: []string{"kubeadm-capd/values.yaml:19:", "units.capi.depends_on.cluster-ready", "dependency cycle", "capi -> cluster-ready -> cni -> cluster"},
		},
		{
			name: "dependency on an unknown unit",
			base: "kubeadm-capd",
			edits: appendValues(`units:
  cni:
    depends_on:
      clustr: true
`),
			want: []string{"values.yaml:19:", "units.cni.depends_on.clustr", `unknown unit "clustr"`},
		},
		{
			name: "misspelt applied dependency",
			base: "kubeadm-capd",
			edits: appendValues(`units:
  capd:
    depends_on:
      capi: aplied
`),
			want: []string{"values.yaml:19:", "units.capd.depends_on.capi"},
		},
		{
			name:  "unknown provider",
			base:  "kubeadm-capd",
			edits: replaceIn("values.yaml", "infrastructure: capd", "infrastructure: capz"),
			want:  []string{"kubeadm-capd/values.yaml:7:", "cluster.providers.infrastructure", `"capz" is not one of "capd", "capo"`},
		},
		{
			name:  "missing required value",
			base:  "kubeadm-capo",
			edits: replaceIn("values.yaml", "    ssh_key_name: management-key           # fill in: Nova key pair\n", ""),
			want:  []string{"kubeadm-capo/values.yaml:", "cluster.capo.ssh_key_name", "must be set", "Nova key pair"},
		},
		{
			name:  "missing credentials",
			base:  "kubeadm-capo",
			edits: map[string]func(string) string{"secrets.yaml": func(string) string { return "credentials: {}\n" }},
			want:  []string{"kubeadm-capo/secrets.yaml:1:", "credentials.openstack", "missing", "clouds_yaml"},
		},
		{
			name:  "wrong type",
			base:  "kubeadm-capd",
			edits: replaceIn("values.yaml", "  workers:\n    replicas: 1", "  workers:\n    replicas: two"),
			want:  []string{"kubeadm-capd/values.yaml:12:", "cluster.workers.replicas", "got string, expected integer"},
		},
		{
			name:  "even number of control plane machines",
			base:  "kubeadm-capd",
			edits: replaceIn("values.yaml", "  control_plane:\n    replicas: 1", "  control_plane:\n    replicas: 2"),
			want:  []string{"kubeadm-capd/values.yaml:10:", "cluster.control_plane.replicas", "expected an odd number"},
		},
		{
			name:  "three control plane machines on OpenStack without a load balancer",
			base:  "kubeadm-capo",
			edits: replaceIn("values.yaml", "    api_server_load_balancer:              # three control plane machines behind Octavia\n      enabled: true\n", ""),
			want:  []string{"cluster.control_plane.replicas", "3 control plane machines on capo need cluster.capo.api_server_load_balancer.enabled: true"},
		},
		{
			name:  "certificates rolled too late",
			base:  "kubeadm-capd",
			edits: replaceIn("values.yaml", "  control_plane:\n    replicas: 1", "  control_plane:\n    replicas: 1\n    roll_days_before_certificates_expire: 3"),
			want:  []string{"kubeadm-capd/values.yaml:11:", "cluster.control_plane.roll_days_before_certificates_expire", "7 to 300"},
		},
		{
			name:  "a health check that would replace a machine still starting",
			base:  "kubeadm-capd",
			edits: appendValues("  health_checks:\n    node_startup_timeout_seconds: 60\n"),
			want:  []string{"kubeadm-capd/values.yaml:", "cluster.health_checks.node_startup_timeout_seconds", "300 (5 minutes"},
		},
		{
			name:  "malformed YAML in values",
			base:  "kubeadm-capd",
			edits: replaceIn("values.yaml", "  providers:\n", "  providers:\n   bad: [\n"),
			want:  []string{"kubeadm-capd/values.yaml:", "invalid YAML"},
		},
		{
			name:  "malformed YAML in secrets, content not shown",
			base:  "kubeadm-capo",
			edits: replaceIn("secrets.yaml", "    cacert: \"\"", "    cacert: \"never-show-this\n  - ["),
			want:  []string{"kubeadm-capo/secrets.yaml:", "invalid YAML"},
		},
		{
			name:  "unknown key",
			base:  "kubeadm-capd",
			edits: appendValues("registry_mirror:\n  hosts_config: {}\n"),
			want:  []string{"kubeadm-capd/values.yaml:16:", "registry_mirror", "unknown key", "registry_mirrors"},
		},
		{
			name:  "invalid CIDR",
			base:  "kubeadm-capd",
			edits: replaceIn("values.yaml", "pods_cidr: 192.168.0.0/16", "pods_cidr: 192.168.0/16"),
			want:  []string{"kubeadm-capd/values.yaml:14:", "cluster.network.pods_cidr", "expected a CIDR block"},
		},
		{
			name:  "unit without a path or chart (misspelt unit)",
			base:  "kubeadm-capd",
			edits: appendValues("units:\n  certmanager:\n    enabled: false\n"),
			want:  []string{"kubeadm-capd/values.yaml:17:", "units.certmanager", "neither kustomization_spec.path nor helmrelease_spec.chart.spec.chart"},
		},
		{
			name:  "secret in the values file",
			base:  "kubeadm-capd",
			edits: appendValues("credentials:\n  git:\n    password: hunter2\n"),
			want:  []string{"kubeadm-capd/values.yaml:16:", "credentials", "secrets file"},
		},
		{
			name:  "non-secret key in the secrets file",
			base:  "kubeadm-capd",
			edits: map[string]func(string) string{"secrets.yaml": func(s string) string { return s + "cluster_init_image: foo\n" }},
			want:  []string{"kubeadm-capd/secrets.yaml:3:", "cluster_init_image", "only credentials"},
		},
		{
			name:  "secrets file missing",
			base:  "kubeadm-capd",
			edits: map[string]func(string) string{"secrets.yaml": nil},
			want:  []string{"kustomization.yaml", "secrets.yaml"},
		},
		{
			name:  "depends_on neither bool nor template",
			base:  "kubeadm-capd",
			edits: appendValues("units:\n  cni:\n    depends_on:\n      cluster: maybe\n"),
			want:  []string{"kubeadm-capd/values.yaml:19:", "units.cni.depends_on.cluster", "expected true, false, or a template"},
		},
		{
			name:  "enabled template rendering something else",
			base:  "kubeadm-capd",
			edits: appendValues("units:\n  cni:\n    enabled: '{{ .Values.cluster.name }}'\n"),
			want:  []string{"kubeadm-capd/values.yaml:18:", "units.cni.enabled", `rendered "management", expected true or false`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyEnv(t, root, c.base, c.edits)
			env, err := loadEnv(t, root, c.base, dir)
			if err == nil {
				_, err = render.Render(t.Context(), root, kubeVersion(t, root), render.Options{Env: env, Context: render.ContextBootstrap})
			}
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not contain %q:\n%s", w, msg)
				}
			}
			if strings.Contains(msg, "never-show-this") || strings.Contains(msg, "hunter2") {
				t.Errorf("error shows a secret value:\n%s", msg)
			}
		})
	}
}
