package cloud_test

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/rules"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud"
	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud/cloudtest"
)

const (
	appCredID     = "testbed-credential"
	appCredSecret = "testbed-secret-7f3a"
)

// machines records what the cloud asked of its machines.
type machines struct {
	mu     sync.Mutex
	booted map[string]cloud.MachineSpec
	gone   []string
	addrs  map[string][]netip.Addr
	// stopped are the servers stopped by a server-state fault.
	stopped []string
}

func (m *machines) Boot(_ context.Context, s cloud.MachineSpec) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.booted[s.ServerID] = s
	return nil
}

func (m *machines) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gone = append(m.gone, id)
	return nil
}

func (m *machines) AddAddress(_ context.Context, id string, ip netip.Addr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addrs[id] = append(m.addrs[id], ip)
	return nil
}

func (m *machines) RemoveAddress(_ context.Context, id string, ip netip.Addr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addrs[id] = slices.DeleteFunc(m.addrs[id], func(a netip.Addr) bool { return a == ip })
	return nil
}

func (m *machines) Stop(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = append(m.stopped, id)
	return nil
}

func (m *machines) Console(id string) string { return "cloud-init ran on " + id + "\n" }

type testCloud struct {
	*cloud.Cloud
	url      string
	machines *machines
	provider *gophercloud.ProviderClient
	compute  *gophercloud.ServiceClient
	network  *gophercloud.ServiceClient
	image    *gophercloud.ServiceClient
}

func start(t *testing.T) *testCloud {
	t.Helper()
	m := &machines{booted: map[string]cloud.MachineSpec{}, addrs: map[string][]netip.Addr{}}
	running := cloudtest.Start(t, appCredID, appCredSecret, m)
	tc := &testCloud{Cloud: running.Cloud, url: running.URL, machines: m, provider: running.Provider}
	eo := gophercloud.EndpointOpts{Region: "RegionOne"}
	var err error
	if tc.compute, err = openstack.NewComputeV2(running.Provider, eo); err != nil {
		t.Fatal(err)
	}
	tc.compute.Microversion = "2.60"
	if tc.network, err = openstack.NewNetworkV2(running.Provider, eo); err != nil {
		t.Fatal(err)
	}
	if tc.image, err = openstack.NewImageV2(running.Provider, eo); err != nil {
		t.Fatal(err)
	}
	return tc
}

func TestIdentityAcceptsTheCloudsCredentialsOnly(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	if _, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: c.url + "/identity/v3", Username: "admin", Password: "admin-password", DomainName: "Default",
		TenantName: "cluster-init",
	}); err != nil {
		t.Errorf("password authentication: %v", err)
	}
	for name, opts := range map[string]gophercloud.AuthOptions{
		"wrong secret":   {ApplicationCredentialID: appCredID, ApplicationCredentialSecret: "nope"},
		"wrong password": {Username: "admin", Password: "nope", DomainName: "Default", TenantName: "cluster-init"},
		"unknown user":   {Username: "root", Password: "admin-password", DomainName: "Default"},
	} {
		opts.IdentityEndpoint = c.url + "/identity/v3"
		_, err := openstack.AuthenticatedClient(ctx, opts)
		if !gophercloud.ResponseCodeIs(err, http.StatusUnauthorized) {
			t.Errorf("%s: got %v, expected 401", name, err)
		}
	}
	// A request without a token is refused by every service.
	resp, err := http.Get(c.url + "/network/v2.0/networks")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET networks without a token: %d, expected 401", resp.StatusCode)
	}
}

