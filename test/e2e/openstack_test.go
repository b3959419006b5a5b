//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/tools/testbed/openstack/cloud"
	"cluster-init.dev/cluster-init/tools/testbed/openstack/simulator"
)

// openStackImage is the Glance image of the simulated cloud's servers: the test bed's node image.
const openStackImage = "kindest-node-v1.37.0"

// startCloud runs the test bed's OpenStack cloud for the test (tools/testbed/openstack): its
// servers are containers on kind's network, removed when the test ends.
func startCloud(t *testing.T) *simulator.Simulator {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := simulator.RemoveServers(ctx); err != nil {
		t.Fatal(err)
	}
	helper, err := simulator.BuildHelper(ctx, repo, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lbImage, err := simulator.LoadBalancerImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulator.Start(simulator.Options{Network: "kind", Images: map[string]string{openStackImage: "kindest/node:v1.37.0"}, CloudInitCommands: helper, LoadBalancerImage: lbImage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sim.Close()
		_ = simulator.RemoveServers(context.Background())
	})
	return sim
}

// capoEnvironment is environment-values/kubeadm-capo with the simulated cloud's clouds.yaml as
// its secret, and the values that point it at that cloud (image, external network, key pair, a
// subnet inside kind's network) with one control plane machine and one worker, its endpoint a
// floating IP on the control plane machine (no load balancer).
func capoEnvironment(t *testing.T, sim *simulator.Simulator) (dir, values string) {
	t.Helper()
	dir = copyEnvironment(t, "kubeadm-capo", "capo-simulated", "credentials:\n"+openStackCredentials(sim))
	values = writeValues(t, fmt.Sprintf(`cluster:
  control_plane:
    replicas: 1
    flavor: m1.large
  workers:
    replicas: 1
    flavor: m1.large
  capo:
    cloud_name: %s
    image_name: %s
    external_network_id: %s
    ssh_key_name: %s
    node_cidr: 172.18.200.0/24
    dns_nameservers: [172.18.0.1]
    api_server_load_balancer:
      enabled: false
`, simulator.CloudName, openStackImage, simulator.ExternalNetworkID, simulator.KeyPair))
	return dir, values
}

// openStackCredentials are the lines of credentials.openstack of a secrets file (indented under
// credentials:) for the simulated cloud.
func openStackCredentials(sim *simulator.Simulator) string {
	return "  openstack:\n    clouds_yaml: |\n" + indented(sim.CloudsYAML(), "      ") + "    cacert: \"\"\n"
}

// indented is text with every line after prefix: a block scalar's content.
func indented(text, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

// servers are the simulated cloud's servers by status.
func servers(sim *simulator.Simulator) map[string][]string {
	out := map[string][]string{}
	for _, r := range sim.Cloud.Resources() {
		if r.Kind == "server" {
			out[r.Detail] = append(out[r.Detail], r.Name)
		}
	}
	return out
}

// kubeadm-capo end to end on the simulated cloud: bootstrap with the pivot to a self-managed
// management cluster, a worker added by apply, then cleanup, which takes the cluster back into
// kind to delete it; the cloud holds nothing of the environment afterwards.
func TestKubeadmCAPOOnTheSimulatedCloud(t *testing.T) {
	requireEveryTestbedImage(t)
	sim := startCloud(t)
	dir, capoValues := capoEnvironment(t, sim)
	cleanup(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	took := map[string]time.Duration{}

	r := bootstrap(t, ctx, nil, dir, "--values", testbedVs, "--values", capoValues, "--output", "plain")
	r.report(t, "bootstrap kubeadm-capo (simulated cloud)")
	if r.err != nil {
		t.Fatalf("bootstrap kubeadm-capo: %v", r.err)
	}
	took["bootstrap with the pivot"] = r.wall
	assertContains(t, "the bootstrap", r.output.String(), "the pivot is complete", "is self-managed: 2 machines")
	if got := servers(sim); len(got["ACTIVE"]) != 2 || len(got) != 1 {
		t.Errorf("servers after the bootstrap: %v, expected 2 ACTIVE", got)
	}
	kc := state.Environment(dir).ManagementKubeconfig()
	if ready := kubectl(t, kc, "-n", "cluster-init", "get", "openstackservers", "-o", "jsonpath={.items[*].status.ready}"); ready != "true true" {
		t.Errorf("the management cluster's OpenStackServers after the pivot: ready %q", ready)
	}
	if phases := kubectl(t, kc, "-n", "cluster-init", "get", "machines", "-o", "jsonpath={.items[*].status.phase}"); phases != "Running Running" {
		t.Errorf("machines as the management cluster sees them: %q", phases)
	}

	// Day 2 from the self-managed cluster: its own CAPO creates the server.
	workers := writeValues(t, "cluster:\n  workers:\n    replicas: 2\n")
	r = bootstrap(t, ctx, nil, "apply", dir, "--values", testbedVs, "--values", capoValues, "--values", workers, "--output", "plain")
	r.report(t, "apply kubeadm-capo (workers 1 -> 2)")
	if r.err != nil {
		t.Fatalf("apply: %v", r.err)
	}
	took["apply: workers 1 -> 2"] = r.wall
	if got := servers(sim); len(got["ACTIVE"]) != 3 {
		t.Errorf("servers after apply: %v, expected 3 ACTIVE", got)
	}

	// Cleanup: the cluster cannot delete itself, it is taken back into kind and deleted there.
	r = bootstrap(t, ctx, nil, "cleanup", dir, "--values", testbedVs, "--values", capoValues)
	if r.err != nil {
		t.Fatalf("cleanup: %v", r.err)
	}
	took["cleanup (taken back into kind)"] = r.wall
	assertContains(t, "the cleanup", r.output.String(), "taking it back into kind cluster", "Cluster management is deleted")
	if left := sim.Cloud.Resources(); len(left) > 0 {
		t.Errorf("left on the cloud after cleanup: %+v", left)
	}
	if out, _ := exec.Command("docker", "ps", "-a", "--quiet", "--filter", "label=cluster-init.dev/openstack-server").Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("server containers left after cleanup: %s", out)
	}
	if left := kindClusters(t); slices.Contains(left, "cluster-init-bootstrap") {
		t.Errorf("kind cluster left after cleanup: %v", left)
	}
	if _, err := os.Stat(kc); err == nil {
		t.Errorf("cleanup left the management kubeconfig %s", kc)
	}
	reportCloud(t, sim.Cloud, took)
}

// reportCloud logs the wall time of each step and the API calls CAPO made, by route.
func reportCloud(t *testing.T, c *cloud.Cloud, took map[string]time.Duration) {
	t.Helper()
	var steps []string
	for s, d := range took {
		steps = append(steps, fmt.Sprintf("%s %s", s, d.Round(time.Second)))
	}
	sort.Strings(steps)
	t.Logf("kubeadm-capo on the simulated cloud: %s", strings.Join(steps, "; "))
	calls := c.Calls()
	var routes []string
	total := 0
	for r, n := range calls {
		routes = append(routes, fmt.Sprintf("%5d  %s", n, r))
		if !strings.HasPrefix(r, "503 ") { // counted under their route too
			total += n
		}
	}
	sort.Strings(routes)
	t.Logf("API calls: %d in all, by route:\n%s", total, strings.Join(routes, "\n"))
}

// noPivot keeps the cluster managed by the kind cluster: the fault tests need no pivot.
const noPivot = `pivot: false
units:
  management-flux:
    enabled: false
  management-configs:
    enabled: false
  management-cluster-init:
    enabled: false
`

// A cloud that answers 503 for a while and boots slowly: the bootstrap recovers without help;
// one that refuses a server over quota and fails another: the conclusion names both, from CAPO's
// own words; cleanup leaves nothing on the cloud either way.
func TestOpenStackFaultsEndInARecoveryOrAConclusion(t *testing.T) {
	requireEveryTestbedImage(t)
	sim := startCloud(t)
	dir, capoValues := capoEnvironment(t, sim)
	cleanup(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	noPivotValues := writeValues(t, noPivot)
	inject := func(f cloud.Fault) {
		t.Helper()
		if err := sim.Cloud.Inject(f); err != nil {
			t.Fatal(err)
		}
	}
	cleanupAndCheck := func(what string) {
		t.Helper()
		r := bootstrap(t, ctx, nil, "cleanup", dir, "--values", testbedVs, "--values", capoValues)
		if r.err != nil {
			t.Fatalf("cleanup after %s: %v", what, r.err)
		}
		if left := sim.Cloud.Resources(); len(left) > 0 {
			t.Errorf("left on the cloud after %s and cleanup: %+v", what, left)
		}
		t.Logf("cleanup after %s: %s", what, r.wall.Round(time.Second))
	}

	// Recovery: every server takes 90 s to boot; Neutron answers 503 for 90 s once the providers
	// run (CAPO is building the cluster's network), Nova for 90 s once the network is there (CAPO
	// is creating the servers).
	inject(cloud.Fault{Kind: "slow-boot", For: "90s"})
	var downSince, computeDown time.Time
	onLine := func(line string) bool {
		if downSince.IsZero() && strings.Contains(line, "unit capo: ready") {
			downSince = time.Now()
			inject(cloud.Fault{Kind: "unavailable", Service: "network", For: "90s"})
		}
		if computeDown.IsZero() && strings.Contains(line, "Cluster management: Provisioned") {
			computeDown = time.Now()
			inject(cloud.Fault{Kind: "unavailable", Service: "compute", For: "90s"})
		}
		return false
	}
	r := bootstrap(t, ctx, onLine, dir, "--values", testbedVs, "--values", capoValues, "--values", noPivotValues, "--until", "units", "--output", "plain")
	r.report(t, "bootstrap kubeadm-capo with 503s and slow boots")
	if r.err != nil {
		t.Fatalf("the bootstrap did not recover from 90 s of 503s and 90 s boots: %v", r.err)
	}
	if downSince.IsZero() {
		t.Fatal("the 503s were never injected: no line said the capo unit was ready")
	}
	if got := servers(sim); len(got["ACTIVE"]) != 2 {
		t.Errorf("servers after the recovery: %v, expected 2 ACTIVE", got)
	}
	calls := sim.Cloud.Calls()
	if calls["503 network"] == 0 || calls["503 compute"] == 0 {
		t.Errorf("no call met the 503s: %v", calls)
	}
	t.Logf("recovered: every unit ready %s after the 503s began (%d calls answered 503 by Neutron, %d by Nova; %d server creations)",
		time.Since(downSince).Round(time.Second), calls["503 network"], calls["503 compute"], calls["POST /compute/v2.1/servers"])
	sim.Cloud.ClearFaults()
	cleanupAndCheck("the recovery")

	// Conclusion: two workers; Nova refuses the second over quota, the first goes to ERROR.
	inject(cloud.Fault{Kind: "server-error", Name: "workers", Count: 1})
	inject(cloud.Fault{Kind: "quota", Resource: "instances", Limit: 2})
	twoWorkers := writeValues(t, "cluster:\n  workers:\n    replicas: 2\n")
	r = bootstrap(t, ctx, nil, dir, "--values", testbedVs, "--values", capoValues, "--values", noPivotValues, "--values", twoWorkers,
		"--until", "units", "--output", "plain", "--timeout", "6m")
	r.report(t, "bootstrap kubeadm-capo over quota and with a server in ERROR")
	if r.err == nil {
		t.Fatal("the bootstrap succeeded with a worker over quota and one in ERROR")
	}
	out := r.output.String()
	conclusion := out[strings.LastIndex(out, "the bootstrap is stuck"):]
	// CAPO never retries either server (it marks both failed), and no health check replaces a
	// worker before the control plane is up: the run ends at once, with Nova's fault of the
	// server in ERROR and the refusal of the other, not at its timeout.
	assertContains(t, "the conclusion", conclusion, "Quota exceeded for instances", "No valid host was found", "failed for good")
	assertContains(t, "the live view", out[:strings.LastIndex(out, "the bootstrap is stuck")], "the cloud's fault: No valid host was found")
	if r.wall > 5*time.Minute {
		t.Errorf("the run with two failed machines took %s: it waited for its 6m timeout", r.wall.Round(time.Second))
	}
	t.Logf("conclusion after %s:\n%s", r.wall.Round(time.Second), conclusion)
	sim.Cloud.ClearFaults()
	cleanupAndCheck("the quota and the server in ERROR")
}

// openStackTenantCredentials are the lines of credentials.tenants.<ns>.openstack of a secrets file
// (indented under credentials:) for a tenant's clusters on the simulated cloud: other credentials
// than the platform's (the user's password, not the application credential), under cloud name.
func openStackTenantCredentials(sim *simulator.Simulator, ns, cloud string) string {
	return "  tenants:\n    " + ns + ":\n      openstack:\n        clouds_yaml: |\n" + indented(sim.PasswordCloudsYAML(cloud), "          ")
}

// kubeadm-capo from git: bootstrapped from the test bed's git server onto the simulated cloud,
// then its workers scaled by a plain commit, which the self-managed cluster's own CAPO carries out;
// then a tenant's workload cluster by a commit, built on the same cloud with the credentials the
// platform gave the tenant's clusters, which the tenant's people cannot read; cleanup then takes
// the management cluster back into kind, deletes both, and leaves nothing on the cloud.
func TestKubeadmCAPOScaledByACommit(t *testing.T) {
	requireEveryTestbedImage(t)
	sim := startCloud(t)
	const capo = "kubeadm-capo"
	cleanup(t, capo)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	r := newRepositoryOf(t, capo, func(r *repository) {
		// The simulated cloud's image, network, key pair, a subnet inside kind's network; one
		// control plane machine and one worker: the values the platform commits.
		path := "environment-values/" + capo + "/values.yaml"
		values := readFile(t, filepath.Join(r.dir, path))
		for _, kv := range [][2]string{
			{`replicas: 3`, `replicas: 1`}, {`replicas: 2`, `replicas: 1`}, {`flavor: m1.xlarge`, `flavor: m1.large`},
			{`cloud_name: openstack`, `cloud_name: ` + simulator.CloudName},
			{`image_name: ubuntu-2404-kube-v1.37.0`, `image_name: ` + openStackImage},
			{`external_network_id: 00000000-0000-0000-0000-000000000000`, `external_network_id: ` + simulator.ExternalNetworkID},
			{`ssh_key_name: management-key`, `ssh_key_name: ` + simulator.KeyPair},
			{`node_cidr: 10.6.0.0/24`, `node_cidr: 172.18.200.0/24`},
		} {
			if !strings.Contains(values, kv[0]) {
				t.Fatalf("%s has no %q", path, kv[0])
			}
			values = strings.Replace(values, kv[0], kv[1], 1)
		}
		// The default tenant's clusters: built with credentials of their own (the simulated
		// cloud's user and password, as cloud "tenant"); its people are a group.
		values += "workload_clusters:\n  tenants:\n    workload-clusters:\n      readers_group: tenant-people\n      capo:\n        cloud_name: tenant\n"
		r.write(t, path, values)
		r.writeSecrets(t, openStackCredentials(sim)+openStackTenantCredentials(sim, "workload-clusters", "tenant"))
	})
	run := bootstrap(t, ctx, nil, capo, "--repo", r.dir, "--age-key-file", r.key, "--values", testbedVs, "--output", "plain")
	run.report(t, "bootstrap "+capo+" --source git (simulated cloud)")
	if run.err != nil {
		t.Fatalf("bootstrap: %v", run.err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(state.Environment(capo).ManagementKubeconfig()); err == nil {
			bootstrap(t, context.Background(), nil, "cleanup", capo, "--repo", r.dir, "--age-key-file", r.key, "--values", testbedVs)
		}
	})
	kc := state.Environment(capo).ManagementKubeconfig()

	path := "environment-values/" + capo + "/values.yaml"
	values := readFile(t, filepath.Join(r.dir, path))
	r.write(t, path, strings.Replace(values, "  workers:\n    replicas: 1\n", "  workers:\n    replicas: 2\n", 1))
	pushed := r.commit(t, "management: two workers")
	waitFor(t, 15*time.Minute, "a third machine of the management cluster, running", func() bool {
		return runningMachines(t, kc, "cluster-init", "management") == 3
	})
	scaled := time.Since(pushed)
	if got := servers(sim); len(got["ACTIVE"]) != 3 {
		t.Errorf("servers after the commit: %v, expected 3 ACTIVE", got)
	}
	t.Logf("push -> the management cluster with 2 workers on the simulated cloud (source's poll, no Receiver): %s", scaled.Round(time.Second))

	// A tenant's workload cluster, by a commit of its directory.
	byPassword := sim.Cloud.Calls()["token by password"]
	r.write(t, "clusters/management/workload-clusters/wl1/cluster.yaml", workloadCluster("wl1", "", ""))
	pushed = r.commit(t, "workload cluster wl1")
	waitExplained(t, 20*time.Minute, "the tenant's workload cluster wl1 Available", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "cluster", "wl1", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`) == "True"
	}, func() string {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "helmreleases,kustomizations,clusters,machines,openstackservers")
	})
	available := time.Since(pushed)
	t.Logf("push -> the tenant's wl1 Available on the simulated cloud (source's poll): %s", available.Round(time.Second))
	logTimeline(t, kc, pushed, "workload-clusters", [][2]string{
		{"helmrelease", "wl1"}, {"kustomization", "wl1-cluster"}, {"helmrelease", "wl1-cluster"}, {"cluster", "wl1"},
	}, "wl1")
	waitFor(t, 10*time.Minute, "the CNI of wl1 Ready", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "kustomization", "wl1-cni", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`) == "True"
	})
	withCNI := time.Since(pushed)
	if got := servers(sim); len(got["ACTIVE"]) != 5 {
		t.Errorf("servers with wl1: %v, expected 5 ACTIVE (3 of the management cluster, 2 of wl1)", got)
	}
	if n := sim.Cloud.Calls()["token by password"] - byPassword; n == 0 {
		t.Error("wl1 was built without a token of the tenant's credentials (the user's password)")
	} else {
		t.Logf("tokens issued for the tenant's credentials while wl1 was built: %d", n)
	}
	if got := kubectl(t, kc, "-n", "workload-clusters", "get", "openstackcluster", "wl1", "-o", "jsonpath={.spec.identityRef.name}/{.spec.identityRef.cloudName}"); got != names.TenantCloudCredentialsSecret+"/tenant" {
		t.Errorf("wl1's identityRef: %q", got)
	}
	// Its people (a member of its group): its kubeconfig, and not the cloud's credentials.
	people := impersonating(t, kc, "dana", "tenant-people")
	out := filepath.Join(t.TempDir(), "wl1.kubeconfig")
	bootstrapOK(t, "kubeconfig", capo, "wl1", "--namespace", "workload-clusters", "--kubeconfig", people, "--output", out)
	if nodes := kubectl(t, out, "get", "nodes", "-o", "name"); strings.Count(nodes, "node/wl1-") != 2 {
		t.Errorf("wl1's nodes with the kubeconfig its people got: %q", nodes)
	}
	if got, err := exec.Command("kubectl", "--kubeconfig", people, "-n", "workload-clusters", "get", "secret", names.TenantCloudCredentialsSecret).CombinedOutput(); err == nil || !strings.Contains(string(got), "forbidden") {
		t.Errorf("the tenant's people read the cloud's credentials: %v %s", err, got)
	}

	c := bootstrap(t, ctx, nil, "cleanup", capo, "--repo", r.dir, "--age-key-file", r.key, "--values", testbedVs)
	if c.err != nil {
		t.Fatalf("cleanup: %v", c.err)
	}
	if left := sim.Cloud.Resources(); len(left) > 0 {
		t.Errorf("left on the cloud after cleanup: %+v", left)
	}
	reportCloud(t, sim.Cloud, map[string]time.Duration{"bootstrap --source git": run.wall, "push -> workers 1 -> 2": scaled,
		"push -> tenant's wl1 Available": available, "push -> wl1 with its CNI": withCNI, "cleanup": c.wall})
}

// cloudResources are the simulated cloud's resources of a kind, by name.
func cloudResources(sim *simulator.Simulator, kind string) map[string]string {
	out := map[string]string{}
	for _, r := range sim.Cloud.Resources() {
		if r.Kind == kind {
			out[r.Name+" "+r.ID] = r.Detail
		}
	}
	return out
}

// lbMemberAddresses are the addresses of the load balancer's members, sorted.
func lbMemberAddresses(sim *simulator.Simulator) []string {
	var out []string
	for _, detail := range cloudResources(sim, "member") {
		// "ACTIVE/ONLINE 172.18.200.5:6443"
		if f := strings.Fields(detail); len(f) == 2 {
			out = append(out, strings.Split(f[1], ":")[0])
		}
	}
	slices.Sort(out)
	return out
}

// controlPlaneAddresses are the internal addresses of the cluster's control plane machines, sorted.
func controlPlaneAddresses(t *testing.T, kc string) []string {
	t.Helper()
	out := strings.Fields(kubectl(t, kc, "-n", "cluster-init", "get", "machines", "-l", "cluster.x-k8s.io/control-plane", "-o",
		`jsonpath={range .items[*]}{.status.addresses[?(@.type=="InternalIP")].address}{" "}{end}`))
	slices.Sort(out)
	return out
}

// kubeadm-capo highly available on the simulated cloud: three control plane machines behind an
// Octavia load balancer, spread over the cloud's zones, bootstrapped with the pivot; a worker whose
// server goes to SHUTOFF and one whose server goes to ERROR are both replaced by their health
// check; the load balancer's members follow the control plane machines; cleanup leaves nothing
// on the cloud: no load balancer, listener, pool, member, VIP port, floating IP or container.
func TestKubeadmCAPOHighlyAvailableBehindOctavia(t *testing.T) {
	requireEveryTestbedImage(t)
	sim := startCloud(t)
	dir, capoValues := capoEnvironment(t, sim)
	ha := writeValues(t, `cluster:
  control_plane:
    replicas: 3
  workers:
    replicas: 2
  health_checks:
    node_unreachable_timeout_seconds: 60
  capo:
    api_server_load_balancer:
      enabled: true
`)
	cleanup(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	took := map[string]time.Duration{}
	args := []string{"--values", testbedVs, "--values", capoValues, "--values", ha}
	r := bootstrap(t, ctx, nil, append([]string{dir, "--output", "plain"}, args...)...)
	r.report(t, "bootstrap kubeadm-capo with 3 control planes behind Octavia (simulated cloud)")
	if r.err != nil {
		t.Fatalf("bootstrap kubeadm-capo: %v", r.err)
	}
	took["bootstrap with the pivot"] = r.wall
	t.Cleanup(func() {
		if _, err := os.Stat(state.Environment(dir).ManagementKubeconfig()); err == nil {
			bootstrap(t, context.Background(), nil, append([]string{"cleanup", dir}, args...)...)
		}
	})
	assertContains(t, "the bootstrap", r.output.String(), "the pivot is complete", "is self-managed: 5 machines")
	kc := state.Environment(dir).ManagementKubeconfig()
	if lbs := cloudResources(sim, "loadbalancer"); len(lbs) != 1 {
		t.Fatalf("load balancers after the bootstrap: %v, want one", lbs)
	} else {
		for name, detail := range lbs {
			t.Logf("load balancer %s: %s", name, detail)
			if !strings.HasPrefix(detail, "ACTIVE/ONLINE") {
				t.Errorf("the load balancer after the bootstrap: %s, want ACTIVE/ONLINE", detail)
			}
		}
	}
	for kind, n := range map[string]int{"listener": 1, "pool": 1, "healthmonitor": 1} {
		if got := cloudResources(sim, kind); len(got) != n {
			t.Errorf("%ss after the bootstrap: %v, want %d", kind, got, n)
		}
	}
	if members, cps := lbMemberAddresses(sim), controlPlaneAddresses(t, kc); !slices.Equal(members, cps) || len(cps) != 3 {
		t.Errorf("the load balancer's members %v, the control plane machines' addresses %v: want the three alike", members, cps)
	}
	endpoint := kubectl(t, kc, "-n", "cluster-init", "get", "openstackcluster", "management", "-o", "jsonpath={.spec.controlPlaneEndpoint.host} {.status.apiServerLoadBalancer.ip}")
	if f := strings.Fields(endpoint); len(f) != 2 || f[0] != f[1] {
		t.Errorf("the cluster's endpoint and its load balancer's floating IP: %q, want the same", endpoint)
	}
	zones := strings.Fields(kubectl(t, kc, "-n", "cluster-init", "get", "machines", "-l", "cluster.x-k8s.io/control-plane", "-o", "jsonpath={.items[*].spec.failureDomain}"))
	slices.Sort(zones)
	if !slices.Equal(zones, simulator.AvailabilityZones()) {
		t.Errorf("the control plane machines' failure domains: %v, want one in each zone %v", zones, simulator.AvailabilityZones())
	}

	// A worker's server powered off, then another's in ERROR: each replaced by its health check.
	// One at a time: past 40% of the workers unhealthy at once (here, both), the check replaces
	// none, the fault likely not theirs (high-availability.md).
	for i, status := range []string{"SHUTOFF", "ERROR"} {
		workers := runningMachinesOf(clusterMachines(t, kc, "cluster-init", "management"), false)
		if len(workers) != 2 {
			t.Fatalf("workers before the %s fault: %v", status, workers)
		}
		lost := workers[i%len(workers)]
		if err := sim.Cloud.Inject(cloud.Fault{Kind: "server-state", Name: lost.Node, Status: status}); err != nil {
			t.Fatal(err)
		}
		lostAt := time.Now()
		shown := ""
		waitExplained(t, 20*time.Minute, "worker "+lost.Name+" replaced", func() bool {
			if shown == "" {
				shown = unhealthyIn(statusOf(dir), lost.Name)
			}
			ms := clusterMachines(t, kc, "cluster-init", "management")
			if slices.ContainsFunc(ms, func(m clusterMachine) bool { return m.Name == lost.Name }) {
				return false
			}
			running := runningMachinesOf(ms, false)
			if len(running) != 2 {
				return false
			}
			for _, m := range running {
				if kubectlQuiet(kc, "get", "node", m.Node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`) != "True" {
					return false
				}
			}
			return true
		}, func() string {
			return kubectlQuiet(kc, "-n", "cluster-init", "get", "machines,machinehealthchecks", "-o", "wide")
		})
		took["a worker's server "+status+" -> replaced, its node Ready"] = time.Since(lostAt)
		t.Logf("worker %s, its server %s: replaced in %s; status showed: %s", lost.Name, status, time.Since(lostAt).Round(time.Second), shown)
		if shown == "" {
			t.Errorf("bootstrap status never showed %s unhealthy", lost.Name)
		}
	}
	if got := servers(sim); len(got["ACTIVE"]) != 5 || len(got) != 1 {
		t.Errorf("servers after the replacements: %v, want 5 ACTIVE and no other", got)
	}
	if members, cps := lbMemberAddresses(sim), controlPlaneAddresses(t, kc); !slices.Equal(members, cps) {
		t.Errorf("after the workers' replacement: members %v, control plane %v", members, cps)
	}

	// Cleanup: taken back into kind, deleted there; nothing left on the cloud.
	c := bootstrap(t, ctx, nil, append([]string{"cleanup", dir}, args...)...)
	if c.err != nil {
		t.Fatalf("cleanup: %v", c.err)
	}
	took["cleanup (taken back into kind)"] = c.wall
	if left := sim.Cloud.Resources(); len(left) > 0 {
		t.Errorf("left on the cloud after cleanup: %+v", left)
	}
	for _, label := range []string{"cluster-init.dev/openstack-server", "cluster-init.dev/openstack-loadbalancer"} {
		if out, _ := exec.Command("docker", "ps", "-a", "--quiet", "--filter", "label="+label).Output(); strings.TrimSpace(string(out)) != "" {
			t.Errorf("containers (%s) left after cleanup: %s", label, out)
		}
	}
	reportCloud(t, sim.Cloud, took)
}
