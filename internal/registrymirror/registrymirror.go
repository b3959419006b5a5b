// Package registrymirror turns the registry_mirrors values into containerd's per-registry
// configuration (/etc/containerd/certs.d/<registry>/hosts.toml). The kind bootstrap cluster gets
// these files from the CLI; machines get the same files from charts/capi-cluster, and a test keeps
// both identical.
package registrymirror

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
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

// FromValues reads registry_mirrors.hosts_config from merged values.
func FromValues(vals map[string]any) (Config, error) {
	rm, _ := vals["registry_mirrors"].(map[string]any)
	hosts, _ := rm["hosts_config"].(map[string]any)
	data, err := json.Marshal(hosts)
	if err != nil {
		return nil, fmt.Errorf("registry_mirrors.hosts_config: %w", err)
	}
	cfg := Config{}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("registry_mirrors.hosts_config: %w", err)
	}
	return cfg, nil
}

// Hosts returns the upstream registries, sorted.
func (c Config) Hosts() []string {
	hosts := make([]string, 0, len(c))
	for h := range c {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts
}

// HostsTOML is the hosts.toml of one upstream registry. Without a `server` line containerd falls
// back to the registry itself when no mirror answers.
func (c Config) HostsTOML(host string) string {
	var b strings.Builder
	b.WriteString("# Written by cluster-init from registry_mirrors.hosts_config.\n")
	for _, m := range c[host] {
		caps := m.Capabilities
		if len(caps) == 0 {
			caps = []string{"pull", "resolve"}
		}
		quoted := make([]string, len(caps))
		for i, cp := range caps {
			quoted[i] = fmt.Sprintf("%q", cp)
		}
		fmt.Fprintf(&b, "\n[host.%q]\n  capabilities = [%s]\n", m.URL, strings.Join(quoted, ", "))
		if m.OverridePath {
			b.WriteString("  override_path = true\n")
		}
		if m.SkipVerify {
			b.WriteString("  skip_verify = true\n")
		}
	}
	return b.String()
}
