//go:build e2e

package simulator_test

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/monitors"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/pools"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"cluster-init.dev/cluster-init/tools/testbed/openstack/simulator"
)

// member is a TCP server on this host's address in the Docker network that answers its name.
func member(t *testing.T, host netip.Addr, name string) (port int, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name + "\n"))
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, func() { l.Close() }
}

// ask connects to addr and reads the member's name ("" when refused or reset).
func ask(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

func answers(addr string, n int) map[string]int {
	out := map[string]int{}
	for range n {
		out[ask(addr)]++
	}
	return out
}

// An Octavia load balancer of the simulated cloud is a real TCP load balancer: haproxy at its VIP
// (and at its floating IP) spreading connections over its members, leaving out a member its
// health monitor finds down (which the API shows), refusing sources outside its allowed CIDRs,
// and gone, container and all, with a cascade delete.
func TestALoadBalancerServesItsMembersAndFollowsTheirHealth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	helper, err := simulator.BuildHelper(ctx, repo, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	image, err := simulator.LoadBalancerImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulator.Start(simulator.Options{Network: "kind", Images: map[string]string{"node": "kindest/node:v1.37.0"}, CloudInitCommands: helper, LoadBalancerImage: image})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close(); _ = simulator.RemoveServers(context.Background()) })
	provider, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{IdentityEndpoint: sim.URL + "/identity/v3",
		ApplicationCredentialID: sim.ApplicationCredentialID, ApplicationCredentialSecret: sim.ApplicationCredentialSecret})
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := openstack.NewNetworkV2(provider, gophercloud.EndpointOpts{})
	lc, err := openstack.NewLoadBalancerV2(provider, gophercloud.EndpointOpts{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := networks.Create(ctx, nc, networks.CreateOpts{Name: "e2e-lb"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	s, err := subnets.Create(ctx, nc, subnets.CreateOpts{NetworkID: n.ID, CIDR: "172.18.200.0/24", IPVersion: gophercloud.IPv4}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	r, err := routers.Create(ctx, nc, routers.CreateOpts{Name: "e2e-lb", GatewayInfo: &routers.GatewayInfo{NetworkID: simulator.ExternalNetworkID}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := routers.AddInterface(ctx, nc, r.ID, routers.AddInterfaceOpts{SubnetID: s.ID}).Extract(); err != nil {
		t.Fatal(err)
	}
	// This host's address in the Docker network, where the cloud's APIs listen.
	u, err := url.Parse(sim.URL)
	if err != nil {
		t.Fatal(err)
	}
	host := netip.MustParseAddr(u.Hostname())
	portA, stopA := member(t, host, "a")
	portB, stopB := member(t, host, "b")
	defer stopB()

	wait := func(id string) *loadbalancers.LoadBalancer {
		t.Helper()
		for {
			lb, err := loadbalancers.Get(ctx, lc, id).Extract()
			if err != nil {
				t.Fatal(err)
			}
			if lb.ProvisioningStatus == "ACTIVE" {
				return lb
			}
			if lb.ProvisioningStatus == "ERROR" || ctx.Err() != nil {
				t.Fatalf("load balancer %s: %s", id, lb.ProvisioningStatus)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	begin := time.Now()
	lb, err := loadbalancers.Create(ctx, lc, loadbalancers.CreateOpts{Name: "e2e-kubeapi", VipSubnetID: s.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	lb = wait(lb.ID)
	t.Logf("load balancer ACTIVE at %s after %s", lb.VipAddress, time.Since(begin).Round(time.Millisecond))
	l, err := listeners.Create(ctx, lc, listeners.CreateOpts{Name: "e2e-6443", Protocol: "TCP", ProtocolPort: 6443, LoadbalancerID: lb.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	wait(lb.ID)
	pool, err := pools.Create(ctx, lc, pools.CreateOpts{Name: "e2e-6443", Protocol: "TCP", LBMethod: pools.LBMethodRoundRobin, ListenerID: l.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	wait(lb.ID)
	if _, err := monitors.Create(ctx, lc, monitors.CreateOpts{PoolID: pool.ID, Type: "TCP", Delay: 1, Timeout: 1, MaxRetries: 1, MaxRetriesDown: 1}).Extract(); err != nil {
		t.Fatal(err)
	}
	wait(lb.ID)
	var memberA string
	for name, port := range map[string]int{"a": portA, "b": portB} {
		m, err := pools.CreateMember(ctx, lc, pool.ID, pools.CreateMemberOpts{Name: name, Address: host.String(), ProtocolPort: port}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		if name == "a" {
			memberA = m.ID
		}
		wait(lb.ID)
	}
	vip := net.JoinHostPort(lb.VipAddress, "6443")
	if got := answers(vip, 10); got["a"] == 0 || got["b"] == 0 || got[""] > 0 {
		t.Errorf("connections to the VIP: %v, want both members and no failure", got)
	}
	fip, err := floatingips.Create(ctx, nc, floatingips.CreateOpts{FloatingNetworkID: simulator.ExternalNetworkID, PortID: lb.VipPortID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]int
	for range 20 {
		if got = answers(net.JoinHostPort(fip.FloatingIP, "6443"), 4); got[""] == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got[""] > 0 {
		t.Errorf("connections to the floating IP %s: %v", fip.FloatingIP, got)
	}

	stopA()
	down := time.Now()
	for {
		m, err := pools.GetMember(ctx, lc, pool.ID, memberA).Extract()
		if err != nil {
			t.Fatal(err)
		}
		if m.OperatingStatus == "ERROR" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("member a stopped: still %s", m.OperatingStatus)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("member a ERROR %s after it stopped", time.Since(down).Round(time.Millisecond))
	if got, _ := loadbalancers.Get(ctx, lc, lb.ID).Extract(); got.OperatingStatus != "DEGRADED" {
		t.Errorf("the load balancer with a member down: %s, want DEGRADED", got.OperatingStatus)
	}
	if got := answers(vip, 10); got["b"] != 10 {
		t.Errorf("connections with member a down: %v, want all to b", got)
	}

	cidrs := []string{"10.99.0.0/16"}
	if _, err := listeners.Update(ctx, lc, l.ID, listeners.UpdateOpts{AllowedCIDRs: &cidrs}).Extract(); err != nil {
		t.Fatal(err)
	}
	wait(lb.ID)
	if got := ask(vip); got != "" {
		t.Errorf("a connection from outside the allowed CIDRs was answered by %q", got)
	}
	// And from inside them, it is: the refusal above was the CIDRs', not a load balancer down.
	cidrs = []string{"10.99.0.0/16", host.String() + "/32"}
	if _, err := listeners.Update(ctx, lc, l.ID, listeners.UpdateOpts{AllowedCIDRs: &cidrs}).Extract(); err != nil {
		t.Fatal(err)
	}
	wait(lb.ID)
	if got := ask(vip); got != "b" {
		t.Errorf("a connection from inside the allowed CIDRs: %q, want member b", got)
	}

	if err := loadbalancers.Delete(ctx, lc, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := loadbalancers.Get(ctx, lc, lb.ID).Extract(); gophercloud.ResponseCodeIs(err, 404) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the load balancer was not deleted")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, _ := exec.Command("docker", "ps", "-a", "--filter", "label=cluster-init.dev/openstack-loadbalancer="+lb.ID, "-q").Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Error("the load balancer's container is left after its deletion")
	}
	for _, res := range sim.Cloud.Resources() {
		switch res.Kind {
		case "loadbalancer", "listener", "pool", "healthmonitor", "member":
			t.Errorf("left after the cascade delete: %s %s", res.Kind, res.Name)
		case "port":
			if strings.HasPrefix(res.Name, "octavia-lb-") {
				t.Errorf("the VIP port is left: %s", res.Name)
			}
		}
	}
}
