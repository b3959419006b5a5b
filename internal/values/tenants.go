package values

import (
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// What the platform's values hand a tenant is its own and no more. The chart checks what the
// tenants' settings share with one another and with the platform's directories
// (charts/workload-clusters, tenants.yaml); the schema, each setting alone (readers_group,
// refs, limits). These are the rest, which need Go or what the checkout vendors.

// MinTenantInterval is the shortest interval a tenant's own repository may be fetched at:
// source-controller is shared, and a repository fetched every second takes its time from the
// platform's and every other tenant's.
const MinTenantInterval = 30 * time.Second

// tenants checks the settings of each tenant that are not its directory or names.
func (c *checker) tenants() {
	byName, _ := lookupMap(c.merged, "workload_clusters", "tenants")
	for _, ns := range slices.Sorted(maps.Keys(byName)) {
		key := "workload_clusters.tenants." + ns + ".repository.interval"
		v, ok := c.str(key)
		if !ok {
			continue
		}
		if d, err := time.ParseDuration(v); err == nil && d < MinTenantInterval {
			c.add(key, "%s: the tenant's repository would be fetched more often than every %s, with the source-controller the platform and every tenant share: expected %s or more", v, MinTenantInterval, MinTenantInterval)
		}
	}
}

// credentialsInURLs: the values are a ConfigMap, which more people and controllers read than the
// secrets; a password in a URL would be stored there. Where the URL's user is itself the secret
// (a webhook's token, a tenant's repository over https), no user either.
func (c *checker) credentialsInURLs() {
	c.noCredentials("source.url", false, "credentials.git of the secrets file")
	repos, _ := lookupMap(c.merged, "repositories")
	for _, name := range slices.Sorted(maps.Keys(repos)) {
		c.noCredentials("repositories."+name+".url", false, "the Secret named by repositories."+name+".secret_ref")
	}
	c.noCredentials("notifications.alerts.address", true, "credentials.notifications.alerts_address of the secrets file")
	tenants, _ := lookupMap(c.merged, "workload_clusters", "tenants")
	for _, ns := range slices.Sorted(maps.Keys(tenants)) {
		c.noCredentials("workload_clusters.tenants."+ns+".repository.url", true, "credentials.tenants."+ns+".git of the secrets file")
	}
}

// noCredentials refuses the URL at key when it carries a password, or any user when noUser (over
// https, a user alone is a token). It never quotes the URL.
func (c *checker) noCredentials(key string, noUser bool, where string) {
	v, ok := c.str(key)
	if !ok {
		return
	}
	u, err := url.Parse(v)
	if err != nil || u.User == nil {
		return
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		c.add(key, "carries a password: expected the URL without it, and the credentials in %s", where)
	} else if noUser {
		c.add(key, "carries a user name, which over http(s) is a token: expected the URL without it, and the credentials in %s", where)
	}
}

// lookupMap is the map at path of the merged values, if there is one.
func lookupMap(merged map[string]any, path ...string) (map[string]any, bool) {
	v, ok := lookup(merged, path)
	m, isMap := v.(map[string]any)
	return m, ok && isMap
}

// TenantNamespaces refuses a tenant whose namespace is one of the platform's: Kubernetes' own
// (kube-*, default), those of the components the platform runs (platform: the namespaces its
// vendored manifests create or use, flux-system, cert-manager, the providers'), and the release's
// own. The tenant's accounts get every right of its namespace. fallback is where to point when no
// file sets the key.
func TenantNamespaces(layers []Layer, merged map[string]any, platform []string, fallback Origin) Problems {
	c := checker{layers: layers, merged: merged, fallback: fallback}
	tenants, _ := lookupMap(merged, "workload_clusters", "tenants")
	for _, ns := range slices.Sorted(maps.Keys(tenants)) {
		var why string
		switch {
		case strings.HasPrefix(ns, "kube-") || ns == "default":
			why = "Kubernetes' own"
		case slices.Contains(platform, ns):
			why = "the platform's: its components run there"
		default:
			continue
		}
		c.add("workload_clusters.tenants."+ns, "a tenant's namespace is given to it whole, and %s is %s: expected a namespace of the tenant's own (not kube-*, default, nor one of %s)", ns, why, strings.Join(platform, ", "))
	}
	return c.problems
}