// cluster builds what CAPO builds for a cluster: network, subnet, router to the external
// network, security groups with rules, a port; it returns the port.
func cluster(t *testing.T, c *testCloud) (networkID, subnetID, routerID, groupID string, port *ports.Port) {
	t.Helper()
	ctx := context.Background()
	n, err := networks.Create(ctx, c.network, networks.CreateOpts{Name: "k8s-clusterapi-cluster-default-test"}).Extract()
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	if _, err := attributestags.ReplaceAll(ctx, c.network, "networks", n.ID, attributestags.ReplaceAllOpts{Tags: []string{"capo", "test"}}).Extract(); err != nil {
		t.Fatalf("tag network: %v", err)
	}
	s, err := subnets.Create(ctx, c.network, subnets.CreateOpts{NetworkID: n.ID, CIDR: "172.18.200.0/24", IPVersion: gophercloud.IPv4,
		Name: "k8s-clusterapi-cluster-default-test", DNSNameservers: []string{"172.18.0.1"}}).Extract()
	if err != nil {
		t.Fatalf("create subnet: %v", err)
	}
	if s.GatewayIP != "172.18.200.1" || len(s.AllocationPools) != 1 || s.AllocationPools[0].End != "172.18.200.254" {
		t.Errorf("subnet gateway %s pools %v", s.GatewayIP, s.AllocationPools)
	}
	r, err := routers.Create(ctx, c.network, routers.CreateOpts{Name: "k8s-clusterapi-cluster-default-test",
		GatewayInfo: &routers.GatewayInfo{NetworkID: c.ExternalNetworkID()}}).Extract()
	if err != nil {
		t.Fatalf("create router: %v", err)
	}
	if len(r.GatewayInfo.ExternalFixedIPs) != 1 {
		t.Errorf("router gateway addresses: %v", r.GatewayInfo.ExternalFixedIPs)
	}
	if _, err := routers.AddInterface(ctx, c.network, r.ID, routers.AddInterfaceOpts{SubnetID: s.ID}).Extract(); err != nil {
		t.Fatalf("add router interface: %v", err)
	}
	_, err = routers.AddInterface(ctx, c.network, r.ID, routers.AddInterfaceOpts{SubnetID: s.ID}).Extract()
	if !gophercloud.ResponseCodeIs(err, http.StatusBadRequest) {
		t.Errorf("second interface on the same subnet: %v, expected 400", err)
	}
	g, err := groups.Create(ctx, c.network, groups.CreateOpts{Name: "k8s-cluster-default-test-secgroup-controlplane"}).Extract()
	if err != nil {
		t.Fatalf("create security group: %v", err)
	}
	if len(g.Rules) != 2 {
		t.Errorf("a new security group has %d rules, expected the 2 default egress rules", len(g.Rules))
	}
	rule := rules.CreateOpts{Direction: rules.DirIngress, EtherType: rules.EtherType4, SecGroupID: g.ID, Protocol: rules.ProtocolTCP,
		PortRangeMin: 6443, PortRangeMax: 6443, RemoteIPPrefix: "0.0.0.0/0", Description: "Kubernetes API"}
	if _, err := rules.Create(ctx, c.network, rule).Extract(); err != nil {
		t.Fatalf("create rule: %v", err)
	}
	if _, err := rules.Create(ctx, c.network, rule).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Errorf("duplicate rule: %v, expected 409", err)
	}
	p, err := ports.Create(ctx, c.network, ports.CreateOpts{NetworkID: n.ID, Name: "test-control-plane-0",
		FixedIPs: []ports.IP{{SubnetID: s.ID}}, SecurityGroups: &[]string{g.ID}}).Extract()
	if err != nil {
		t.Fatalf("create port: %v", err)
	}
	if len(p.FixedIPs) != 1 || p.FixedIPs[0].IPAddress != "172.18.200.2" {
		t.Errorf("the first port's address: %v, expected 172.18.200.2", p.FixedIPs)
	}
	if _, err := attributestags.ReplaceAll(ctx, c.network, "ports", p.ID, attributestags.ReplaceAllOpts{Tags: []string{"capo", "control-plane"}}).Extract(); err != nil {
		t.Fatalf("tag port: %v", err)
	}
	return n.ID, s.ID, r.ID, g.ID, p
}

