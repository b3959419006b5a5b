//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// haValues makes the environment's management cluster highly available: three control plane
// machines behind CAPD's load balancer and two workers (the management cluster's controllers run
// on the workers: one can be lost), and health checks that act after a minute without news of a
// node (the default, five minutes, is for slow machines; a test may shorten it).
func haValues(values string) string {
	for old, new := range map[string]string{
		"  control_plane:\n    replicas: 1\n": "  control_plane:\n    replicas: 3\n",
		"  workers:\n    replicas: 1\n":       "  workers:\n    replicas: 2\n  health_checks:\n    node_unreachable_timeout_seconds: 60\n",
	} {
		if !strings.Contains(values, old) {
			panic("the environment's values have no " + old)
		}
		values = strings.Replace(values, old, new, 1)
	}
	return values
}

// clusterMachine is one Machine as the HA test follows it.
type clusterMachine struct {
	Name, Node, Phase, Version string
	ControlPlane               bool
}

func clusterMachines(t *testing.T, kc, ns, cluster string) []clusterMachine {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Version string `json:"version"`
			} `json:"spec"`
			Status struct {
				Phase   string `json:"phase"`
				NodeRef struct {
					Name string `json:"name"`
				} `json:"nodeRef"`
			} `json:"status"`
		} `json:"items"`
	}
	out := kubectlQuiet(kc, "-n", ns, "get", "machines", "-l", "cluster.x-k8s.io/cluster-name="+cluster, "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil
	}
	var ms []clusterMachine
	for _, i := range list.Items {
		_, cp := i.Metadata.Labels["cluster.x-k8s.io/control-plane"]
		ms = append(ms, clusterMachine{Name: i.Metadata.Name, Node: i.Status.NodeRef.Name, Phase: i.Status.Phase, Version: i.Spec.Version, ControlPlane: cp})
	}
	return ms
}

// runningMachinesOf are the Running machines of one role with a node, by name.
func runningMachinesOf(ms []clusterMachine, controlPlane bool) []clusterMachine {
	var out []clusterMachine
	for _, m := range ms {
		if m.ControlPlane == controlPlane && m.Phase == "Running" && m.Node != "" {
			out = append(out, m)
		}
	}
	return out
}

// etcdMembers asks the etcd of a control plane node (a CAPD container, reached at its address in
// the Docker network with the node's health check client certificate) for its members' names,
// through etcd's JSON gateway: the test bed's etcd image has no etcdctl.
// Errors are returned, not fatal: a wait may ask a node that is going away.
func etcdMembers(node string) ([]string, error) {
	files := map[string][]byte{}
	for _, name := range []string{"ca.crt", "healthcheck-client.crt", "healthcheck-client.key"} {
		out, err := exec.Command("docker", "exec", node, "cat", "/etc/kubernetes/pki/etcd/"+name).Output()
		if err != nil {
			return nil, fmt.Errorf("read %s of node %s: %w", name, node, err)
		}
		files[name] = out
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(files["ca.crt"])
	cert, err := tls.X509KeyPair(files["healthcheck-client.crt"], files["healthcheck-client.key"])
	if err != nil {
		return nil, err
	}
	out, err := exec.Command("docker", "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", node).Output()
	if err != nil {
		return nil, fmt.Errorf("the address of node %s: %w", node, err)
	}
	ip := strings.TrimSpace(string(out))
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: node}}}
	resp, err := client.Post("https://"+ip+":2379/v3/cluster/member/list", "application/json", bytes.NewReader([]byte("{}")))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Members []struct {
			Name string `json:"name"`
		} `json:"members"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("etcd's member list: %s: %w", resp.Status, err)
	}
	var names []string
	for _, m := range list.Members {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names, nil
}

// loseMachine kills a machine's container for good, as a host lost: Docker does not start it again.
func loseMachine(t *testing.T, container string) time.Time {
	t.Helper()
	docker(t, "update", "--restart", "no", container)
	docker(t, "kill", container)
	return time.Now()
}

// waitReplaced waits until the lost machine is gone and its role has want Running machines again,
// each node Ready; while it waits, it looks at `bootstrap status` for the remediation and keeps
// the first line that shows it.
func waitReplaced(t *testing.T, r *repository, kc, ns, cluster string, lost clusterMachine, want int, timeout time.Duration) (shown string) {
	t.Helper()
	waitExplained(t, timeout, "machine "+lost.Name+" replaced", func() bool {
		if shown == "" {
			shown = unhealthyIn(statusOf(env, "--repo", r.dir, "--age-key-file", r.key), lost.Name)
		}
		ms := clusterMachines(t, kc, ns, cluster)
		if slices.ContainsFunc(ms, func(m clusterMachine) bool { return m.Name == lost.Name }) {
			return false
		}
		running := runningMachinesOf(ms, lost.ControlPlane)
		if len(running) != want {
			return false
		}
		for _, m := range running {
			if kubectlQuiet(kc, "get", "node", m.Node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`) != "True" {
				return false
			}
		}
		return true
	}, func() string { return kubectlQuiet(kc, "-n", ns, "get", "machines,machinehealthchecks", "-o", "wide") })
	return shown
}

