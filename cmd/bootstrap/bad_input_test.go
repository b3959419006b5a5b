package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/testenv"
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
	// Tenants: what the platform's values hand a tenant is its own and no more.
	{"a tenant in Kubernetes' own namespace", "workload_clusters:\n  tenants:\n    kube-system:\n      name_prefix: k-\n      path: ./clusters/k\n", []string{":3: workload_clusters.tenants.kube-system", "Kubernetes' own", "expected a namespace of the tenant's own"}},
	{"a tenant in the default namespace", "workload_clusters:\n  tenants:\n    default:\n      name_prefix: d-\n      path: ./clusters/d\n", []string{":3: workload_clusters.tenants.default", "Kubernetes' own"}},
	{"a tenant in a provider's namespace", "workload_clusters:\n  tenants:\n    capd-system:\n      name_prefix: c-\n      path: ./clusters/c\n", []string{":3: workload_clusters.tenants.capd-system", "the platform's: its components run there", "flux-system", "cert-manager", "capo-system", "orc-system", "rke2-control-plane-system"}},
	{"a tenant in Flux's namespace", "workload_clusters:\n  tenants:\n    flux-system:\n      name_prefix: f-\n      path: ./clusters/f\n", []string{":3: workload_clusters.tenants.flux-system", "the platform's"}},
	{"a tenant in the platform's own namespace", "workload_clusters:\n  tenants:\n    cluster-init:\n      name_prefix: p-\n      path: ./clusters/p\n", []string{":3: workload_clusters.tenants.cluster-init", "the platform's"}},
	{"a readers group of Kubernetes' system groups", "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      path: ./clusters/a\n      readers_group: system:authenticated\n", []string{":6: workload_clusters.tenants.team-a.readers_group", "not one of Kubernetes' own system: groups"}},
	{"a readers group of spaces", "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      path: ./clusters/a\n      readers_group: \"  \"\n", []string{":6: workload_clusters.tenants.team-a.readers_group", "expected a group"}},
	{"a tenant's branch with ..", "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      repository:\n        url: https://git.example.invalid/a.git\n        ref:\n          branch: main/../other\n", []string{":8: workload_clusters.tenants.team-a.repository.ref.branch", "without '..'"}},
	{"a tenant's tag with ..", "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      repository:\n        url: https://git.example.invalid/a.git\n        ref:\n          tag: v1..2\n", []string{":8: workload_clusters.tenants.team-a.repository.ref.tag", "without '..'"}},
	{"a source branch with ..", "source:\n  type: git\n  url: https://git.example.invalid/platform.git\n  ref:\n    branch: ../main\n", []string{":5: source.ref.branch", "without '..'"}},
	{"a tenant's repository fetched every second", "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      repository:\n        url: https://git.example.invalid/a.git\n        interval: 1s\n", []string{":7: workload_clusters.tenants.team-a.repository.interval", "expected 30s or more"}},
	{"a tenant's limits negative", "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      path: ./clusters/a\n      limits:\n        clusters: -1\n", []string{":7: workload_clusters.tenants.team-a.limits.clusters"}},
	{"limits past counting", "workload_clusters:\n  default_limits:\n    machines: 9223372036854775807\n", []string{":3: workload_clusters.default_limits.machines", "at most 10000"}},
	{"a control plane no etcd needs", "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      path: ./clusters/a\n      limits:\n        control_plane_replicas: 101\n", []string{":7: workload_clusters.tenants.team-a.limits.control_plane_replicas", "at most 7"}},
	// Credentials written into URLs of the values (a ConfigMap).
	{"a token in the alerts webhook's URL", "notifications:\n  alerts:\n    address: https://t0ken@alerts.example.invalid/hook\n", []string{":3: notifications.alerts.address", "carries a user name", "credentials.notifications.alerts_address"}},
	{"a password in another repository's URL", "repositories:\n  extra:\n    type: git\n    url: https://bob:pw@git.example.invalid/extra.git\n", []string{":4: repositories.extra.url", "carries a password", "repositories.extra.secret_ref"}},
	// Kubernetes versions the pinned Cluster API does not make clusters of.
	{"a Kubernetes older than Cluster API's kubeadm", "cluster:\n  kubernetes_version: v1.19.4\n", []string{":2: cluster.kubernetes_version", "lower than v1.22.0"}},
	{"a Kubernetes 2", "cluster:\n  kubernetes_version: v2.0.0\n", []string{":2: cluster.kubernetes_version", "Kubernetes 1.x only"}},
	{"a tenants' Kubernetes older than Cluster API's kubeadm", "workload_clusters:\n  kubernetes_versions: [v1.37.0, v1.21.0]\n", []string{":2: workload_clusters.kubernetes_versions[1]", "lower than v1.22.0"}},
	// Units.
	{"a unit a dependency needs, disabled", "units:\n  cert-manager:\n    enabled: false\n", []string{":3: units.cert-manager.enabled", "capi depends on it", "expected it enabled"}},
	{"a dependency on an unknown unit", "units:\n  capi:\n    depends_on:\n      nope: true\n", []string{"units.capi.depends_on.nope", "unknown unit"}},
	{"a dependency cycle", "units:\n  cert-manager:\n    depends_on:\n      capi: true\n", []string{"units.cert-manager.depends_on.capi", "cycle"}},
	{"a unit path outside the source", "units:\n  capi:\n    kustomization_spec:\n      path: ./nowhere\n", []string{":3: units.capi.kustomization_spec", "./nowhere", "not found"}},
	// Files.
	{"a second YAML document", "cluster:\n  name: a\n---\ncluster:\n  name: b\n", []string{":3: a second YAML document", "expected one document"}},
	{"a byte that is not UTF-8", "cluster:\n  name: \"caf\xe9\"\n", []string{":2: column 13: not UTF-8", "expected a YAML file in UTF-8"}},
	{"a YAML alias bomb", testenv.AliasBomb, []string{"aliases", "expand to more than", "expected plain values"}},
	{"a file too large for a ConfigMap", "# " + strings.Repeat("x", 600<<10) + "\n", []string{"larger than 512 KiB", "expected a values file"}},
	{"a YAML syntax error", "cluster:\n  name: [unclosed\n", []string{"invalid YAML", "did not find expected"}},
	{"a list at the top", "- a\n- b\n", []string{":1: expected a map of values at the top level"}},
	{"a duplicate key", "cluster:\n  name: a\n  name: b\n", []string{":3: cluster.name", "set twice"}},
}

