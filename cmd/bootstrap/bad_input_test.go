package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// badValues are values files that must be refused, each with what the one message must say:
// the file and line, the key, and what was expected. One case per class of the bad inputs a new
// user tried; the comment names the class.
var badValues = []struct {
	name, content string
	want          []string
}{
	// Types, enums, unknown keys, names: the schema.
	{"a string replica count", "cluster:\n  workers:\n    replicas: many\n", []string{":3: cluster.workers.replicas", "expected integer"}},
	{"a negative replica count", "cluster:\n  workers:\n    replicas: -1\n", []string{":3: cluster.workers.replicas"}},
	{"an unknown provider", "cluster:\n  providers:\n    infrastructure: capz\n", []string{":3: cluster.providers.infrastructure", "capd"}},
	{"an unknown top-level key", "clutser:\n  name: x\n", []string{":1: clutser", "unknown key"}},
	{"an unknown nested key", "cluster:\n  workres:\n    replicas: 2\n", []string{":2: cluster.workres", "unknown key"}},
	{"a name with capitals", "cluster:\n  name: Mgmt\n", []string{":2: cluster.name", "expected a DNS label"}},
	{"a name too long for its machines", "cluster:\n  name: " + strings.Repeat("a", 44) + "\n", []string{":2: cluster.name", "at most 43"}},
	{"a bootstrap cluster name with a dot", "bootstrap_cluster:\n  name: kind.local\n", []string{":2: bootstrap_cluster.name", "expected a DNS label"}},
	{"a duration without unit", "unit_defaults:\n  timeout: 5\n", []string{":2: unit_defaults.timeout"}},
	{"a list where a map belongs", "cluster:\n  network: [a, b]\n", []string{":2: cluster.network", "expected"}},
	// Networks.
	{"a CIDR with an octet over 255", "cluster:\n  network:\n    pods_cidr: 300.1.0.0/16\n", []string{":3: cluster.network.pods_cidr", "not a CIDR block"}},
	{"a CIDR with host bits", "cluster:\n  network:\n    pods_cidr: 192.168.1.0/16\n", []string{":3: cluster.network.pods_cidr", "expected the network's first address, 192.168.0.0/16"}},
	{"a CIDR without a length", "cluster:\n  network:\n    services_cidr: 10.128.0.0\n", []string{":3: cluster.network.services_cidr", "CIDR"}},
	{"pods and services overlapping", "cluster:\n  network:\n    pods_cidr: 10.128.0.0/16\n", []string{":3: cluster.network.pods_cidr", "overlaps cluster.network.services_cidr", "expected networks that do not overlap"}},
	{"pods over the bootstrap cluster's", "cluster:\n  network:\n    pods_cidr: 10.244.0.0/16\n", []string{":3: cluster.network.pods_cidr", "overlaps bootstrap_cluster.pods_cidr"}},
	{"bootstrap services over the cluster's", "bootstrap_cluster:\n  services_cidr: 10.128.0.0/16\n", []string{":2: bootstrap_cluster.services_cidr", "overlaps cluster.network.services_cidr"}},
	// Air-gapped RKE2: a checksum that is not one, the kind node image that has no artifacts.
	{"an RKE2 artifacts checksum that is not a sha256", "cluster:\n  rke2_air_gapped:\n    artifacts_checksum: abc123\n", []string{":3: cluster.rke2_air_gapped.artifacts_checksum", "64 hex digits"}},
	{"air-gapped RKE2 on the kind node image", "cluster:\n  providers:\n    bootstrap: rke2\n  rke2_version: v1.37.0+rke2r1\n  rke2_air_gapped:\n    enabled: true\n", []string{":6: cluster.rke2_air_gapped.enabled", "holds no RKE2 artifacts", "/opt/rke2-artifacts"}},
	// Versions and images.
	{"a version that is not one", "cluster:\n  kubernetes_version: latest\n", []string{":2: cluster.kubernetes_version"}},
	{"a node image of another version", "cluster:\n  capd:\n    node_image: kindest/node:v1.35.0\n", []string{":3: cluster.capd.node_image", "expected the node image of the same version"}},
	{"an image reference with spaces", "cluster_init_image: \"cluster-init/bootstrap: v1\"\n", []string{":1: cluster_init_image"}},
	{"an image reference without a tag", "bootstrap_cluster:\n  node_image: kindest/node\n", []string{":2: bootstrap_cluster.node_image", "no tag or digest"}},
	{"an image reference with an empty tag", "bootstrap_cluster:\n  registry:\n    image: \"registry:\"\n", []string{":3: bootstrap_cluster.registry.image"}},
	// The cluster a release runs in is not the values' to say.
	{"context set by --values", "context: management\n", []string{":1: context", "expected no such key"}},
	{"self_managed set by --values", "self_managed: true\n", []string{":1: self_managed", "expected no such key"}},
	// URLs: parsed as their controllers will, not only their first characters.
	{"a source URL without a host", "source:\n  type: git\n  url: https://\n", []string{":3: source.url", "no host", "expected https://, http://, ssh://host[:port]/path"}},
	{"a source URL with a port out of range", "source:\n  type: git\n  url: https://git.example.invalid:99999/repo.git\n", []string{":3: source.url", `port "99999"`, "1 to 65535"}},
	{"a git source with an OCI URL", "source:\n  type: git\n  url: oci://registry.example.invalid/repo\n", []string{":3: source.url", `scheme "oci"`}},
	{"a source URL with a space", "source:\n  type: git\n  url: https://git example.invalid/repo.git\n", []string{":3: source.url", "a space or control character at position 12"}},
	{"a mirror on port 0", "registry_mirrors:\n  hosts_config:\n    quay.io:\n      - mirror_url: http://mirror.example.invalid:0/v2\n", []string{`:4: registry_mirrors.hosts_config["quay.io"][0].mirror_url`, `port "0"`}},
	{"a mirrored registry on a port out of range", "registry_mirrors:\n  hosts_config:\n    quay.io:70000:\n      - mirror_url: http://mirror.example.invalid:5000\n", []string{`:3: registry_mirrors.hosts_config["quay.io:70000"]`, `port "70000"`, "expected host or host:port"}},
	{"a proxy with a port out of range", "proxies:\n  https_proxy: http://proxy.example.invalid:123456\n", []string{":2: proxies.https_proxy", `port "123456"`}},
	{"a mirror whose host is a bad IP address", "registry_mirrors:\n  hosts_config:\n    docker.io:\n      - mirror_url: http://10.0.0.300:5000\n", []string{`:4: registry_mirrors.hosts_config["docker.io"][0].mirror_url`, `host "10.0.0.300": not an IP address`}},
	{"a tenant repository URL with a port that is not a number", "workload_clusters:\n  tenants:\n    team-a:\n      repository:\n        url: https://git.example.invalid:abc/x.git\n", []string{":5: workload_clusters.tenants.team-a.repository.url", "not a URL", "a port that is not a number"}},
	{"an alerts webhook without a scheme", "notifications:\n  alerts:\n    address: alerts.example.invalid/hook\n", []string{":3: notifications.alerts.address", "no scheme"}},
	// Notifications: a receiver's node port outside the range, without the receiver's token, or with an OCI source.
	{"a receiver node port outside the node port range", "notifications:\n  receiver:\n    node_port: 8080\n", []string{":3: notifications.receiver.node_port"}},
	{"a receiver node port without the receiver's token", "source:\n  type: git\n  url: https://git.example.invalid/platform.git\nnotifications:\n  receiver:\n    node_port: 30292\n", []string{":6: notifications.receiver.node_port", "expected credentials.notifications.receiver_token"}},
	{"a receiver node port with an OCI source", "notifications:\n  receiver:\n    node_port: 30292\n", []string{":3: notifications.receiver.node_port", `the source is "oci"`, "expected source.type git"}},
	// Infrastructures: in-memory is a tenant's, and a tenant's clusters run where CAPD or the management cluster's provider does.
	{"an environment's cluster in memory", "cluster:\n  providers:\n    infrastructure: in-memory\n", []string{":3: cluster.providers.infrastructure", "in-memory simulates a tenant's workload clusters"}},
	{"a tenant on an infrastructure the management cluster does not run", "workload_clusters:\n  tenants:\n    team-x:\n      infrastructure: capo\n", []string{":4: workload_clusters.tenants.team-x.infrastructure", "infrastructure capd", "expected capd or in-memory"}},
	{"a tenant in memory beside an rke2 management cluster", "cluster:\n  providers:\n    bootstrap: rke2\nworkload_clusters:\n  tenants:\n    team-x:\n      infrastructure: in-memory\n", []string{":7: workload_clusters.tenants.team-x.infrastructure", "in-memory needs kubeadm on capd", "expected capd"}},
	// Secrets in the wrong place.
	{"a password in the source URL", "source:\n  type: git\n  url: https://bob:t0ken@git.example.invalid/repo.git\n", []string{":3: source.url", "carries a password", "credentials.git"}},
	{"credentials in --values", "credentials:\n  git:\n    password: x\n", []string{":1: credentials", "secrets file"}},
	// Units.
	{"a unit a dependency needs, disabled", "units:\n  cert-manager:\n    enabled: false\n", []string{":3: units.cert-manager.enabled", "capi depends on it", "expected it enabled"}},
	{"a dependency on an unknown unit", "units:\n  capi:\n    depends_on:\n      nope: true\n", []string{"units.capi.depends_on.nope", "unknown unit"}},
	{"a dependency cycle", "units:\n  cert-manager:\n    depends_on:\n      capi: true\n", []string{"units.cert-manager.depends_on.capi", "cycle"}},
	{"a unit path outside the source", "units:\n  capi:\n    kustomization_spec:\n      path: ./nowhere\n", []string{":3: units.capi.kustomization_spec", "./nowhere", "not found"}},
	// Files.
	{"a second YAML document", "cluster:\n  name: a\n---\ncluster:\n  name: b\n", []string{":3: a second YAML document", "expected one document"}},
	{"a byte that is not UTF-8", "cluster:\n  name: \"caf\xe9\"\n", []string{":2: column 13: not UTF-8", "expected a YAML file in UTF-8"}},
	{"a YAML alias bomb", aliasBomb, []string{"aliases", "expand to more than", "expected plain values"}},
	{"a file too large for a ConfigMap", "# " + strings.Repeat("x", 600<<10) + "\n", []string{"larger than 512 KiB", "expected a values file"}},
	{"a YAML syntax error", "cluster:\n  name: [unclosed\n", []string{"invalid YAML", "did not find expected"}},
	{"a list at the top", "- a\n- b\n", []string{":1: expected a map of values at the top level"}},
	{"a duplicate key", "cluster:\n  name: a\n  name: b\n", []string{":3: cluster.name", "set twice"}},
}

