// Package registrymirror turns the registry_mirrors values into containerd's per-registry
// configuration (/etc/containerd/certs.d/<registry>/hosts.toml). The kind bootstrap cluster gets
// these files from the CLI; machines get the same files from charts/capi-cluster, and a test keeps
// both identical.
package registrymirror

import (
	"fmt"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Mirror is one mirror of an upstream registry (values: registry_mirrors.hosts_config.<host>[]).
type Mirror struct {
	URL          string   `json:"mirror_url"`
	OverridePath bool     `json:"override_path,omitempty"`
	SkipVerify   bool     `json:"skip_verify,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// Config maps an upstream registry host to its mirrors, tried in order.
type Config map[string][]Mirror

// Hosts returns the upstream registries, sorted.
func (c Config) Hosts() []string {
	hosts := make([]string, 0, len(c))
	for h := range c {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts
}

// hostEntry is one mirror's table in containerd's hosts.toml (docs/hosts.md of containerd).
type hostEntry struct {
	Capabilities []string `toml:"capabilities"`
	OverridePath bool     `toml:"override_path,omitempty"`
	SkipVerify   bool     `toml:"skip_verify,omitempty"`
}

// HostsTOML is the hosts.toml of one upstream registry. Without a `server` line containerd falls
// back to the registry itself when no mirror answers. containerd tries the mirrors in the order of
// their tables, which an encoded map would not keep: each table is encoded on its own, under a
// header whose key the TOML library quotes.
func (c Config) HostsTOML(host string) (string, error) {
	var b strings.Builder
	b.WriteString("# Written by cluster-init from registry_mirrors.hosts_config.\n")
	for _, m := range c[host] {
		caps := m.Capabilities
		if len(caps) == 0 {
			caps = []string{"pull", "resolve"}
		}
		fmt.Fprintf(&b, "\n[%s]\n", toml.Key{"host", m.URL})
		if err := toml.NewEncoder(&b).Encode(hostEntry{Capabilities: caps, OverridePath: m.OverridePath, SkipVerify: m.SkipVerify}); err != nil {
			return "", fmt.Errorf("registry_mirrors.hosts_config[%q]: %w", host, err)
		}
	}
	return b.String(), nil
}
