package values

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	yamlv3 "go.yaml.in/yaml/v3"
	"golang.org/x/mod/semver"
)

// Check finds what the schema cannot say about merged values: networks that are not CIDR
// blocks or that overlap, image references the field's parser refuses, a Kubernetes version that
// does not match the node image or the RKE2 version, a context set by a file, an OpenStack cloud
// missing from its clouds.yaml, a URL without a scheme its user takes, a host or a port in range.
// Each problem names the file and line of the key, as schema problems do; a secret's content is
// never quoted. It runs after the schema, on values the schema accepted.
func Check(layers []Layer, merged map[string]any, s Settings, fallback Origin) Problems {
	c := checker{layers: layers, merged: merged, fallback: fallback}
	c.networks(s)
	c.images()
	c.versions(s)
	c.rke2AirGapped(s)
	c.context()
	c.credentialsInURLs()
	c.urls()
	c.notifications()
	c.infrastructures(s)
	c.tenants()
	c.kubernetesVersions(s)
	// A workload cluster's credentials are the management cluster's, given to its release in
	// the cluster: offline, only an environment's own secrets can be checked.
	if s.Cluster.Providers.Infrastructure == "capo" && s.Context != "workload" {
		c.capo()
		c.tenantClouds()
	}
	return c.problems
}

type checker struct {
	layers   []Layer
	merged   map[string]any
	fallback Origin
	problems Problems
}

func (c *checker) add(key, format string, args ...any) {
	c.problems = append(c.problems, Problem{Origin: Locate(c.layers, ParseKey(key), c.fallback), Key: key, Message: fmt.Sprintf(format, args...)})
}

// latest orders two keys that conflict: first the one set by the layer of highest precedence
// (the last change, most likely the mistake), where the problem is reported.
func (c *checker) latest(a, b string) (first, second string) {
	if c.setAt(b) > c.setAt(a) {
		return b, a
	}
	return a, b
}

// setAt is the index of the last layer (not the chart's defaults) that sets key, or -1.
func (c *checker) setAt(key string) int {
	for i := len(c.layers) - 1; i >= 0; i-- {
		if _, ok := c.layers[i].Has(ParseKey(key)); ok && !c.layers[i].Defaults {
			return i
		}
	}
	return -1
}

func (c *checker) str(key string) (string, bool) {
	v, ok := lookup(c.merged, ParseKey(key))
	s, isString := v.(string)
	return s, ok && isString
}

// The networks of a release: each a CIDR block, the cluster's two apart, and, for a management
// cluster, apart from the bootstrap cluster's (whose routes its machines share while it runs).
func (c *checker) networks(s Settings) {
	keys := []string{"cluster.network.pods_cidr", "cluster.network.services_cidr", "cluster.capo.node_cidr",
		"bootstrap_cluster.pods_cidr", "bootstrap_cluster.services_cidr"}
	prefixes := map[string]netip.Prefix{}
	for _, key := range keys {
		v, ok := c.str(key)
		if !ok || v == "" {
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			c.add(key, "%q is not a CIDR block (expected an address and a prefix length, such as 192.168.0.0/16): %v", v, trimParseError(err))
			continue
		}
		if p != p.Masked() {
			c.add(key, "%q has bits set past its prefix length: expected the network's first address, %s", v, p.Masked())
			continue
		}
		prefixes[key] = p
	}
	pairs := [][2]string{{"cluster.network.pods_cidr", "cluster.network.services_cidr"}}
	if s.Cluster.Providers.Infrastructure == "capo" {
		pairs = append(pairs, [2]string{"cluster.capo.node_cidr", "cluster.network.pods_cidr"}, [2]string{"cluster.capo.node_cidr", "cluster.network.services_cidr"})
	}
	// The bootstrap cluster exists only while bootstrap runs with a kind cluster it pivots from.
	if pivot, _ := lookup(c.merged, []string{"pivot"}); s.Context == "bootstrap" && pivot != false {
		pairs = append(pairs,
			[2]string{"cluster.network.pods_cidr", "bootstrap_cluster.pods_cidr"}, [2]string{"cluster.network.pods_cidr", "bootstrap_cluster.services_cidr"},
			[2]string{"cluster.network.services_cidr", "bootstrap_cluster.pods_cidr"}, [2]string{"cluster.network.services_cidr", "bootstrap_cluster.services_cidr"})
	}
	for _, pair := range pairs {
		a, okA := prefixes[pair[0]]
		b, okB := prefixes[pair[1]]
		if okA && okB && a.Overlaps(b) {
			key, other := c.latest(pair[0], pair[1])
			c.add(key, "%s overlaps %s (%s): expected networks that do not overlap", prefixes[key], other, prefixes[other])
		}
	}
}

