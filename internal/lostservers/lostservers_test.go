package lostservers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/lostservers"
	"cluster-init.dev/cluster-init/internal/restore"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud"
	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud/cloudtest"
)

const (
	ns            = "cluster-init"
	clusterName   = "mgmt"
	appCredID     = "lostservers-credential"
	appCredSecret = "lostservers-secret-7a31"
)

// After a restore, the lost management cluster's servers are deleted at the cloud with what CAPO
// made for each alone: their ports (those a run before left too), the floating IPs on them and
// their members in the API load balancer, which the new cluster took over. The new cluster's
// servers, ports, members and API address stay, and so does a server not named after its lost
// machine. Run again, nothing more goes.
func TestTheLostClustersServersAreRemovedAtTheirCloud(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := startCloud(t)
	k := testenv.Start(t, "management").Client

	// The cloud: the cluster's network and load balancer, as CAPO made them for the lost
	// cluster and the new one adopted; two lost control-plane servers, the new one, and a lost
	// worker that a run before deleted, leaving its port.
	lbID, poolID := c.apiLoadBalancer(t)
	old01 := c.server(t, "mgmt-control-plane-old01")
	old02 := c.server(t, "mgmt-control-plane-old02")
	new01 := c.server(t, "mgmt-control-plane-new01")
	renamed := c.server(t, "someone-elses-server")
	leftPort := c.port(t, "mgmt-md-0-old03-0")
	endpoint := c.floatingIP(t, old01.port.ID) // still on the lost server: the new cluster's address all the same
	lostFIP := c.floatingIP(t, old02.port.ID)
	newFIP := c.floatingIP(t, new01.port.ID)
	for name, s := range map[string]server{"mgmt-control-plane-old01": old01, "mgmt-control-plane-old02": old02, "mgmt-control-plane-new01": new01} {
		c.member(t, lbID, poolID, name, s.address, 6443)
	}
	// A member at a lost server's address that CAPO did not make for it (another machine's name):
	// not the lost machine's to remove.
	c.member(t, lbID, poolID, "mgmt-control-plane-other", old02.address, 6444)
	// A port named as a lost machine's, detached, on another network: not the cluster's.
	elsewhere := c.portOn(t, c.otherNetwork(t), "mgmt-md-0-old03-1")

	createManagement(t, k, c, lbID, endpoint.FloatingIP)
	keep := map[string]bool{"openstack:///" + new01.id: true}
	lost := []restore.Machine{
		{Namespace: ns, Cluster: clusterName, Name: "mgmt-control-plane-old01", ProviderID: "openstack:///" + old01.id},
		{Namespace: ns, Cluster: clusterName, Name: "mgmt-control-plane-old02", ProviderID: "openstack://RegionOne/" + old02.id},
		{Namespace: ns, Cluster: clusterName, Name: "mgmt-control-plane-new01", ProviderID: "openstack:///" + new01.id},
		{Namespace: ns, Cluster: clusterName, Name: "mgmt-md-0-renamed", ProviderID: "openstack:///" + renamed.id},
		{Namespace: ns, Cluster: clusterName, Name: "mgmt-md-0-old03", ProviderID: "openstack:///5f2c0d41-0000-4000-8000-00000000000a"},
	}
	got, err := lostservers.Remove(ctx, k, lost, keep, t.Logf)
	if err != nil {
		t.Fatal(err)
	}

	if want := []string{"mgmt-control-plane-old01 (server " + old01.id + ")", "mgmt-control-plane-old02 (server " + old02.id + ")"}; !slices.Equal(got.Removed, want) {
		t.Errorf("removed %v, want %v", got.Removed, want)
	}
	for _, s := range []server{old01, old02} {
		if _, err := servers.Get(ctx, c.compute, s.id).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Errorf("lost server %s is still at the cloud: %v", s.id, err)
		}
		if _, err := ports.Get(ctx, c.network, s.port.ID).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Errorf("the port of lost server %s is still at the cloud: %v", s.id, err)
		}
	}
	if _, err := ports.Get(ctx, c.network, leftPort).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Errorf("the port a run before left of lost machine mgmt-md-0-old03 is still there: %v", err)
	}
	if _, err := ports.Get(ctx, c.network, elsewhere).Extract(); err != nil {
		t.Errorf("a port of a lost machine's name on another network is gone: %v", err)
	}
	for _, s := range []server{new01, renamed} {
		if _, err := servers.Get(ctx, c.compute, s.id).Extract(); err != nil {
			t.Errorf("server %s, which is not the lost cluster's, is gone: %v", s.id, err)
		}
		if _, err := ports.Get(ctx, c.network, s.port.ID).Extract(); err != nil {
			t.Errorf("the port of server %s, which is not the lost cluster's, is gone: %v", s.id, err)
		}
	}
	if len(got.Kept) != 2 || !strings.Contains(got.Kept[0], "a machine of the new management cluster has it") || !strings.Contains(got.Kept[1], `named "someone-elses-server"`) {
		t.Errorf("kept %q", got.Kept)
	}
	if len(got.Gone) != 1 || !strings.HasPrefix(got.Gone[0], "mgmt-md-0-old03 ") {
		t.Errorf("gone before: %v", got.Gone)
	}
	if !slices.Equal(got.FloatingIPs, []string{lostFIP.FloatingIP}) {
		t.Errorf("floating IPs removed: %v, want only %s", got.FloatingIPs, lostFIP.FloatingIP)
	}
	for _, f := range []floatingips.FloatingIP{endpoint, newFIP} {
		if _, err := floatingips.Get(ctx, c.network, f.ID).Extract(); err != nil {
			t.Errorf("floating IP %s, which stays, is gone: %v", f.FloatingIP, err)
		}
	}
	if _, err := floatingips.Get(ctx, c.network, lostFIP.ID).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Errorf("the lost server's floating IP %s is still there: %v", lostFIP.FloatingIP, err)
	}
	if members, want := c.members(t, poolID), []string{old02.address, new01.address}; !slices.Equal(members, want) {
		t.Errorf("the pool's members are %v, want %v: the new server's, and the one CAPO did not name after a lost machine", members, want)
	}
	if lb, err := loadbalancers.Get(ctx, c.lb, lbID).Extract(); err != nil || lb.ProvisioningStatus != "ACTIVE" {
		t.Errorf("the load balancer, which stays: %v %v", lb, err)
	}

	again, err := lostservers.Remove(ctx, k, lost, keep, t.Logf)
	if err != nil || len(again.Removed)+len(again.Ports)+len(again.FloatingIPs)+len(again.Members) != 0 || len(again.Gone) != 3 {
		t.Errorf("run again: %+v %v, want nothing removed and three servers gone", again, err)
	}
}

