package cloudfault_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/cloudfault"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud"
	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud/cloudtest"
)

const (
	ns            = "default"
	appCredID     = "cloudfault-credential"
	appCredSecret = "cloudfault-secret-5d1e"
)

// The cloud's fault of a server that Nova left in ERROR is found from the machine's
// OpenStackServer and the credentials it names, as CAPO reads them; a server the cloud refused to
// create is explained by what CAPO recorded; a kind without a cloud to ask is said so; and
// credentials the cloud refuses give an error that holds none of them.
func TestTheCloudSaysWhyItFailedAServer(t *testing.T) {
	ctx := t.Context()
	running, compute := simulatedCloud(t)
	k := testenv.Start(t, "test").Client

	secret := func(name, credSecret string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"clouds.yaml": running.CloudsYAML("testbed", appCredID, credSecret)}}
		if err := k.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	secret("cloud-config", appCredSecret)
	secret("stale-cloud-config", "a-revoked-secret-9c2b")

	// server makes CAPO's OpenStackServer for machine name, with what CAPO records in its status.
	server := func(name, secretName string, status map[string]any) {
		s := testenv.OpenStackServer(ns, name)
		_ = unstructured.SetNestedField(s.Object, secretName, "spec", "identityRef", "name")
		if err := k.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		s.Object["status"] = status
		if err := k.Status().Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	machine := func(kind, name string) *unstructured.Unstructured {
		m := &unstructured.Unstructured{}
		m.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta1")
		m.SetKind(kind)
		m.SetNamespace(ns)
		m.SetName(name)
		return m
	}

	doomed := bootInError(t, compute)
	server("wl-md-doomed", "cloud-config", map[string]any{"instanceID": doomed, "instanceState": "ERROR", "ready": false})
	fault, err := cloudfault.Ask(ctx, k, machine("OpenStackMachine", "wl-md-doomed"))
	if err != nil {
		t.Fatalf("ask about the server in ERROR: %v", err)
	}
	if fault.Server != doomed || fault.State != "is ERROR" || !strings.Contains(fault.Message, "No valid host was found") {
		t.Errorf("the fault of the server in ERROR: %+v", fault)
	}
	if got := fault.String(); !strings.Contains(got, "the cloud's fault: No valid host was found") {
		t.Errorf("said as %q", got)
	}

	server("wl-md-over-quota", "cloud-config", map[string]any{"instanceState": "ERROR", "ready": false, "conditions": []any{map[string]any{
		"type": "InstanceReady", "status": "False", "severity": "Error", "reason": "InstanceCreateFailed",
		"message":            "Quota exceeded for instances: Requested 1, but already used 2 of 2 instances",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}})
	fault, err = cloudfault.Ask(ctx, k, machine("OpenStackMachine", "wl-md-over-quota"))
	if err != nil || !strings.Contains(fault.String(), "not created (InstanceCreateFailed), the cloud's fault: Quota exceeded for instances") {
		t.Errorf("the server the cloud refused to create: %v (%v)", fault, err)
	}

	if _, err := cloudfault.Ask(ctx, k, machine("DockerMachine", "wl-md-doomed")); !errors.Is(err, cloudfault.ErrNotKnown) {
		t.Errorf("a DockerMachine: %v, want ErrNotKnown", err)
	}

	server("wl-md-stale", "stale-cloud-config", map[string]any{"instanceID": doomed, "instanceState": "ERROR", "ready": false})
	_, err = cloudfault.Ask(ctx, k, machine("OpenStackMachine", "wl-md-stale"))
	if err == nil || !strings.Contains(err.Error(), "authenticate") {
		t.Errorf("credentials the cloud refuses: %v, want an error that says the authentication failed", err)
	} else if strings.Contains(err.Error(), "a-revoked-secret-9c2b") {
		t.Errorf("the error holds the credential's secret: %v", err)
	}

	if _, err := cloudfault.Ask(ctx, k, machine("OpenStackMachine", "wl-md-gone")); err == nil {
		t.Error("a machine without its OpenStackServer: no error")
	}
}

// simulatedCloud runs the test bed's simulated OpenStack (without machines: no server boots) and
// returns it with a compute client of its project.
func simulatedCloud(t *testing.T) (*cloudtest.Cloud, *gophercloud.ServiceClient) {
	t.Helper()
	c := cloudtest.Start(t, appCredID, appCredSecret, nil)
	if err := c.Inject(cloud.Fault{Kind: "server-error", Name: "^doomed", Count: 1}); err != nil {
		t.Fatal(err)
	}
	compute, err := openstack.NewComputeV2(c.Provider, gophercloud.EndpointOpts{Region: "RegionOne"})
	if err != nil {
		t.Fatal(err)
	}
	return c, compute
}

// bootInError creates a server that the cloud puts in ERROR and returns its ID once it is.
func bootInError(t *testing.T, compute *gophercloud.ServiceClient) string {
	t.Helper()
	ctx := t.Context()
	eo := gophercloud.EndpointOpts{Region: "RegionOne"}
	network, err := openstack.NewNetworkV2(compute.ProviderClient, eo)
	if err != nil {
		t.Fatal(err)
	}
	imageClient, err := openstack.NewImageV2(compute.ProviderClient, eo)
	if err != nil {
		t.Fatal(err)
	}
	n, err := networks.Create(ctx, network, networks.CreateOpts{Name: "wl"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	s, err := subnets.Create(ctx, network, subnets.CreateOpts{NetworkID: n.ID, CIDR: "10.6.0.0/24", IPVersion: gophercloud.IPv4}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	p, err := ports.Create(ctx, network, ports.CreateOpts{NetworkID: n.ID, FixedIPs: []ports.IP{{SubnetID: s.ID}}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	page, err := images.List(imageClient, images.ListOpts{Name: "ubuntu-2404-kube-v1.37.0"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := images.ExtractImages(page)
	if err != nil || len(imgs) == 0 {
		t.Fatalf("the image: %v %v", imgs, err)
	}
	created, err := servers.Create(ctx, compute, servers.CreateOpts{Name: "doomed-0", FlavorRef: "1", ImageRef: imgs[0].ID,
		Networks: []servers.Network{{Port: p.ID}}}, nil).Extract()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got, err := servers.Get(ctx, compute, created.ID).Extract()
		if err == nil && got.Status == "ERROR" {
			return created.ID
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("server %s did not go to ERROR", created.ID)
	return ""
}
