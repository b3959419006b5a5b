package simulator

import (
	"strings"
	"testing"
)

// The gateway of the network the servers join: as listed, or, for a subnet given by hand without
// one (what the test bed's `kind` network was on Debian's Docker), the subnet's first address.
func TestTheGatewayOfADockerNetwork(t *testing.T) {
	for _, tc := range []struct{ name, inspect, gateway, subnet string }{
		{"listed", `[{"IPAM":{"Config":[{"Subnet":"fc00:f853:ccd:e793::/64"},{"Subnet":"172.19.0.0/16","Gateway":"172.19.0.1"}]}}]`, "172.19.0.1", "172.19.0.0/16"},
		{"not listed", `[{"IPAM":{"Config":[{"Subnet":"172.18.0.0/16"},{"Subnet":"fc00:f853:ccd:e793::/64"}]}}]`, "172.18.0.1", "172.18.0.0/16"},
		{"a /20", `[{"IPAM":{"Config":[{"Subnet":"192.168.16.0/20"}]}}]`, "192.168.16.1", "192.168.16.0/20"},
	} {
		g, p, err := ipv4Of("kind", []byte(tc.inspect))
		if err != nil || g.String() != tc.gateway || p.String() != tc.subnet {
			t.Errorf("%s: %v %v %v, want %s %s", tc.name, g, p, err, tc.gateway, tc.subnet)
		}
	}
	if _, _, err := ipv4Of("kind", []byte(`[{"IPAM":{"Config":[{"Subnet":"fc00:f853:ccd:e793::/64"}]}}]`)); err == nil || !strings.Contains(err.Error(), "no IPv4 subnet") {
		t.Errorf("IPv6 only: %v", err)
	}
}