// Credentials the cloud refuses end the removal with an error that holds none of them, before
// anything is removed.
func TestCredentialsTheCloudRefusesRemoveNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := startCloud(t)
	k := testenv.Start(t, "management").Client
	lbID, _ := c.apiLoadBalancer(t)
	old := c.server(t, "mgmt-control-plane-old01")
	createManagementWith(t, k, c, lbID, "172.18.201.9", "a-revoked-secret-3e8d")

	_, err := lostservers.Remove(ctx, k, []restore.Machine{{Namespace: ns, Cluster: clusterName, Name: "mgmt-control-plane-old01", ProviderID: "openstack:///" + old.id}}, nil, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "authenticate") || strings.Contains(err.Error(), "a-revoked-secret-3e8d") {
		t.Errorf("refused credentials: %v, want an error that says the authentication failed and holds no secret", err)
	}
	if _, err := servers.Get(ctx, c.compute, old.id).Extract(); err != nil {
		t.Errorf("the server is gone after a refusal: %v", err)
	}
}

func TestProviderIDs(t *testing.T) {
	for id, want := range map[string]string{
		"openstack:///4b0e6f1c":           "4b0e6f1c",
		"openstack://RegionOne/4b0e6f1c":  "4b0e6f1c",
		"openstack:///":                   "",
		"docker:////mgmt-control-plane-1": "",
		"":                                "",
	} {
		if got, ok := lostservers.Of(id); got != want || ok != (want != "") {
			t.Errorf("Of(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
}

// createManagement makes what the new management cluster has of itself: its Cluster, its
// OpenStackCluster (with the load balancer CAPO adopted) and the credentials it names.
func createManagement(t *testing.T, k client.Client, c *testCloud, lbID, endpoint string) {
	t.Helper()
	createManagementWith(t, k, c, lbID, endpoint, appCredSecret)
}

func createManagementWith(t *testing.T, k client.Client, c *testCloud, lbID, endpoint, credSecret string) {
	t.Helper()
	ctx := t.Context()
	create(t, k, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(t, k, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mgmt-cloud-config"},
		Data: map[string][]byte{"clouds.yaml": c.CloudsYAML("testbed", appCredID, credSecret)}})

	osc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackCluster",
		"metadata": map[string]any{"namespace": ns, "name": clusterName},
		"spec":     map[string]any{"identityRef": map[string]any{"name": "mgmt-cloud-config", "cloudName": "testbed"}},
	}}
	create(t, k, osc)
	osc.Object["status"] = map[string]any{"ready": true, "network": map[string]any{"id": c.networkID, "name": "k8s-clusterapi-cluster-cluster-init-mgmt"}, "apiServerLoadBalancer": map[string]any{
		"name": "k8s-clusterapi-cluster-cluster-init-mgmt-kubeapi", "id": lbID, "ip": endpoint, "internalIP": "10.6.0.250"}}
	if err := k.Status().Update(ctx, osc); err != nil {
		t.Fatalf("the OpenStackCluster's status: %v", err)
	}
	create(t, k, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName}, Spec: clusterv1.ClusterSpec{
		ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: endpoint, Port: 6443},
		InfrastructureRef:    clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "OpenStackCluster", Name: clusterName},
	}})
}