// badTenants are values the chart of the tenants refuses (what tenants share with one another or
// with the platform), in the management cluster's release after the pivot: validate names them.
// bootstrap refuses these environments earlier, for their git source's secrets in clear.
var badTenants = []struct {
	name, content string
	want          []string
}{
	{"a tenant's path in the platform's applications", gitSource + "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      path: ./clusters/management/apps/team-a\n", []string{":8: workload_clusters.tenants.team-a.path", "is inside clusters/management/apps of the platform's repository"}},
	{"a tenant's path around the platform's applications", gitSource + "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      path: ./clusters/management\n", []string{":8: workload_clusters.tenants.team-a.path", "holds clusters/management/apps"}},
	{"a tenant's path in the environments", gitSource + "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      path: ./environment-values/team-a\n", []string{":8: workload_clusters.tenants.team-a.path", "is inside environment-values"}},
	{"a tenant's path in the charts", gitSource + "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      path: ./charts/cluster-init/templates\n", []string{":8: workload_clusters.tenants.team-a.path", "is inside charts"}},
	{"a tenant of the platform's URL with all of it", gitSource + "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      repository:\n        url: https://GIT.example.invalid/platform\n", []string{":6: workload_clusters.tenants.team-a", "the whole of the platform's repository", "its repository.url is the platform's source.url"}},
	{"a tenant of the platform's URL in its components", gitSource + "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      path: ./kustomize-components\n      repository:\n        url: https://git.example.invalid/platform.git/\n", []string{":8: workload_clusters.tenants.team-a.path", "is kustomize-components of the platform's repository"}},
	{"two tenants' prefixes overlapping", gitSource + "workload_clusters:\n  tenants:\n    workload-clusters:\n      name_prefix: wl-\n    team-a:\n      name_prefix: a-\n      path: ./clusters/a\n    team-b:\n      name_prefix: a-b-\n      path: ./clusters/b\n", []string{":9: workload_clusters.tenants.team-a.name_prefix", `"a-" and workload_clusters.tenants.team-b.name_prefix "a-b-" overlap`}},
	{"a tenant's namespace starting another's", gitSource + "workload_clusters:\n  tenants:\n    workload-clusters:\n      name_prefix: wl-\n    team:\n      name_prefix: a-\n      path: ./clusters/a\n    team-b:\n      name_prefix: b-\n      path: ./clusters/b\n", []string{":8: workload_clusters.tenants.team", "one tenant's namespace starts the other's"}},
	{"two tenants of one repository, one inside the other", gitSource + "workload_clusters:\n  tenants:\n    team-a:\n      name_prefix: a-\n      path: ./teams\n      repository:\n        url: https://git.example.invalid/teams.git\n    team-b:\n      name_prefix: b-\n      path: ./teams/b\n      repository:\n        url: https://git.example.invalid/Teams\n", []string{"workload_clusters.tenants.team-a.path", `"./teams" and workload_clusters.tenants.team-b.path "./teams/b"`, "a directory of its own"}},
}