// statusOf is what `bootstrap status ENV` prints, not logged: a wait looks at it often.
func statusOf(env string, args ...string) string {
	cmd := exec.Command(binary, append([]string{"status", env}, args...)...)
	cmd.Dir, cmd.Env = repo, append(os.Environ(), "CLUSTER_INIT_STATE_DIR="+state.Path)
	out, _ := cmd.Output()
	return string(out)
}

// unhealthyIn is the line of a status that says machine is unhealthy, "" when none does.
func unhealthyIn(status, machine string) string {
	for _, l := range strings.Split(status, "\n") {
		if strings.Contains(l, "machine "+machine+" ") && strings.Contains(l, "unhealthy since") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// atMost checks that a probe's target failed at most pct percent of its requests.
func atMost(t *testing.T, p *probe, target string, pct float64) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if total := p.total[target]; total == 0 || float64(p.failed[target]) > float64(total)*pct/100 {
		t.Errorf("%s: %s failed %d of %d requests, more than %.0f%%", p.name, target, p.failed[target], total, pct)
	}
}

// A self-managed management cluster with three control plane machines, bootstrapped from git
// with the pivot, outlives its own Kubernetes roll and component upgrade by commit, the loss of a
// control plane machine (KubeadmControlPlane replaces it, etcd has three members again) and of a
// worker (its MachineHealthCheck replaces it), and goes from three control plane machines to one
// and back by commit; the management API is probed every second through its load balancer, and
// an application of a workload cluster never stops answering.
func TestAHighlyAvailableManagementCluster(t *testing.T) {
	requireEveryTestbedImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Minute)
	defer cancel()
	r, _ := bootstrapFromGit(t, ctx, func(r *repository) {
		useClusterAPISet(t, r, "upstream", "upstream-previous")
		values := readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
		values = strings.Replace(haValues(values), "kubernetes_version: "+newerVersion, "kubernetes_version: "+olderVersion, 1)
		r.write(t, "environment-values/"+env+"/values.yaml", values+"workload_clusters:\n  kubernetes_versions: ["+olderVersion+", "+newerVersion+"]\n")
	})
	kc := managementKubeconfig()
	const ns, mgmt = "cluster-init", "management"
	cps := runningMachinesOf(clusterMachines(t, kc, ns, mgmt), true)
	if len(cps) != 3 {
		t.Fatalf("after the bootstrap: %d control plane machines running, want 3", len(cps))
	}
	if members, err := etcdMembers(cps[0].Node); err != nil || len(members) != 3 {
		t.Fatalf("after the bootstrap: etcd members %v (%v), want 3", members, err)
	}
	t.Logf("after the bootstrap: machines %s", kubectlQuiet(kc, "-n", ns, "get", "machines", "-o", "wide"))

	// A workload cluster serving an application, probed through its API server for the whole test.
	const dir = "clusters/management/workload-clusters"
	r.write(t, filepath.Join(dir, "wl1", "cluster.yaml"), workloadCluster("wl1", "", "      kubernetes_version: "+newerVersion+"\n"))
	pushed := r.commit(t, "wl1")
	fetchTenantSources(t, kc)
	waitFor(t, 20*time.Minute, "wl1 Available", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "cluster", "wl1", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`) == "True"
	})
	t.Logf("push -> wl1 Available: %s", time.Since(pushed).Round(time.Second))
	wlkc := filepath.Join(t.TempDir(), "wl1.kubeconfig")
	if err := os.WriteFile(wlkc, []byte(kubectl(t, kc, "-n", "workload-clusters", "get", "secret", "wl1-kubeconfig", "-o", "jsonpath={.data.value}")), 0o600); err != nil {
		t.Fatal(err)
	}
	decodeBase64File(t, wlkc)
	manifests := filepath.Join(t.TempDir(), "hello.yaml")
	if err := os.WriteFile(manifests, []byte(rollingHello), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Minute, "hello applied to wl1", func() bool {
		return exec.Command("kubectl", "--kubeconfig", wlkc, "apply", "-f", manifests).Run() == nil
	})
	waitFor(t, 5*time.Minute, "hello answering in wl1", func() bool {
		return kubectlQuiet(wlkc, "-n", "hello", "get", "deployment", "hello", "-o", "jsonpath={.status.availableReplicas}") == "2"
	})
	const helloPath = "/api/v1/namespaces/hello/services/hello:80/proxy/"
	hello := startProbe(t, "hello throughout", map[string][2]string{"wl1 hello Service": {wlkc, helloPath}})
	defer func() {
		if failed := hello.finish(t); failed["wl1 hello Service"] > 0 {
			t.Errorf("the application failed %d requests while the management cluster lost machines and rolled", failed["wl1 hello Service"])
		}
	}()
	managementAPI := func(what string) *probe {
		return startProbe(t, what, map[string][2]string{"management API server": {kc, "/readyz"}})
	}
	settled := func(what string) {
		t.Helper()
		waitFor(t, 15*time.Minute, "the management cluster's units Ready "+what, func() bool {
			states := strings.Fields(kubectlQuiet(kc, "-n", ns, "get", "kustomizations", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`))
			return len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return !strings.HasSuffix(s, "=True") })
		})
	}

	// 1. Its own Kubernetes roll, by commit: one control plane machine at a time behind the load balancer.
	p := managementAPI("management " + olderVersion + " -> " + newerVersion)
	values := readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
	r.write(t, "environment-values/"+env+"/values.yaml", strings.Replace(values, "kubernetes_version: "+olderVersion, "kubernetes_version: "+newerVersion, 1))
	pushed = r.commit(t, "management to "+newerVersion)
	seen, cpDone := roll(t, kc, ns, mgmt, newerVersion, 5, 60*time.Minute)
	t.Logf("push -> management (3 control planes, 2 workers) rolled to %s: %s", newerVersion, time.Since(pushed).Round(time.Second))
	assertRoll(t, "management", seen, cpDone, newerVersion, 3, 2)
	settled("after its roll")
	p.finish(t)
	atMost(t, p, "management API server", 1)

	// 2. The components, by commit: the pinned Cluster API set in place of the previous one.
	machinesBefore := kubectl(t, kc, "-n", ns, "get", "machines", "-o", "name")
	p = managementAPI("Cluster API " + olderClusterAPI + " -> " + newerClusterAPI)
	useClusterAPISet(t, r, "upstream-previous", "upstream")
	pushed = r.commit(t, "Cluster API "+newerClusterAPI)
	waitFor(t, 20*time.Minute, "every Cluster API controller at "+newerClusterAPI, func() bool {
		for _, img := range providerImages(kc) {
			if f := strings.Fields(img); len(f) != 2 || !strings.HasSuffix(f[0], ":"+newerClusterAPI) || f[1] != "1/1/1" {
				return false
			}
		}
		return true
	})
	settled("after the components' upgrade")
	t.Logf("push -> Cluster API controllers at %s: %s", newerClusterAPI, time.Since(pushed).Round(time.Second))
	p.finish(t)
	atMost(t, p, "management API server", 1)
	if now := kubectl(t, kc, "-n", ns, "get", "machines", "-o", "name"); now != machinesBefore {
		t.Errorf("the components' upgrade replaced machines: %s -> %s", machinesBefore, now)
	}

	// 3. A control plane machine lost: its health check finds it, KubeadmControlPlane replaces it,
	// etcd has three members again; the API answers through the other two all along.
	cps = runningMachinesOf(clusterMachines(t, kc, ns, mgmt), true)
	lost := cps[len(cps)-1]
	p = managementAPI("control plane machine " + lost.Name + " lost")
	at := loseMachine(t, lost.Node)
	shown := waitReplaced(t, r, kc, ns, mgmt, lost, 3, 30*time.Minute)
	t.Logf("control plane machine %s lost -> replaced, 3 control plane nodes Ready: %s; status showed: %s", lost.Name, time.Since(at).Round(time.Second), shown)
	if shown == "" {
		t.Errorf("bootstrap status never showed %s unhealthy", lost.Name)
	}
	cps = runningMachinesOf(clusterMachines(t, kc, ns, mgmt), true)
	waitExplained(t, 5*time.Minute, "etcd with three members", func() bool {
		members, err := etcdMembers(cps[0].Node)
		return err == nil && len(members) == 3 && !slices.Contains(members, lost.Node)
	}, func() string { m, err := etcdMembers(cps[0].Node); return fmt.Sprint(m, err) })
	settled("after a control plane machine was replaced")
	p.finish(t)
	atMost(t, p, "management API server", 1)

	// 4. A worker lost (the management cluster's controllers may run on it): its health check replaces it.
	workers := runningMachinesOf(clusterMachines(t, kc, ns, mgmt), false)
	lost = workers[0]
	for _, w := range workers {
		if slices.Contains(strings.Fields(kubectlQuiet(kc, "-n", "capi-system", "get", "pods", "-o", "jsonpath={.items[*].spec.nodeName}")), w.Node) {
			lost = w // the worker that runs Cluster API's controller: the health check's own
		}
	}
	p = managementAPI("worker " + lost.Name + " lost")
	at = loseMachine(t, lost.Node)
	shown = waitReplaced(t, r, kc, ns, mgmt, lost, 2, 30*time.Minute)
	t.Logf("worker %s lost -> replaced, 2 workers Ready: %s; status showed: %s", lost.Name, time.Since(at).Round(time.Second), shown)
	if shown == "" {
		t.Errorf("bootstrap status never showed %s unhealthy", lost.Name)
	}
	settled("after a worker was replaced")
	p.finish(t)
	atMost(t, p, "management API server", 1)

	// 5. From three control plane machines to one by commit, and back.
	for _, n := range []int{1, 3} {
		values = readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
		from := map[int]string{1: "replicas: 3", 3: "replicas: 1"}[n]
		r.write(t, "environment-values/"+env+"/values.yaml", strings.Replace(values, "  control_plane:\n    "+from, fmt.Sprintf("  control_plane:\n    replicas: %d", n), 1))
		pushed = r.commit(t, fmt.Sprintf("%d control plane machines", n))
		waitExplained(t, 30*time.Minute, fmt.Sprintf("%d control plane machines", n), func() bool {
			ms := clusterMachines(t, kc, ns, mgmt)
			cps := runningMachinesOf(ms, true)
			all := 0
			for _, m := range ms {
				if m.ControlPlane {
					all++
				}
			}
			if len(cps) != n || all != n {
				return false
			}
			members, err := etcdMembers(cps[0].Node)
			return err == nil && len(members) == n
		}, func() string { return kubectlQuiet(kc, "-n", ns, "get", "machines", "-o", "wide") })
		t.Logf("push -> %d control plane machines, etcd of %d: %s", n, n, time.Since(pushed).Round(time.Second))
		settled(fmt.Sprintf("with %d control plane machines", n))
	}
	if got := kubectlQuiet(kc, "-n", ns, "get", "cluster", mgmt, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`); got != "True" {
		t.Errorf("the management cluster at the end: Available=%q", got)
	}
}