func TestAClusterIsBuiltFoundAndTornDownAsCAPODoesIt(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	networkID, subnetID, routerID, groupID, port := cluster(t, c)

	// Found again by the filters CAPO lists with.
	for name, opts := range map[string]ports.ListOpts{
		"tags":       {Tags: "capo,control-plane"},
		"network":    {NetworkID: networkID, Name: "test-control-plane-0"},
		"fixed ip":   {FixedIPs: []ports.FixedIPOpts{{SubnetID: subnetID, IPAddress: "172.18.200.2"}}},
		"not router": {NetworkID: networkID, DeviceOwner: ""},
	} {
		page, err := ports.List(c.network, opts).AllPages(ctx)
		if err != nil {
			t.Fatalf("list ports by %s: %v", name, err)
		}
		got, _ := ports.ExtractPorts(page)
		if !slices.ContainsFunc(got, func(p ports.Port) bool { return p.ID == port.ID }) {
			t.Errorf("list ports by %s: %d ports, none is %s", name, len(got), port.ID)
		}
	}
	page, _ := ports.List(c.network, ports.ListOpts{Tags: "capo,worker"}).AllPages(ctx)
	if got, _ := ports.ExtractPorts(page); len(got) != 0 {
		t.Errorf("list ports by tags capo,worker: %d, expected none", len(got))
	}

	// A server on the port: BUILD, then ACTIVE with the port's address and the user data.
	fl, err := flavors.ListDetail(c.compute, nil).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := flavors.ExtractFlavors(fl)
	flavor := all[slices.IndexFunc(all, func(f flavors.Flavor) bool { return f.Name == "m1.large" })]
	ip, _ := images.List(c.image, images.ListOpts{Name: "ubuntu-2404-kube-v1.37.0"}).AllPages(ctx)
	imgs, _ := images.ExtractImages(ip)
	if len(imgs) != 1 {
		t.Fatalf("images named ubuntu-2404-kube-v1.37.0: %d", len(imgs))
	}
	s, err := servers.Create(ctx, c.compute, servers.CreateOpts{Name: "test-control-plane-0", FlavorRef: flavor.ID, ImageRef: imgs[0].ID,
		Networks: []servers.Network{{Port: port.ID}}, UserData: []byte("#cloud-config\n"), Tags: []string{"capo"},
		Metadata: map[string]string{"cluster": "test"}}, nil).Extract()
	if err != nil {
		t.Fatalf("create server: %v", err)
	}
	active := waitServer(t, c, s.ID, "ACTIVE")
	if got := active.Addresses["k8s-clusterapi-cluster-default-test"]; got == nil {
		t.Errorf("the server's addresses: %v", active.Addresses)
	}
	spec := c.machines.booted[s.ID]
	if spec.FixedIP.String() != "172.18.200.2" || string(spec.UserData) != "#cloud-config\n" || spec.DockerImage != "kindest/node:v1.37.0" {
		t.Errorf("what the machine was given: %+v", spec)
	}
	if spec.Metadata["instance_id"] != s.ID {
		t.Errorf("metadata instance_id %v, expected %s", spec.Metadata["instance_id"], s.ID)
	}
	page, err = servers.List(c.compute, servers.ListOpts{Name: "^test-control-plane-0$"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := servers.ExtractServers(page); len(got) != 1 {
		t.Errorf("servers named ^test-control-plane-0$: %d", len(got))
	}
	out, err := servers.ShowConsoleOutput(ctx, c.compute, s.ID, servers.ShowConsoleOutputOpts{Length: 10}).Extract()
	if err != nil || !strings.Contains(out, s.ID) {
		t.Errorf("console output %q: %v", out, err)
	}

	// The API server's floating IP, on the control plane's port: the machine gets the address.
	fip, err := floatingips.Create(ctx, c.network, floatingips.CreateOpts{FloatingNetworkID: c.ExternalNetworkID(), Description: "Floating IP for Kubernetes API"}).Extract()
	if err != nil {
		t.Fatalf("create floating IP: %v", err)
	}
	if _, err := floatingips.Update(ctx, c.network, fip.ID, floatingips.UpdateOpts{PortID: &port.ID}).Extract(); err != nil {
		t.Fatalf("associate floating IP: %v", err)
	}
	if got := c.machines.addrs[s.ID]; len(got) != 1 || got[0].String() != fip.FloatingIP {
		t.Errorf("the machine's floating addresses: %v, expected %s", got, fip.FloatingIP)
	}

	// What is in use cannot go.
	for name, err := range map[string]error{
		"network":        networks.Delete(ctx, c.network, networkID).ExtractErr(),
		"subnet":         subnets.Delete(ctx, c.network, subnetID).ExtractErr(),
		"router":         routers.Delete(ctx, c.network, routerID).ExtractErr(),
		"security group": groups.Delete(ctx, c.network, groupID).ExtractErr(),
	} {
		if !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
			t.Errorf("delete the %s in use: %v, expected 409", name, err)
		}
	}

	// Torn down in CAPO's order; then the project holds nothing.
	if err := servers.Delete(ctx, c.compute, s.ID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, s.ID)
	for _, step := range []struct {
		what string
		err  error
	}{
		{"floating IP", floatingips.Delete(ctx, c.network, fip.ID).ExtractErr()},
		{"port", ports.Delete(ctx, c.network, port.ID).ExtractErr()},
		{"security group", groups.Delete(ctx, c.network, groupID).ExtractErr()},
		{"router interface", routers.RemoveInterface(ctx, c.network, routerID, routers.RemoveInterfaceOpts{SubnetID: subnetID}).Err},
		{"router", routers.Delete(ctx, c.network, routerID).ExtractErr()},
		{"subnet", subnets.Delete(ctx, c.network, subnetID).ExtractErr()},
		{"network", networks.Delete(ctx, c.network, networkID).ExtractErr()},
	} {
		if step.err != nil {
			t.Errorf("delete the %s: %v", step.what, step.err)
		}
	}
	if left := c.Resources(); len(left) != 0 {
		t.Errorf("left on the cloud: %+v", left)
	}
	if !slices.Contains(c.machines.gone, s.ID) {
		t.Errorf("the server's machine was not deleted")
	}
	calls := c.Calls()
	if calls["POST /compute/v2.1/servers"] != 1 || calls["PUT /network/v2.0/floatingips/{id}"] != 1 {
		t.Errorf("calls counted: %v", calls)
	}
}

func waitServer(t *testing.T, c *testCloud, id, status string) *servers.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		s, err := servers.Get(ctx, c.compute, id).Extract()
		if err != nil {
			t.Fatalf("get server %s: %v", id, err)
		}
		if s.Status == status {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("server %s is %s, expected %s", id, s.Status, status)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func waitGone(t *testing.T, c *testCloud, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, err := servers.Get(ctx, c.compute, id).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("server %s is not gone: %v", id, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestInjectedFaultsReachTheClientInOpenStacksShapes(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	networkID, _, _, _, port := cluster(t, c)
	create := func(name, portID string) (*servers.Server, error) {
		return servers.Create(ctx, c.compute, servers.CreateOpts{Name: name, FlavorRef: "1", ImageRef: imageID(t, c),
			Networks: []servers.Network{{Port: portID}}}, nil).Extract()
	}

	// Quota: Nova's 403 "Quota exceeded", Neutron's 409 OverQuota.
	if err := c.Inject(cloud.Fault{Kind: "quota", Resource: "instances", Limit: 0}); err != nil {
		t.Fatal(err)
	}
	_, err := create("over-quota", port.ID)
	if !gophercloud.ResponseCodeIs(err, http.StatusForbidden) || !strings.Contains(err.Error(), "Quota exceeded for instances") {
		t.Errorf("server over quota: %v", err)
	}
	if err := c.Inject(cloud.Fault{Kind: "quota", Resource: "port", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = ports.Create(ctx, c.network, ports.CreateOpts{NetworkID: networkID}).Extract()
	if !gophercloud.ResponseCodeIs(err, http.StatusConflict) || !strings.Contains(err.Error(), "OverQuota") {
		t.Errorf("port over quota: %v", err)
	}
	c.ClearFaults()

	// A server that goes to ERROR, with Nova's fault.
	if err := c.Inject(cloud.Fault{Kind: "server-error", Name: "^doomed", Count: 1}); err != nil {
		t.Fatal(err)
	}
	s, err := create("doomed-0", port.ID)
	if err != nil {
		t.Fatal(err)
	}
	failed := waitServer(t, c, s.ID, "ERROR")
	if msg, _ := failed.Fault.Message, 0; !strings.Contains(msg, "No valid host was found") {
		t.Errorf("the fault of the server in ERROR: %+v", failed.Fault)
	}
	if _, ok := c.machines.booted[s.ID]; ok {
		t.Error("a server in ERROR got a machine")
	}
	if err := servers.Delete(ctx, c.compute, s.ID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, s.ID)

	// A service down: 503 while it lasts, then it answers again.
	if err := c.Inject(cloud.Fault{Kind: "unavailable", Service: "network", For: "300ms"}); err != nil {
		t.Fatal(err)
	}
	_, err = networks.Get(ctx, c.network, networkID).Extract()
	if !gophercloud.ResponseCodeIs(err, http.StatusServiceUnavailable) {
		t.Errorf("network while down: %v, expected 503", err)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := networks.Get(ctx, c.network, networkID).Extract(); err != nil {
		t.Errorf("network after it came back: %v", err)
	}
	if n := c.Calls()["503 network"]; n != 1 {
		t.Errorf("calls refused with 503 counted: %d, expected 1", n)
	}

	// A slow boot: BUILD for the delay, then ACTIVE.
	if err := c.Inject(cloud.Fault{Kind: "slow-boot", For: "500ms"}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	s, err = create("slow-0", port.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := servers.Get(ctx, c.compute, s.ID).Extract(); got.Status != "BUILD" {
		t.Errorf("a slow server right after its creation: %s, expected BUILD", got.Status)
	}
	waitServer(t, c, s.ID, "ACTIVE")
	if took := time.Since(begin); took < 500*time.Millisecond {
		t.Errorf("the slow boot took %s, expected at least 500ms", took)
	}

	for _, bad := range []cloud.Fault{{Kind: "flood"}, {Kind: "unavailable", Service: "dns", For: "1s"}, {Kind: "slow-boot", For: "soon"}, {Kind: "server-error", Name: "("}} {
		if err := c.Inject(bad); err == nil {
			t.Errorf("fault %+v was taken", bad)
		}
	}
}

func imageID(t *testing.T, c *testCloud) string {
	t.Helper()
	page, err := images.List(c.image, images.ListOpts{Name: "ubuntu-2404-kube-v1.37.0"}).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	imgs, _ := images.ExtractImages(page)
	return imgs[0].ID
}

// Two clusters' networks with the same CIDR: their servers share one Docker network, so no
// address is handed out twice.
func TestOverlappingSubnetsNeverShareAnAddress(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	seen := map[string]string{}
	for _, name := range []string{"a", "b"} {
		n, err := networks.Create(ctx, c.network, networks.CreateOpts{Name: name}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		s, err := subnets.Create(ctx, c.network, subnets.CreateOpts{NetworkID: n.ID, CIDR: "172.18.200.0/24", IPVersion: gophercloud.IPv4}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			p, err := ports.Create(ctx, c.network, ports.CreateOpts{NetworkID: n.ID, FixedIPs: []ports.IP{{SubnetID: s.ID}}}).Extract()
			if err != nil {
				t.Fatal(err)
			}
			ip := p.FixedIPs[0].IPAddress
			if other, ok := seen[ip]; ok {
				t.Errorf("port %d of network %s got %s, already network %s's", i, name, ip, other)
			}
			seen[ip] = name
		}
	}
}

// What Neutron and Nova do that the review found missing: a boolean filter in either case, a
// refused update that changes nothing, a refused server that leaves no port behind.
func TestRefusalsChangeNothingAndBooleansFilterInEitherCase(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	for _, v := range []string{"true", "True"} {
		var body struct{ Networks []struct{ ID string } }
		if _, err := c.network.Get(ctx, c.network.ServiceURL("networks")+"?router:external="+v, &body, nil); err != nil {
			t.Fatalf("router:external=%s: %v", v, err)
		}
		if len(body.Networks) != 1 || body.Networks[0].ID != c.ExternalNetworkID() {
			t.Errorf("router:external=%s: %+v, expected the external network", v, body)
		}
	}

	networkID, _, _, _, port := cluster(t, c)
	// A floating IP on the port, then moved to a port of a network no router reaches: refused,
	// and the floating IP stays where it was.
	fip, err := floatingips.Create(ctx, c.network, floatingips.CreateOpts{FloatingNetworkID: c.ExternalNetworkID(), PortID: port.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	lonely, _ := networks.Create(ctx, c.network, networks.CreateOpts{Name: "lonely"}).Extract()
	ls, _ := subnets.Create(ctx, c.network, subnets.CreateOpts{NetworkID: lonely.ID, CIDR: "10.9.0.0/24", IPVersion: gophercloud.IPv4}).Extract()
	other, err := ports.Create(ctx, c.network, ports.CreateOpts{NetworkID: lonely.ID, FixedIPs: []ports.IP{{SubnetID: ls.ID}}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := floatingips.Update(ctx, c.network, fip.ID, floatingips.UpdateOpts{PortID: &other.ID}).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Errorf("a floating IP moved to a port no router reaches: %v, expected 404", err)
	}
	if got, _ := floatingips.Get(ctx, c.network, fip.ID).Extract(); got.PortID != port.ID || got.Status != "ACTIVE" {
		t.Errorf("after the refused move the floating IP is on %q, %s; expected still on %s, ACTIVE", got.PortID, got.Status, port.ID)
	}

	// A server refused after Nova made a port for its first network: the port goes too.
	before, _ := ports.List(c.network, ports.ListOpts{}).AllPages(ctx)
	n, _ := ports.ExtractPorts(before)
	_, err = servers.Create(ctx, c.compute, servers.CreateOpts{Name: "refused", FlavorRef: "1", ImageRef: imageID(t, c),
		Networks: []servers.Network{{UUID: networkID}, {Port: "no-such-port"}}}, nil).Extract()
	if !gophercloud.ResponseCodeIs(err, http.StatusBadRequest) {
		t.Errorf("a server with a missing port: %v, expected 400", err)
	}
	after, _ := ports.List(c.network, ports.ListOpts{}).AllPages(ctx)
	if m, _ := ports.ExtractPorts(after); len(m) != len(n) {
		t.Errorf("ports before the refused server %d, after %d", len(n), len(m))
	}
}