func create(t *testing.T, k client.Client, obj client.Object) {
	t.Helper()
	if err := k.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// testCloud is the simulated cloud with the clients a test uses and the cluster's network.
type testCloud struct {
	*cloudtest.Cloud
	compute, network, lb *gophercloud.ServiceClient
	networkID, subnetID  string
	imageID              string
}

type server struct {
	id, address string
	port        ports.Port
}

func startCloud(t *testing.T) *testCloud {
	t.Helper()
	ctx := t.Context()
	running := cloudtest.Start(t, appCredID, appCredSecret, nil, func(cfg *cloud.Config) { cfg.Balancers = noMachines{} })
	c := &testCloud{Cloud: running}
	eo := gophercloud.EndpointOpts{Region: "RegionOne"}
	var err error
	if c.compute, err = openstack.NewComputeV2(running.Provider, eo); err != nil {
		t.Fatal(err)
	}
	if c.network, err = openstack.NewNetworkV2(running.Provider, eo); err != nil {
		t.Fatal(err)
	}
	if c.lb, err = openstack.NewLoadBalancerV2(running.Provider, eo); err != nil {
		t.Fatal(err)
	}
	imageClient, err := openstack.NewImageV2(running.Provider, eo)
	if err != nil {
		t.Fatal(err)
	}
	page, err := images.List(imageClient, images.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := images.ExtractImages(page)
	if err != nil || len(imgs) == 0 {
		t.Fatalf("the image: %v %v", imgs, err)
	}
	c.imageID = imgs[0].ID
	n, err := networks.Create(ctx, c.network, networks.CreateOpts{Name: "k8s-clusterapi-cluster-cluster-init-mgmt"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	s, err := subnets.Create(ctx, c.network, subnets.CreateOpts{NetworkID: n.ID, CIDR: "10.6.0.0/24", IPVersion: gophercloud.IPv4}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	c.networkID, c.subnetID = n.ID, s.ID
	r, err := routers.Create(ctx, c.network, routers.CreateOpts{Name: "k8s-clusterapi-cluster-cluster-init-mgmt",
		GatewayInfo: &routers.GatewayInfo{NetworkID: running.ExternalNetworkID()}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := routers.AddInterface(ctx, c.network, r.ID, routers.AddInterfaceOpts{SubnetID: s.ID}).Extract(); err != nil {
		t.Fatal(err)
	}
	return c
}

// port makes a port as CAPO does for a machine: on the cluster's network, named
// <machine>-<index>.
func (c *testCloud) port(t *testing.T, name string) string {
	t.Helper()
	return c.portOn(t, [2]string{c.networkID, c.subnetID}, name)
}

// portOn makes a port on a network and its subnet.
func (c *testCloud) portOn(t *testing.T, network [2]string, name string) string {
	t.Helper()
	p, err := ports.Create(t.Context(), c.network, ports.CreateOpts{Name: name, NetworkID: network[0], FixedIPs: []ports.IP{{SubnetID: network[1]}}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	return p.ID
}

// otherNetwork makes a network, and its subnet, that is not the cluster's.
func (c *testCloud) otherNetwork(t *testing.T) [2]string {
	t.Helper()
	n, err := networks.Create(t.Context(), c.network, networks.CreateOpts{Name: "another-teams-network"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	s, err := subnets.Create(t.Context(), c.network, subnets.CreateOpts{NetworkID: n.ID, CIDR: "10.7.0.0/24", IPVersion: gophercloud.IPv4}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	return [2]string{n.ID, s.ID}
}

// server makes a machine's server as CAPO does: its port first, then the server on it.
func (c *testCloud) server(t *testing.T, name string) server {
	t.Helper()
	ctx := t.Context()
	portID := c.port(t, name+"-0")
	created, err := servers.Create(ctx, c.compute, servers.CreateOpts{Name: name, FlavorRef: "1", ImageRef: c.imageID,
		Networks: []servers.Network{{Port: portID}}}, nil).Extract()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("server %s ACTIVE", name), func() bool {
		s, err := servers.Get(ctx, c.compute, created.ID).Extract()
		return err == nil && s.Status == "ACTIVE"
	})
	p, err := ports.Get(ctx, c.network, portID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	return server{id: created.ID, address: p.FixedIPs[0].IPAddress, port: *p}
}

func (c *testCloud) floatingIP(t *testing.T, portID string) floatingips.FloatingIP {
	t.Helper()
	f, err := floatingips.Create(t.Context(), c.network, floatingips.CreateOpts{FloatingNetworkID: c.ExternalNetworkID(), PortID: portID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	return *f
}

// apiLoadBalancer makes the API load balancer CAPO makes, with its listener and pool.
func (c *testCloud) apiLoadBalancer(t *testing.T) (lbID, poolID string) {
	t.Helper()
	ctx := t.Context()
	const name = "k8s-clusterapi-cluster-cluster-init-mgmt-kubeapi"
	lb, err := loadbalancers.Create(ctx, c.lb, loadbalancers.CreateOpts{Name: name, VipSubnetID: c.subnetID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	c.waitActive(t, lb.ID)
	l, err := listeners.Create(ctx, c.lb, listeners.CreateOpts{Name: name + "-6443", Protocol: "TCP", ProtocolPort: 6443, LoadbalancerID: lb.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	c.waitActive(t, lb.ID)
	p, err := pools.Create(ctx, c.lb, pools.CreateOpts{Name: name + "-6443", Protocol: "TCP", LBMethod: pools.LBMethodRoundRobin, ListenerID: l.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	c.waitActive(t, lb.ID)
	return lb.ID, p.ID
}

// member adds a machine's member to the pool as CAPO does: named <pool>-<machine>.
func (c *testCloud) member(t *testing.T, lbID, poolID, machine, address string, port int) {
	t.Helper()
	pool, err := pools.Get(t.Context(), c.lb, poolID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pools.CreateMember(t.Context(), c.lb, poolID, pools.CreateMemberOpts{Name: pool.Name + "-" + machine, Address: address, ProtocolPort: port}).Extract(); err != nil {
		t.Fatal(err)
	}
	c.waitActive(t, lbID)
}

func (c *testCloud) members(t *testing.T, poolID string) []string {
	t.Helper()
	page, err := pools.ListMembers(c.lb, poolID, pools.ListMembersOpts{}).AllPages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	all, err := pools.ExtractMembers(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range all {
		out = append(out, m.Address)
	}
	slices.Sort(out)
	return out
}

func (c *testCloud) waitActive(t *testing.T, lbID string) {
	t.Helper()
	waitFor(t, "load balancer "+lbID+" ACTIVE", func() bool {
		lb, err := loadbalancers.Get(t.Context(), c.lb, lbID).Extract()
		return err == nil && lb.ProvisioningStatus == "ACTIVE"
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// noMachines are load balancers without machines: each change is applied at once.
type noMachines struct{}

func (noMachines) Apply(context.Context, cloud.BalancerSpec) error           { return nil }
func (noMachines) Delete(context.Context, string) error                      { return nil }
func (noMachines) AddAddress(context.Context, string, netip.Addr) error      { return nil }
func (noMachines) RemoveAddress(context.Context, string, netip.Addr) error   { return nil }
func (noMachines) Health(context.Context, string) (map[string]string, error) { return nil, nil }