// The chart's refusals of tenants are named like the values' own: file and line, key, expected.
func TestBadTenantsAreRefusedWithTheirFileAndKey(t *testing.T) {
	dir := t.TempDir()
	for i, c := range badTenants {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, fmt.Sprintf("tenants-%d.yaml", i))
			if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := run(t, "validate", "kubeadm-capd", "--values", file)
			if err == nil {
				t.Fatalf("accepted:\n%s", out)
			}
			for _, want := range append([]string{filepath.Base(file)}, c.want...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the message lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

// gitSource makes the management cluster read its tenants from git: the chart's checks between
// tenants run (3 lines).
const gitSource = "source:\n  type: git\n  url: https://git.example.invalid/platform.git\n"

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
		{"an alias bomb in an encrypted secrets file", "secrets.yaml", testenv.AliasBomb + "sops:\n  mac: ENC[AES256_GCM,data:x,iv:x,tag:x,type:str]\n", []string{"secrets.yaml: its YAML aliases (*name) expand to more than 100000 values"}, ""},
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
	if _, err := run(t, "validate", "kubeadm-capd", "--values", "/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: not a regular file (a character device)") {
		t.Errorf("--values /dev/zero: %v", err)
	}
}

// checkoutCopy is a checkout of its own (the source snapshot copies files, not links), without
// the Go code and the top-level entries of skip, that a test may write into.
func checkoutCopy(t *testing.T, skip ...string) string {
	t.Helper()
	src := testenv.Checkout(t)
	root := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch name := e.Name(); {
		case name == ".git" || name == "cmd" || name == "internal" || name == "api" || slices.Contains(skip, name):
		case e.IsDir():
			if err := os.CopyFS(filepath.Join(root, name), os.DirFS(filepath.Join(src, name))); err != nil {
				t.Fatal(err)
			}
		default:
			data, err := os.ReadFile(filepath.Join(src, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// A cluster named wl1 with a label the API server refuses (a value of 64 characters).
const clusterWithLongLabel = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: wl1\n  labels:\n    team: " + "abcdefgh12345678abcdefgh12345678abcdefgh12345678abcdefgh12345678" + "\nspec:\n  values:\n    cluster:\n      name: wl1\n"

// An application (its directory: kustomization.yaml, application.yaml) with the given spec.
func application(name, spec string) map[string]string {
	dir := "clusters/management/apps/" + name + "/"
	return map[string]string{
		dir + "kustomization.yaml": "resources: [application.yaml]\n",
		dir + "application.yaml":   "apiVersion: apps.cluster-init.dev/v1alpha1\nkind: Application\nmetadata:\n  name: " + name + "\nspec:\n  sourceRef: {kind: GitRepository, name: cluster-init}\n" + spec,
	}
}

// What the CLI reads of the tenants' and the applications' directories costs what its bounds
// allow, whatever a commit put there: an alias bomb in a cluster's or an application's file, a
// link to /dev/zero, a file of 100 MB are refused, each naming its file; and what the management
// cluster's API server would refuse of a directory (a kind its account may not write, metadata
// past the API's limits, a selector that does not parse) is named before it stops a tenant's or
// every application.
func TestHostileFilesAreRefusedWithinBounds(t *testing.T) {
	root := checkoutCopy(t)
	git := filepath.Join(t.TempDir(), "git.yaml")
	if err := os.WriteFile(git, []byte(gitSource), 0o600); err != nil {
		t.Fatal(err)
	}
	const tenantDir = "clusters/management/workload-clusters/"
	cases := []struct {
		name  string
		files map[string]string
		// links are links to make (path -> target); sparse are files of that many bytes.
		links  map[string]string
		sparse map[string]int64
		want   []string
	}{
		{name: "an alias bomb in a cluster's file", files: map[string]string{tenantDir + "bomb/cluster.yaml": testenv.AliasBomb},
			want: []string{tenantDir + "bomb/cluster.yaml: its YAML aliases (*name) expand to more than 100000 values in the directory: expected plain values"}},
		{name: "an alias bomb in an application's file", files: map[string]string{
			"clusters/management/apps/bomb/kustomization.yaml": "resources: [application.yaml]\n", "clusters/management/apps/bomb/application.yaml": testenv.AliasBomb},
			want: []string{"clusters/management/apps/bomb/application.yaml: its YAML aliases (*name) expand to more than 100000 values"}},
		{name: "a cluster's file that is a link to /dev/zero", links: map[string]string{tenantDir + "zero.yaml": "/dev/zero"},
			want: []string{tenantDir + "zero.yaml: a symbolic link: source-controller leaves links out of the repository's artifact", "expected a regular file"}},
		{name: "an application's file that is a link", links: map[string]string{"clusters/management/apps/x.yaml": "../../../charts/cluster-init/values.yaml"},
			want: []string{"clusters/management/apps/x.yaml: a symbolic link"}},
		{name: "a cluster's file of 100 MB", sparse: map[string]int64{tenantDir + "big/cluster.yaml": 100 << 20},
			want: []string{tenantDir + "big/cluster.yaml: larger than 256 KiB: expected a manifest file"}},
		{name: "a ConfigMap in a tenant's directory", files: map[string]string{tenantDir + "cm/cm.yaml": "# the tenant's notes\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n"},
			want: []string{tenantDir + "cm/cm.yaml:2: ConfigMap notes: the tenant's account (ServiceAccount workload-clusters/tenant) may write helmreleases.helm.toolkit.fluxcd.io, not configmaps", "every workload cluster of the tenant would stop changing"}},
		{name: "a HelmRelease of another group in a tenant's directory", files: map[string]string{tenantDir + "other/cluster.yaml": "apiVersion: helm.example.invalid/v1\nkind: HelmRelease\nmetadata:\n  name: other\n"},
			want: []string{tenantDir + "other/cluster.yaml:1: HelmRelease other: helm.example.invalid/v1, Kind=HelmRelease is no kind of the management cluster's API"}},
		{name: "a cluster's label past the API's limits", files: map[string]string{tenantDir + "wl1/cluster.yaml": clusterWithLongLabel},
			want: []string{tenantDir + "wl1/cluster.yaml: HelmRelease wl1: metadata.labels: Invalid value", "must be no more than 63 bytes"}},
		{name: "a Secret in the applications' directory", files: map[string]string{
			"clusters/management/apps/leak/kustomization.yaml": "resources: [secret.yaml]\n", "clusters/management/apps/leak/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: leak\n"},
			want: []string{"Secret leak: the applications' account (ServiceAccount cluster-init/applications-from-git) may write applications.apps.cluster-init.dev, not secrets", "no application would change"}},
		{name: "an Application's selector that does not parse", files: application("near", "  path: ./clusters/management/apps/near\n  placement:\n    selector:\n      matchExpressions:\n        - {key: zone, operator: Near, values: [a]}\n"),
			want: []string{"application near: placement.selector:", `"Near" is not a valid label selector operator`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var made []string
			t.Cleanup(func() {
				for _, p := range made {
					os.RemoveAll(p)
				}
			})
			mkdir := func(rel string) string {
				path := filepath.Join(root, rel)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				made = append(made, path)
				return path
			}
			for rel, content := range c.files {
				if err := os.WriteFile(mkdir(rel), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for rel, target := range c.links {
				if err := os.Symlink(target, mkdir(rel)); err != nil {
					t.Fatal(err)
				}
			}
			for rel, size := range c.sparse {
				f, err := os.Create(mkdir(rel))
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Truncate(size); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			out, err := run(t, "--repo", root, "validate", "kubeadm-capd", "--values", git)
			if err == nil {
				t.Fatalf("accepted:\n%s", out)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the message lacks %q:\n%v", want, err)
				}
			}
		})
	}
}

// An age key file that never ends (a link to /dev/zero) is refused before anything reads it;
// --tenant for an environment whose management cluster reads no tenant's directory is an error.
func TestFlagsThatNameNothingToRead(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "zero.agekey")
	if err := os.Symlink("/dev/zero", key); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "validate", "kubeadm-capd", "--age-key-file", key); err == nil || !strings.Contains(err.Error(), "zero.agekey: not a regular file (a character device): expected a regular file") {
		t.Errorf("--age-key-file linked to /dev/zero: %v", err)
	}
	t.Setenv("SOPS_AGE_KEY_FILE", key)
	if _, err := run(t, "validate", "kubeadm-capd"); err == nil || !strings.Contains(err.Error(), "zero.agekey: not a regular file") {
		t.Errorf("SOPS_AGE_KEY_FILE linked to /dev/zero: %v", err)
	}
	t.Setenv("SOPS_AGE_KEY_FILE", "")
	if _, err := run(t, "validate", "kubeadm-capd", "--tenant", "team-a="+dir); err == nil || !strings.Contains(err.Error(), `--tenant team-a: the environment's source is "oci": its management cluster reads no tenant's directory`) {
		t.Errorf("--tenant without a git source: %v", err)
	}
}
