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
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/apiversions"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/providers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"

	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud"
	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud/cloudtest"
)

// balancers records what the cloud asked of its load balancers' machines, and answers their
// members' health as the test sets it.
type balancers struct {
	mu      sync.Mutex
	applied map[string]cloud.BalancerSpec
	gone    []string
	addrs   map[string][]netip.Addr
	health  map[string]string
	// hold, while set, keeps every Apply waiting: a change stays PENDING_* until it is closed.
	hold chan struct{}
}

func (b *balancers) Apply(ctx context.Context, spec cloud.BalancerSpec) error {
	b.mu.Lock()
	hold := b.hold
	b.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.applied[spec.ID] = spec
	return nil
}

func (b *balancers) Delete(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gone = append(b.gone, id)
	delete(b.applied, id)
	return nil
}

func (b *balancers) AddAddress(_ context.Context, id string, ip netip.Addr) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addrs[id] = append(b.addrs[id], ip)
	return nil
}

func (b *balancers) RemoveAddress(_ context.Context, id string, ip netip.Addr) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addrs[id] = slices.DeleteFunc(b.addrs[id], func(a netip.Addr) bool { return a == ip })
	return nil
}

func (b *balancers) Health(context.Context, string) (map[string]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for k, v := range b.health {
		out[k] = v
	}
	return out, nil
}

func (b *balancers) spec(id string) cloud.BalancerSpec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.applied[id]
}

type lbCloud struct {
	*testCloud
	lb        *gophercloud.ServiceClient
	balancers *balancers
}

func startWithLoadBalancers(t *testing.T) *lbCloud {
	t.Helper()
	m := &machines{booted: map[string]cloud.MachineSpec{}, addrs: map[string][]netip.Addr{}}
	b := &balancers{applied: map[string]cloud.BalancerSpec{}, addrs: map[string][]netip.Addr{}, health: map[string]string{}}
	running := cloudtest.Start(t, appCredID, appCredSecret, m, func(cfg *cloud.Config) {
		cfg.Balancers = b
		cfg.AvailabilityZones = []string{"az-1", "az-2", "az-3"}
	})
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
	lb, err := openstack.NewLoadBalancerV2(running.Provider, eo)
	if err != nil {
		t.Fatal(err)
	}
	return &lbCloud{testCloud: tc, lb: lb, balancers: b}
}

