// Package cloudtest runs the test bed's simulated OpenStack cloud inside a Go test: one project,
// an application credential, the external network, an image and a key pair, as the test bed
// configures it; and a client authenticated with that credential.
package cloudtest

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"

	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud"
)

// Cloud is a running simulated cloud.
type Cloud struct {
	*cloud.Cloud
	// URL is where it answers: its identity endpoint is URL + "/identity/v3".
	URL string
	// Provider is authenticated with the application credential.
	Provider *gophercloud.ProviderClient
}

// Start runs a cloud until the test ends, with the application credential id and secret, and
// machines (nil: servers are records only and boot at once); configure, if given, changes the
// rest of its configuration (load balancers, zones) before it starts.
func Start(t testing.TB, credentialID, credentialSecret string, machines cloud.Machines, configure ...func(*cloud.Config)) *Cloud {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	cfg := cloud.Config{
		PublicURL: srv.URL, Domain: "Default", Project: "cluster-init", User: "admin", Password: "admin-password",
		ApplicationCredentialID: credentialID, ApplicationCredentialSecret: credentialSecret,
		ExternalNetwork: cloud.ExternalNetwork{Name: "public", CIDR: netip.MustParsePrefix("172.18.0.0/16"),
			PoolStart: netip.MustParseAddr("172.18.201.1"), PoolEnd: netip.MustParseAddr("172.18.201.254")},
		Images:   []cloud.Image{{Name: "ubuntu-2404-kube-v1.37.0", DockerImage: "kindest/node:v1.37.0"}},
		KeyPairs: []string{"testbed"},
		Machines: machines,
	}
	for _, f := range configure {
		f(&cfg)
	}
	c, err := cloud.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = c.Handler()
	t.Cleanup(func() { srv.Close(); c.Close() })
	provider, err := openstack.AuthenticatedClient(t.Context(), gophercloud.AuthOptions{
		IdentityEndpoint: srv.URL + "/identity/v3", ApplicationCredentialID: credentialID, ApplicationCredentialSecret: credentialSecret,
	})
	if err != nil {
		t.Fatalf("authenticate with the application credential: %v", err)
	}
	return &Cloud{Cloud: c, URL: srv.URL, Provider: provider}
}

// CloudsYAML is a clouds.yaml naming the cloud cloudName, with an application credential (the
// one the cloud started with, or another the test wants refused), as CAPO's identityRef Secret
// holds it.
func (c *Cloud) CloudsYAML(cloudName, credentialID, credentialSecret string) []byte {
	return []byte("clouds:\n  " + cloudName + ":\n    auth:\n      auth_url: " + c.URL + "/identity/v3\n" +
		"      application_credential_id: " + credentialID + "\n      application_credential_secret: " + credentialSecret + "\n" +
		"    region_name: RegionOne\n    interface: public\n    identity_api_version: 3\n    auth_type: v3applicationcredential\n")
}