const aliasBomb = `a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

// Every bad input is refused by `bootstrap ENV` in its first phase, before any cluster exists
// (the state directory stays empty), with one message that names the file, the key and what was
// expected; validate refuses it the same way.
func TestBadInputIsRefusedBeforeAnythingIsCreated(t *testing.T) {
	state := t.TempDir()
	t.Setenv("CLUSTER_INIT_STATE_DIR", state)
	dir := t.TempDir()
	seen := map[string]bool{}
	for i, c := range badValues {
		if seen[c.content] {
			t.Fatalf("case %q repeats another case's input", c.name)
		}
		seen[c.content] = true
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, "bad-"+string(rune('a'+i%26))+string(rune('a'+i/26))+".yaml")
			if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"validate", "kubeadm-capd", "--values", file},
				{"kubeadm-capd", "--values", file, "--until", "validate", "--output", "json"},
			} {
				out, err := run(t, args...)
				if err == nil {
					t.Fatalf("%v accepted it:\n%s", args[0], out)
				}
				msg := err.Error()
				for _, want := range append([]string{filepath.Base(file)}, c.want...) {
					if !strings.Contains(msg, want) {
						t.Errorf("%s: the message lacks %q:\n%s", args[0], want, msg)
					}
				}
				if n := strings.Count(msg, filepath.Base(file)); n > 1 && !strings.Contains(msg, "overlaps") {
					t.Errorf("%s: %d messages for one problem:\n%s", args[0], n, msg)
				}
			}
		})
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("the bad inputs left state behind: %v", entries)
	}
	t.Logf("%d distinct bad values files refused before anything was created", len(badValues))
}

// Bad environments (not --values) are refused the same way, naming their own files.
func TestBadEnvironmentFilesAreNamed(t *testing.T) {
	cases := []struct {
		name, file, content string
		want                []string
		// values is appended to the environment's values.yaml.
		values string
	}{
		{"a cloud missing from clouds.yaml", "values.yaml", "", []string{"cluster.capo.cloud_name", `"elsewhere" is not a cloud of credentials.openstack.clouds_yaml (clouds: openstack)`}, ""},
		{"a clouds.yaml that is not YAML", "secrets.yaml", "credentials:\n  openstack:\n    clouds_yaml: \"clouds: [unclosed\"\n", []string{"secrets.yaml:3: credentials.openstack.clouds_yaml", "not YAML", "expected a clouds.yaml"}, ""},
		{"a cloud without the secret of its application credential", "secrets.yaml", "credentials:\n  openstack:\n    clouds_yaml: |\n      clouds:\n        openstack:\n          auth:\n            auth_url: https://keystone.example.invalid:5000/v3\n            application_credential_id: the-id\n          auth_type: v3applicationcredential\n",
			[]string{"secrets.yaml:3: credentials.openstack.clouds_yaml", `cloud "openstack": auth.application_credential_secret: missing`}, ""},
		{"a receiver token too short to guard it", "secrets.yaml", "credentials:\n  openstack:\n    clouds_yaml: |\n      clouds:\n        openstack:\n          auth:\n            auth_url: https://keystone.example.invalid:5000/v3\n            application_credential_id: the-id\n            application_credential_secret: the-secret\n          auth_type: v3applicationcredential\n  notifications:\n    receiver_token: short\n",
			[]string{"secrets.yaml:12: credentials.notifications.receiver_token"}, ""},
		{"a tenant's cloud missing from its own clouds.yaml", "secrets.yaml", "credentials:\n  openstack:\n    clouds_yaml: |\n      clouds:\n        openstack:\n          auth:\n            auth_url: https://keystone.example.invalid:5000/v3\n            application_credential_id: the-id\n            application_credential_secret: the-secret\n          auth_type: v3applicationcredential\n  tenants:\n    team-os:\n      openstack:\n        clouds_yaml: |\n          clouds:\n            openstack:\n              auth: {}\n",
			[]string{"values.yaml", "workload_clusters.tenants.team-os.capo.cloud_name", `"team-os" is not a cloud of credentials.tenants.team-os.openstack.clouds_yaml (clouds: openstack)`},
			"workload_clusters:\n  tenants:\n    team-os:\n      name_prefix: os-\n      path: ./clusters/management/team-os\n      capo:\n        cloud_name: team-os\n"},
		{"a tenant given every cloud of the platform's clouds.yaml", "secrets.yaml", "credentials:\n  openstack:\n    clouds_yaml: |\n      clouds:\n        openstack:\n          auth:\n            auth_url: https://keystone.example.invalid:5000/v3\n            application_credential_id: the-id\n            application_credential_secret: the-secret\n          auth_type: v3applicationcredential\n        admin:\n          auth:\n            auth_url: https://keystone.example.invalid:5000/v3\n            application_credential_id: the-admin-id\n            application_credential_secret: the-admin-secret\n          auth_type: v3applicationcredential\n",
			[]string{"secrets.yaml:3: credentials.openstack.clouds_yaml", "2 clouds: the clusters of tenant workload-clusters are given this clouds.yaml as it is"}, ""},
		{"a values file that is not UTF-8", "values.yaml", "cluster:\n  name: \"caf\xe9\"\n", []string{"values.yaml:2: column 13: not UTF-8"}, ""},
		{"a secrets file too large", "secrets.yaml", "# " + strings.Repeat("x", 600<<10) + "\n", []string{"secrets.yaml", "larger than 512 KiB"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyEnvironment(t, "kubeadm-capo", func(file string, data []byte) []byte {
				switch {
				case file == c.file && c.content != "":
					return []byte(c.content)
				case file == "values.yaml" && c.content == "":
					return []byte(strings.Replace(string(data), "cloud_name: openstack", "cloud_name: elsewhere", 1))
				case file == "values.yaml":
					return append(data, c.values...)
				}
				return data
			})
			_, err := run(t, "validate", dir)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the message lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

// A workload cluster's directory is not an environment, and --values /dev/zero is not read
// forever.
func TestPathsThatAreNotEnvironments(t *testing.T) {
	if _, err := run(t, "validate", "../../environment-values/workload-clusters/example"); err == nil || !strings.Contains(err.Error(), "is a workload cluster") {
		t.Errorf("a workload cluster validated as an environment: %v", err)
	}
	if _, err := run(t, "validate", "kubeadm-capd", "--values", "/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: larger than 512 KiB") {
		t.Errorf("--values /dev/zero: %v", err)
	}
}
