//go:build e2e

package simulator_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"cluster-init.dev/cluster-init/tools/testbed/openstack/simulator"
)

// A server of the simulated cloud is a kind node container at its port's address that runs its
// cloud-init user data (Jinja variables from its instance data) and answers at its floating IP.
func TestAServerRunsItsUserDataAndAnswersAtItsFloatingIP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	helper, err := simulator.BuildHelper(ctx, repo, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulator.Start(simulator.Options{Network: "kind", Images: map[string]string{"node": "kindest/node:v1.37.0"}, CloudInitCommands: helper})
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
	cc, _ := openstack.NewComputeV2(provider, gophercloud.EndpointOpts{})
	n, err := networks.Create(ctx, nc, networks.CreateOpts{Name: "e2e"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	s, err := subnets.Create(ctx, nc, subnets.CreateOpts{NetworkID: n.ID, CIDR: "172.18.200.0/24", IPVersion: gophercloud.IPv4}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	r, err := routers.Create(ctx, nc, routers.CreateOpts{Name: "e2e", GatewayInfo: &routers.GatewayInfo{NetworkID: simulator.ExternalNetworkID}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := routers.AddInterface(ctx, nc, r.ID, routers.AddInterfaceOpts{SubnetID: s.ID}).Extract(); err != nil {
		t.Fatal(err)
	}
	p, err := ports.Create(ctx, nc, ports.CreateOpts{NetworkID: n.ID, Name: "e2e-0"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	userData := "## template: jinja\n#cloud-config\nwrite_files:\n- path: /etc/instance-id\n  content: \"{{ v1.instance_id }} {{ ds.meta_data.local_hostname }}\"\nruncmd:\n- \"echo ran > /run/e2e-ran\"\n- \"setsid python3 -m http.server 8080 --directory /etc >/dev/null 2>&1 </dev/null &\"\n"
	srv, err := servers.Create(ctx, cc, servers.CreateOpts{Name: "e2e-0", FlavorRef: "1", ImageRef: imageID(t, sim, ctx, provider),
		Networks: []servers.Network{{Port: p.ID}}, UserData: []byte(userData)}, nil).Extract()
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	var console string
	for {
		console, _ = servers.ShowConsoleOutput(ctx, cc, srv.ID, servers.ShowConsoleOutputOpts{}).Extract()
		if strings.Contains(console, "cloud-init finished") || strings.Contains(console, "cloud-init failed") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("cloud-init did not end: %s", console)
		}
		time.Sleep(time.Second)
	}
	t.Logf("cloud-init ended after %s:\n%s", time.Since(begin).Round(time.Second), console)
	if !strings.Contains(console, "cloud-init finished") {
		t.Fatal("cloud-init failed")
	}
	if got := dockerExec(t, "openstack-e2e-0", "cat", "/etc/instance-id"); got != srv.ID+" e2e-0" {
		t.Errorf("/etc/instance-id: %q, expected %q", got, srv.ID+" e2e-0")
	}
	if got := dockerExec(t, "openstack-e2e-0", "cat", "/run/e2e-ran"); got != "ran" {
		t.Errorf("runcmd did not run: %q", got)
	}
	fip, err := floatingips.Create(ctx, nc, floatingips.CreateOpts{FloatingNetworkID: simulator.ExternalNetworkID, PortID: p.ID}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	// This host reaches the server at its floating IP (the server serves /etc on 8080).
	var got string
	for range 20 {
		out, err := exec.CommandContext(ctx, "curl", "--silent", "--fail", "--max-time", "2", "http://"+fip.FloatingIP+":8080/instance-id").Output()
		if got = string(out); err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got != srv.ID+" e2e-0" {
		t.Errorf("GET http://%s:8080/instance-id: %q, expected the server's", fip.FloatingIP, got)
	}
	if err := servers.Delete(ctx, cc, srv.ID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := servers.Get(ctx, cc, srv.ID).Extract(); gophercloud.ResponseCodeIs(err, 404) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the server was not deleted")
		}
		time.Sleep(500 * time.Millisecond)
	}
	if out, _ := exec.Command("docker", "ps", "-a", "--filter", "name=openstack-e2e-0", "-q").Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("the server's container is left after its deletion")
	}
}

func imageID(t *testing.T, _ *simulator.Simulator, ctx context.Context, provider *gophercloud.ProviderClient) string {
	t.Helper()
	ic, _ := openstack.NewImageV2(provider, gophercloud.EndpointOpts{})
	page, err := images.List(ic, images.ListOpts{Name: "node"}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	imgs, _ := images.ExtractImages(page)
	if len(imgs) != 1 {
		t.Fatalf("images named node: %d", len(imgs))
	}
	return imgs[0].ID
}

func dockerExec(t *testing.T, ctr string, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"exec", ctr}, args...)...).CombinedOutput()
	if err != nil {
		t.Errorf("docker exec %s %v: %v: %s", ctr, args, err, out)
	}
	return strings.TrimSpace(string(out))
}