func trimParseError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// imageKeys are the values that are image references.
var imageKeys = []string{"cluster_init_image", "cluster.capd.node_image", "bootstrap_cluster.node_image", "bootstrap_cluster.registry.image"}

func (c *checker) images() {
	for _, key := range imageKeys {
		v, ok := c.str(key)
		if !ok || v == "" {
			continue
		}
		if _, err := name.ParseReference(v); err != nil {
			c.add(key, "%q is not an image reference (such as registry.example/org/image:v1.2.3): %v", v, err)
			continue
		}
		// A bare repository pulls :latest, which a pinned setup never means.
		last := v[strings.LastIndex(v, "/")+1:]
		if !strings.Contains(last, ":") && !strings.Contains(v, "@") {
			c.add(key, "%q has no tag or digest: expected a pinned image such as %s:v1.2.3", v, v)
		}
	}
}

// versions: kubeadm runs the Kubernetes of the node image (CAPD), so the two must be the same
// version; RKE2 versions carry the Kubernetes version they ship.
func (c *checker) versions(s Settings) {
	k := s.Cluster.KubernetesVersion
	if k == "" {
		return
	}
	if !semver.IsValid(k) {
		c.add("cluster.kubernetes_version", "%q is not a version such as v1.37.0", k)
		return
	}
	if s.Cluster.Providers.Infrastructure == "capd" && s.Cluster.Providers.Bootstrap == "kubeadm" {
		if img := s.Cluster.CAPD.NodeImage; img != "" {
			if ref, err := name.NewTag(img); err == nil && semver.IsValid(ref.TagStr()) && semver.Canonical(ref.TagStr()) != semver.Canonical(k) {
				key, _ := c.latest("cluster.capd.node_image", "cluster.kubernetes_version")
				c.add(key, "Kubernetes %s with node image %s: expected the node image of the same version (kindest/node:%s), or the version of the node image", k, img, k)
			}
		}
	}
	if s.Cluster.Providers.Bootstrap == "rke2" {
		if r, ok := c.str("cluster.rke2_version"); ok && r != "" {
			kubeOfRKE2, _, _ := strings.Cut(r, "+")
			if semver.Canonical(kubeOfRKE2) != semver.Canonical(k) {
				c.add("cluster.rke2_version", "%q ships Kubernetes %s, but cluster.kubernetes_version is %s: expected an RKE2 release of %s (such as %s+rke2r1)", r, kubeOfRKE2, k, k, k)
			}
		}
	}
}

// rke2AirGapped: air-gapped RKE2 machines install RKE2 from their own image; the kind node image
// CAPD uses by default holds no RKE2 artifacts, and the machines would fail only at first boot.
func (c *checker) rke2AirGapped(s Settings) {
	if s.Cluster.Providers.Bootstrap != "rke2" || !s.Cluster.RKE2AirGapped.Enabled || s.Cluster.Providers.Infrastructure != "capd" {
		return
	}
	ref, err := name.ParseReference(s.Cluster.CAPDNodeImage())
	if err != nil || ref.Context().RepositoryStr() != "kindest/node" {
		return
	}
	key, _ := c.latest("cluster.capd.node_image", "cluster.rke2_air_gapped.enabled")
	c.add(key, "air-gapped RKE2 with the kind node image %s, which holds no RKE2 artifacts: expected cluster.capd.node_image to name an image built from it with the RKE2 release in /opt/rke2-artifacts and its install script as /opt/install.sh (environment-values/rke2-capd/README.md)", s.Cluster.CAPDNodeImage())
}