// waitActive waits, as CAPO's waitForLoadBalancerActive does, until the load balancer is ACTIVE.
func (c *lbCloud) waitActive(t *testing.T, id string) *loadbalancers.LoadBalancer {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lb, err := loadbalancers.Get(context.Background(), c.lb, id).Extract()
		if err != nil {
			t.Fatalf("get load balancer %s: %v", id, err)
		}
		if lb.ProvisioningStatus == "ACTIVE" {
			return lb
		}
		if time.Now().After(deadline) {
			t.Fatalf("load balancer %s is %s, not ACTIVE", id, lb.ProvisioningStatus)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func resourcesOf(c *cloud.Cloud, kinds ...string) []string {
	var out []string
	for _, r := range c.Resources() {
		if slices.Contains(kinds, r.Kind) {
			out = append(out, r.Kind+" "+r.Name)
		}
	}
	return out
}

var octaviaKinds = []string{"loadbalancer", "listener", "pool", "healthmonitor", "member"}

// A cluster's API load balancer as CAPO v0.13 builds it (ReconcileLoadBalancer, then a member
// per control plane machine) and deletes it (the floating IP first, then a cascade delete): each
// step answered as Octavia does, what is built handed to the load balancer's machine, and
// nothing left after.
func TestOctaviaServesCAPOsAPILoadBalancer(t *testing.T) {
	c := startWithLoadBalancers(t)
	ctx := context.Background()
	netID, subnetID, _, _, _ := cluster(t, c.testCloud)

	pages, err := apiversions.List(c.lb).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	versions, err := apiversions.ExtractAPIVersions(pages)
	if err != nil || len(versions) == 0 || versions[len(versions)-1].ID != "v2.27" {
		t.Fatalf("Octavia's versions: %v %v, want v2.27 last (CAPO reads the last as the current one)", versions, err)
	}
	pages, err = providers.List(c.lb, providers.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := providers.ExtractProviders(pages); len(ps) == 0 || ps[0].Name != "amphora" {
		t.Errorf("providers: %v", ps)
	}

	const name = "k8s-clusterapi-cluster-default-test-kubeapi"
	lb, err := loadbalancers.Create(ctx, c.lb, loadbalancers.CreateOpts{Name: name, VipSubnetID: subnetID, Tags: []string{"capo"}}).Extract()
	if err != nil {
		t.Fatalf("create load balancer: %v", err)
	}
	if lb.VipNetworkID != netID || lb.VipAddress == "" || lb.VipPortID == "" || lb.Provider != "amphora" {
		t.Errorf("load balancer as created: network %s VIP %s port %s provider %s", lb.VipNetworkID, lb.VipAddress, lb.VipPortID, lb.Provider)
	}
	vip, err := ports.Get(ctx, c.network, lb.VipPortID).Extract()
	if err != nil || vip.DeviceOwner != "Octavia" || vip.FixedIPs[0].IPAddress != lb.VipAddress {
		t.Errorf("the VIP port: %+v %v", vip, err)
	}
	if found, _ := loadbalancers.List(c.lb, loadbalancers.ListOpts{Name: name}).AllPages(ctx); found == nil {
		t.Error("list by name")
	} else if all, _ := loadbalancers.ExtractLoadBalancers(found); len(all) != 1 || all[0].ID != lb.ID {
		t.Errorf("list by name: %v", all)
	}
	lb = c.waitActive(t, lb.ID)

	fip, err := floatingips.Create(ctx, c.network, floatingips.CreateOpts{FloatingNetworkID: c.ExternalNetworkID(), Description: "Floating IP for Kubernetes API"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := floatingips.Update(ctx, c.network, fip.ID, floatingips.UpdateOpts{PortID: &lb.VipPortID}).Extract(); err != nil {
		t.Fatalf("associate the floating IP with the VIP port: %v", err)
	}
	c.balancers.mu.Lock()
	addrs := c.balancers.addrs[lb.ID]
	c.balancers.mu.Unlock()
	if !slices.Equal(addrs, []netip.Addr{netip.MustParseAddr(fip.FloatingIP)}) {
		t.Errorf("the load balancer's machine has addresses %v, want the floating IP %s", addrs, fip.FloatingIP)
	}

	portName := name + "-6443"
	hold := make(chan struct{})
	c.balancers.mu.Lock()
	c.balancers.hold = hold
	c.balancers.mu.Unlock()
	listener, err := listeners.Create(ctx, c.lb, listeners.CreateOpts{Name: portName, Protocol: "TCP", ProtocolPort: 6443, LoadbalancerID: lb.ID, AllowedCIDRs: []string{}}).Extract()
	if err != nil {
		t.Fatalf("create listener: %v", err)
	}
	if _, err := pools.Create(ctx, c.lb, pools.CreateOpts{Name: portName, Protocol: "TCP", LBMethod: pools.LBMethodRoundRobin, ListenerID: listener.ID}).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Errorf("a pool while the listener is being applied: %v, want 409 (the load balancer is immutable until ACTIVE)", err)
	}
	if got, _ := listeners.Get(ctx, c.lb, listener.ID).Extract(); got.ProvisioningStatus != "PENDING_CREATE" {
		t.Errorf("the listener being applied: %s, want PENDING_CREATE", got.ProvisioningStatus)
	}
	c.balancers.mu.Lock()
	c.balancers.hold = nil
	c.balancers.mu.Unlock()
	close(hold)
	c.waitActive(t, lb.ID)
	pool, err := pools.Create(ctx, c.lb, pools.CreateOpts{Name: portName, Protocol: "TCP", LBMethod: pools.LBMethodRoundRobin, ListenerID: listener.ID}).Extract()
	if err != nil {
		t.Fatalf("create pool: %v", err)
	}
	c.waitActive(t, lb.ID)
	monitor, err := monitors.Create(ctx, c.lb, monitors.CreateOpts{Name: portName, PoolID: pool.ID, Type: "TCP", Delay: 10, Timeout: 5, MaxRetries: 5, MaxRetriesDown: 3}).Extract()
	if err != nil {
		t.Fatalf("create health monitor: %v", err)
	}
	c.waitActive(t, lb.ID)
	var members []string
	for i, addr := range []string{"172.18.200.10", "172.18.200.11", "172.18.200.12"} {
		m, err := pools.CreateMember(ctx, c.lb, pool.ID, pools.CreateMemberOpts{Name: portName + "-cp-" + string(rune('a'+i)), Address: addr, ProtocolPort: 6443}).Extract()
		if err != nil {
			t.Fatalf("create member %s: %v", addr, err)
		}
		members = append(members, m.ID)
		c.waitActive(t, lb.ID)
	}
	if _, err := pools.CreateMember(ctx, c.lb, pool.ID, pools.CreateMemberOpts{Address: "172.18.200.10", ProtocolPort: 6443}).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Errorf("a second member at the same address: %v, want 409", err)
	}
	spec := c.balancers.spec(lb.ID)
	if len(spec.Listeners) != 1 || spec.Listeners[0].Port != 6443 || len(spec.Listeners[0].Members) != 3 ||
		spec.Listeners[0].Monitor == nil || *spec.Listeners[0].Monitor != (cloud.BalancedMonitor{Delay: 10, Timeout: 5, MaxRetries: 5, MaxRetriesDown: 3}) ||
		spec.VIP.String() != lb.VipAddress || !slices.Equal(spec.Addresses, []netip.Addr{netip.MustParseAddr(fip.FloatingIP)}) {
		t.Errorf("what the load balancer's machine serves: %+v", spec)
	}

	// A member down in the machine's health checks: ERROR, its pool and load balancer DEGRADED.
	c.balancers.mu.Lock()
	c.balancers.health = map[string]string{members[0]: "DOWN", members[1]: "UP", members[2]: "UP"}
	c.balancers.mu.Unlock()
	waitFor(t, 10*time.Second, "the load balancer DEGRADED", func() bool {
		got, _ := loadbalancers.Get(ctx, c.lb, lb.ID).Extract()
		return got.OperatingStatus == "DEGRADED"
	})
	down, _ := pools.GetMember(ctx, c.lb, pool.ID, members[0]).Extract()
	up, _ := pools.GetMember(ctx, c.lb, pool.ID, members[1]).Extract()
	if down.OperatingStatus != "ERROR" || up.OperatingStatus != "ONLINE" {
		t.Errorf("members' operating status: down %s, up %s", down.OperatingStatus, up.OperatingStatus)
	}

	// A machine removed: its member goes, and the machine serves the other two.
	if err := pools.DeleteMember(ctx, c.lb, pool.ID, members[0]).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	c.waitActive(t, lb.ID)
	if got := c.balancers.spec(lb.ID).Listeners[0].Members; len(got) != 2 {
		t.Errorf("members served after one went: %v", got)
	}
	if listed, _ := pools.ListMembers(c.lb, pool.ID, pools.ListMembersOpts{Name: portName + "-cp-b"}).AllPages(ctx); listed == nil {
		t.Error("list members by name")
	} else if ms, _ := pools.ExtractMembers(listed); len(ms) != 1 || ms[0].ID != members[1] {
		t.Errorf("members by name: %v", ms)
	}

	// The deletion, as CAPO's DeleteLoadBalancer: children refuse a plain delete, cascade takes all.
	if err := loadbalancers.Delete(ctx, c.lb, lb.ID, loadbalancers.DeleteOpts{}).ExtractErr(); !gophercloud.ResponseCodeIs(err, http.StatusBadRequest) {
		t.Errorf("delete a load balancer with children, without cascade: %v, want 400", err)
	}
	// CAPO v0.13 disassociates with PortID nil, which gophercloud leaves out: an empty update,
	// which Neutron takes as no port. It then waits for the floating IP to be DOWN.
	if got, err := floatingips.Update(ctx, c.network, fip.ID, floatingips.UpdateOpts{PortID: nil}).Extract(); err != nil || got.Status != "DOWN" || got.PortID != "" {
		t.Fatalf("disassociate as CAPO does: %+v %v, want DOWN and no port", got, err)
	}
	if err := floatingips.Delete(ctx, c.network, fip.ID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if err := loadbalancers.Delete(ctx, c.lb, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr(); err != nil {
		t.Fatalf("cascade delete: %v", err)
	}
	waitFor(t, 10*time.Second, "the load balancer gone", func() bool {
		_, err := loadbalancers.Get(ctx, c.lb, lb.ID).Extract()
		return gophercloud.ResponseCodeIs(err, http.StatusNotFound)
	})
	if left := resourcesOf(c.Cloud, octaviaKinds...); len(left) > 0 {
		t.Errorf("left after the cascade delete: %v", left)
	}
	if _, err := ports.Get(ctx, c.network, lb.VipPortID).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Errorf("the VIP port after the cascade delete: %v, want 404", err)
	}
	if _, err := monitors.Get(ctx, c.lb, monitor.ID).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Errorf("the health monitor after the cascade delete: %v, want 404", err)
	}
	c.balancers.mu.Lock()
	gone := c.balancers.gone
	c.balancers.mu.Unlock()
	if !slices.Equal(gone, []string{lb.ID}) {
		t.Errorf("machines deleted: %v, want the load balancer's", gone)
	}
}

// The faults of a load balancer, as Octavia shows them: one stuck in PENDING_CREATE (immutable
// and not deletable while it is, going on when its time is up), one in ERROR (deletable), and the
// project's quota.
func TestOctaviaFaults(t *testing.T) {
	c := startWithLoadBalancers(t)
	ctx := context.Background()
	_, subnetID, _, _, _ := cluster(t, c.testCloud)

	if err := c.Inject(cloud.Fault{Kind: "load-balancer-stuck", Name: "^stuck", Count: 1}); err != nil {
		t.Fatal(err)
	}
	stuck, err := loadbalancers.Create(ctx, c.lb, loadbalancers.CreateOpts{Name: "stuck-1", VipSubnetID: subnetID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if got, _ := loadbalancers.Get(ctx, c.lb, stuck.ID).Extract(); got.ProvisioningStatus != "PENDING_CREATE" {
		t.Errorf("stuck load balancer: %s, want PENDING_CREATE", got.ProvisioningStatus)
	}
	if _, err := listeners.Create(ctx, c.lb, listeners.CreateOpts{Protocol: "TCP", ProtocolPort: 6443, LoadbalancerID: stuck.ID}).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Errorf("a listener on the stuck load balancer: %v, want 409", err)
	}
	if err := loadbalancers.Delete(ctx, c.lb, stuck.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr(); !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Errorf("delete the stuck load balancer: %v, want 409", err)
	}
	// Count 1: the next one is not stuck.
	next, err := loadbalancers.Create(ctx, c.lb, loadbalancers.CreateOpts{Name: "stuck-2", VipSubnetID: subnetID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	c.waitActive(t, next.ID)

	if err := c.Inject(cloud.Fault{Kind: "load-balancer-stuck", Name: "^slow", For: "300ms"}); err != nil {
		t.Fatal(err)
	}
	slow, err := loadbalancers.Create(ctx, c.lb, loadbalancers.CreateOpts{Name: "slow", VipSubnetID: subnetID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	c.waitActive(t, slow.ID)

	if err := c.Inject(cloud.Fault{Kind: "load-balancer-error", Name: "^broken"}); err != nil {
		t.Fatal(err)
	}
	broken, err := loadbalancers.Create(ctx, c.lb, loadbalancers.CreateOpts{Name: "broken", VipSubnetID: subnetID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the broken load balancer in ERROR", func() bool {
		got, _ := loadbalancers.Get(ctx, c.lb, broken.ID).Extract()
		return got.ProvisioningStatus == "ERROR" && got.OperatingStatus == "ERROR"
	})
	if err := loadbalancers.Delete(ctx, c.lb, broken.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr(); err != nil {
		t.Errorf("delete a load balancer in ERROR: %v", err)
	}

	if err := c.Inject(cloud.Fault{Kind: "quota", Resource: "loadbalancer", Limit: 3}); err != nil {
		t.Fatal(err)
	}
	_, err = loadbalancers.Create(ctx, c.lb, loadbalancers.CreateOpts{Name: "over", VipSubnetID: subnetID}).Extract()
	if !gophercloud.ResponseCodeIs(err, http.StatusForbidden) || !strings.Contains(err.Error(), "Quota has been met for resources: Load Balancer") {
		t.Errorf("a load balancer over quota: %v, want 403 Quota has been met", err)
	}
	// A load balancer stuck for ever goes on once the faults are cleared.
	c.ClearFaults()
	c.waitActive(t, stuck.ID)
	for _, f := range []cloud.Fault{{Kind: "load-balancer-stuck", Name: "(", For: "1s"}, {Kind: "load-balancer-stuck", Name: "x", For: "soon"}} {
		if err := c.Inject(f); err == nil {
			t.Errorf("fault %+v accepted", f)
		}
	}
}

// The server-state fault: a running server goes to SHUTOFF or ERROR (with its fault) and its
// machine stops; the zones are the configured ones, a server in the one it asks for.
func TestServersFailAndZonesAreTheCloudsOwn(t *testing.T) {
	c := startWithLoadBalancers(t)
	ctx := context.Background()
	pages, err := availabilityzones.List(c.compute).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	zones, _ := availabilityzones.ExtractAvailabilityZones(pages)
	var names []string
	for _, z := range zones {
		names = append(names, z.ZoneName)
	}
	if !slices.Equal(names, []string{"az-1", "az-2", "az-3"}) {
		t.Errorf("zones: %v", names)
	}
	netID, _, _, _, _ := cluster(t, c.testCloud)
	var ids []string
	for i, zone := range []string{"az-2", "", "az-3"} {
		s, err := servers.Create(ctx, c.compute, servers.CreateOpts{Name: "worker-" + string(rune('a'+i)), FlavorRef: "1", ImageRef: imageID(t, c.testCloud),
			Networks: []servers.Network{{UUID: netID}}, AvailabilityZone: zone}, nil).Extract()
		if err != nil {
			t.Fatalf("create a server in zone %q: %v", zone, err)
		}
		ids = append(ids, s.ID)
	}
	if _, err := servers.Create(ctx, c.compute, servers.CreateOpts{Name: "nowhere", FlavorRef: "1", ImageRef: imageID(t, c.testCloud),
		Networks: []servers.Network{{UUID: netID}}, AvailabilityZone: "nova"}, nil).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusBadRequest) {
		t.Errorf("a server in an unknown zone: %v, want 400", err)
	}
	for _, id := range ids {
		waitFor(t, 5*time.Second, "server ACTIVE", func() bool {
			s, _ := servers.Get(ctx, c.compute, id).Extract()
			return s.Status == "ACTIVE"
		})
	}
	if z := c.machines.booted[ids[1]].Metadata["availability_zone"]; z != "az-1" {
		t.Errorf("a server that names no zone runs in %v, want the first (az-1)", z)
	}
	if err := c.Inject(cloud.Fault{Kind: "server-state", Name: "worker-a", Status: "SHUTOFF"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Inject(cloud.Fault{Kind: "server-state", Name: ids[2], Status: "ERROR"}); err != nil {
		t.Fatal(err)
	}
	off, _ := servers.Get(ctx, c.compute, ids[0]).Extract()
	failed, _ := servers.Get(ctx, c.compute, ids[2]).Extract()
	if off.Status != "SHUTOFF" || off.PowerState != servers.SHUTDOWN || failed.Status != "ERROR" || !strings.Contains(failed.Fault.Message, "host went down") {
		t.Errorf("after the faults: %s (power %d), %s (%q)", off.Status, off.PowerState, failed.Status, failed.Fault.Message)
	}
	c.machines.mu.Lock()
	stopped := slices.Clone(c.machines.stopped)
	c.machines.mu.Unlock()
	if !slices.Equal(stopped, []string{ids[0], ids[2]}) {
		t.Errorf("machines stopped: %v, want the two servers'", stopped)
	}
	if err := c.Inject(cloud.Fault{Kind: "server-state", Name: "worker-a", Status: "ERROR"}); err == nil {
		t.Error("a server-state fault on a server that is not ACTIVE was accepted")
	}
	if err := c.Inject(cloud.Fault{Kind: "server-state", Name: "worker-b", Status: "PAUSED"}); err == nil {
		t.Error("a server-state fault to PAUSED was accepted")
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