// context is the cluster a release runs in: the chart's context files and the tool set it. A
// values file that sets it would render a release for another cluster than the one it runs in.
func (c *checker) context() {
	for _, l := range c.layers {
		if l.Defaults || strings.HasPrefix(l.File, "charts/") || strings.HasPrefix(l.File, "(") {
			continue
		}
		for _, key := range []string{"context", "self_managed", "adopted", "secrets_revision"} {
			if line, ok := l.Has([]string{key}); ok {
				c.problems = append(c.problems, Problem{Origin: Origin{File: l.File, Line: line, Secret: l.Secret}, Key: key,
					Message: "is set by cluster-init for each cluster the release runs in: expected no such key in a values file"})
			}
		}
	}
}

// infrastructures: in-memory clusters are a tenant's, simulated by CAPD (which a capd management
// cluster runs) with kubeadm's control plane (the only one it simulates); every other tenant's
// clusters run where the management cluster does.
func (c *checker) infrastructures(s Settings) {
	mgmt, bootstrap := s.Cluster.Providers.Infrastructure, s.Cluster.Providers.Bootstrap
	if mgmt == "in-memory" && s.Context != "workload" {
		c.add("cluster.providers.infrastructure", "in-memory simulates a tenant's workload clusters (workload_clusters.tenants.<namespace>.infrastructure): expected capd or capo for the cluster of an environment")
	}
	simulates := mgmt == "capd" && bootstrap == "kubeadm"
	tenants, _ := lookup(c.merged, []string{"workload_clusters", "tenants"})
	byName, _ := tenants.(map[string]any)
	for _, ns := range slices.Sorted(maps.Keys(byName)) {
		t, _ := byName[ns].(map[string]any)
		infra, _ := t["infrastructure"].(string)
		if infra == "" || infra == mgmt || infra == "in-memory" && simulates {
			continue
		}
		want := mgmt
		if simulates {
			want += " or in-memory"
		}
		c.add("workload_clusters.tenants."+ns+".infrastructure", "%q, but the management cluster runs bootstrap %s and infrastructure %s (in-memory needs kubeadm on capd): expected %s", infra, bootstrap, mgmt, want)
	}
}

// notifications: the receiver exists only for a git source and with its token; a node port for it
// otherwise would serve nothing, silently. The kind cluster of a take-back (providers_only, its
// source the checkout pushed next to it) serves none, whatever the environment asks for the
// management cluster.
func (c *checker) notifications() {
	port, set := lookup(c.merged, ParseKey("notifications.receiver.node_port"))
	if !set || fmt.Sprint(port) == "0" {
		return
	}
	if only, _ := lookup(c.merged, ParseKey("providers_only")); only == true {
		return
	}
	if source, _ := c.str("source.type"); source != "git" {
		c.add("notifications.receiver.node_port", "set, but the source is %q: the receiver exists only for a git source (an OCI source is pushed by the bootstrap command, which asks for its reconciliation itself); expected source.type git, or no node port", source)
		return
	}
	if token, ok := c.str("credentials.notifications.receiver_token"); !ok || token == "" {
		c.add("notifications.receiver.node_port", "set, but the receiver has no token: expected credentials.notifications.receiver_token in the environment's secrets (the receiver exists only with it)")
	}
}

// capo: the clouds.yaml of the credentials must be YAML with the cloud the values name, and that
// cloud must hold what CAPO needs to authenticate (openstackAuthProblems).
func (c *checker) capo() {
	cloud, _ := c.str("cluster.capo.cloud_name")
	_ = c.cloudsYAML("credentials.openstack.clouds_yaml", "cluster.capo.cloud_name", cloud)
}

// tenantClouds: the clouds.yaml a tenant's clusters are built with (its own, or the platform's)
// must hold its cloud (its own cloud_name, or the platform's), as the platform's does.
func (c *checker) tenantClouds() {
	tenants, _ := lookup(c.merged, []string{"workload_clusters", "tenants"})
	byName, _ := tenants.(map[string]any)
	for _, ns := range slices.Sorted(maps.Keys(byName)) {
		t, _ := byName[ns].(map[string]any)
		if infra, _ := t["infrastructure"].(string); infra != "" && infra != "capo" {
			continue
		}
		cloudKey := "workload_clusters.tenants." + ns + ".capo.cloud_name"
		cloud, ok := c.str(cloudKey)
		if !ok {
			cloudKey = "cluster.capo.cloud_name"
			cloud, _ = c.str(cloudKey)
		}
		credsKey := "credentials.tenants." + ns + ".openstack.clouds_yaml"
		_, own := c.str(credsKey)
		if !own {
			credsKey = "credentials.openstack.clouds_yaml"
		}
		// The platform's credentials and cloud are checked by capo: said once.
		if (own || cloudKey != "cluster.capo.cloud_name") && !c.cloudsYAML(credsKey, cloudKey, cloud) {
			continue
		}
		// The tenant's clusters are given the file as written: its one cloud, no other.
		text, _ := c.str(credsKey)
		var doc struct {
			Clouds map[string]any `yaml:"clouds"`
		}
		if err := yamlv3.Unmarshal([]byte(text), &doc); err == nil && len(doc.Clouds) != 1 {
			c.add(credsKey, "%d clouds: the clusters of tenant %s are given this clouds.yaml as it is, expected one cloud, %q (give the tenant credentials.tenants.%s.openstack of its own)", len(doc.Clouds), ns, cloud, ns)
		}
	}
}

// cloudsYAML: the clouds.yaml at credsKey is YAML with the cloud named at cloudKey, which holds
// what CAPO needs to authenticate (openstackAuthProblems). It reports whether the file is YAML
// with that cloud.
func (c *checker) cloudsYAML(credsKey, cloudKey, cloud string) bool {
	text, ok := c.str(credsKey)
	if !ok || strings.TrimSpace(text) == "" {
		c.add(credsKey, "missing: expected the clouds.yaml of the OpenStack project, with the cloud %q", cloud)
		return false
	}
	var doc struct {
		Clouds map[string]any `yaml:"clouds"`
	}
	if err := yamlv3.Unmarshal([]byte(text), &doc); err != nil {
		// The parser's message may quote the secret: only its position is kept.
		msg := "not YAML"
		if i := strings.Index(err.Error(), "line "); i >= 0 {
			msg += " (" + strings.SplitN(err.Error()[i:], ":", 2)[0] + " of clouds.yaml)"
		}
		c.add(credsKey, "%s: expected a clouds.yaml with a map clouds", msg)
		return false
	}
	entry, found := doc.Clouds[cloud]
	if !found {
		var names []string
		for n := range doc.Clouds {
			names = append(names, n)
		}
		c.add(cloudKey, "%q is not a cloud of %s (clouds: %s)", cloud, credsKey, strings.Join(slices.Sorted(slices.Values(names)), ", "))
		return false
	}
	settings, ok := entry.(map[string]any)
	if !ok {
		c.add(credsKey, "cloud %q: expected a map with auth and auth_type", cloud)
		return false
	}
	for _, p := range openstackAuthProblems(settings) {
		c.add(credsKey, "cloud %q: %s", cloud, p)
	}
	return true
}
