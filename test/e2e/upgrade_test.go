//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"cluster-init.dev/cluster-init/internal/upgrades"
	"cluster-init.dev/cluster-init/internal/versions"
)

// The test bed's two Kubernetes minors and two Cluster API sets, read from tools/versions.env by
// TestMain: the pinned ones and the ones before them (KUBERNETES_PREVIOUS_VERSION, whose node
// image tools/testbed builds, and CLUSTER_API_PREVIOUS_VERSION, vendored in
// kustomize-components/*/upstream-previous/ and built with it).
var olderVersion, newerVersion, olderClusterAPI, newerClusterAPI string

// loadUpgradePins sets them from the checkout's pins.
func loadUpgradePins(root string) error {
	pins, err := versions.Load(root)
	if err != nil {
		return err
	}
	for target, key := range map[*string]string{&olderVersion: "KUBERNETES_PREVIOUS_VERSION", &newerVersion: "KUBERNETES_VERSION",
		&olderClusterAPI: "CLUSTER_API_PREVIOUS_VERSION", &newerClusterAPI: "CLUSTER_API_VERSION"} {
		if *target, err = pins.Get(key); err != nil {
			return err
		}
	}
	return nil
}

// clusterAPIUnits are the units that install the Cluster API set the test moves between.
var clusterAPIUnits = []string{"capi", "cabpk", "capd"}

// clusterAPIProviders are the controllers of the set: namespace/Deployment.
var clusterAPIProviders = []string{
	"capi-system/capi-controller-manager",
	"capi-kubeadm-bootstrap-system/capi-kubeadm-bootstrap-controller-manager",
	"capi-kubeadm-control-plane-system/capi-kubeadm-control-plane-controller-manager",
	"capd-system/capd-controller-manager",
}

// useClusterAPISet points the Cluster API units of the working copy at a vendored set: what a
// commit of a newer (or, at the start, the older) release of the platform repository changes.
func useClusterAPISet(t *testing.T, r *repository, from, to string) {
	t.Helper()
	for _, unit := range clusterAPIUnits {
		rel := filepath.Join("kustomize-components", unit, "kustomization.yaml")
		k := readFile(t, filepath.Join(r.dir, rel))
		if !strings.Contains(k, "- "+from+"/") {
			t.Fatalf("%s lists no %s/ manifests", rel, from)
		}
		r.write(t, rel, strings.ReplaceAll(k, "- "+from+"/", "- "+to+"/"))
	}
}

// providerImages maps each Cluster API controller to the image it runs and whether its rollout
// is complete.
func providerImages(kc string) map[string]string {
	out := map[string]string{}
	for _, nd := range clusterAPIProviders {
		ns, name, _ := strings.Cut(nd, "/")
		out[nd] = kubectlQuiet(kc, "-n", ns, "get", "deployment", name, "-o",
			`jsonpath={.spec.template.spec.containers[0].image} {.status.updatedReplicas}/{.status.availableReplicas}/{.status.replicas}`)
	}
	return out
}

// unmigratedCRDs lists every Cluster API CustomResourceDefinition whose API server still stores
// objects in a version other than its storage version (status.storedVersions).
func unmigratedCRDs(t *testing.T, kc string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(kubectl(t, kc, "get", "crds", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.storedVersions} {.spec.versions[?(@.storage==true)].name}{"\n"}{end}`), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && strings.Contains(f[0], "cluster.x-k8s.io") && f[1] != `["`+f[2]+`"]` {
			out = append(out, line)
		}
	}
	return out
}

// rollingHello: two replicas that a drain moves one at a time (their disruption budget), and a
// Service the probe calls through the API server.
const rollingHello = `apiVersion: v1
kind: Namespace
metadata:
  name: hello
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: hello
  namespace: hello
spec:
  replicas: 2
  selector:
    matchLabels: {app: hello}
  template:
    metadata:
      labels: {app: hello}
    spec:
      containers:
        - name: hello
          image: cluster-init-testbed/hello:v1
          args: [--cluster=wl1]
          ports:
            - containerPort: 8080
          readinessProbe:
            httpGet: {path: /healthz, port: 8080}
            periodSeconds: 2
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: hello
  namespace: hello
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: hello}
---
apiVersion: v1
kind: Service
metadata:
  name: hello
  namespace: hello
spec:
  selector: {app: hello}
  ports:
    - port: 80
      targetPort: 8080
`

// probe calls, every second, an API server (through its load balancer: the kubeconfig's server)
// and the hello Service of the workload cluster (through the workload cluster's API server).
type probe struct {
	name     string
	mu       sync.Mutex
	total    map[string]int
	failed   map[string]int
	firstErr map[string]string
	failedAt map[string][]time.Time
	stop     context.CancelFunc
	done     chan struct{}
}

func restClient(t *testing.T, kubeconfig string) rest.Interface {
	t.Helper()
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 2 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs.CoreV1().RESTClient()
}

// startProbe probes targets (what -> kubeconfig, path) every second until stopped.
func startProbe(t *testing.T, name string, targets map[string][2]string) *probe {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &probe{name: name, total: map[string]int{}, failed: map[string]int{}, firstErr: map[string]string{}, failedAt: map[string][]time.Time{}, stop: cancel, done: make(chan struct{})}
	clients := map[string]rest.Interface{}
	for what, target := range targets {
		clients[what] = restClient(t, target[0])
	}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var wg sync.WaitGroup
			for what, target := range targets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
					defer rcancel()
					_, err := clients[what].Get().AbsPath(target[1]).DoRaw(rctx)
					if ctx.Err() != nil {
						return
					}
					p.mu.Lock()
					defer p.mu.Unlock()
					p.total[what]++
					if err != nil {
						p.failed[what]++
						p.failedAt[what] = append(p.failedAt[what], time.Now())
						if p.firstErr[what] == "" {
							p.firstErr[what] = err.Error()
						}
					}
				}()
			}
			wg.Wait()
		}
	}()
	return p
}

// finish stops the probe and logs its failed requests.
func (p *probe) finish(t *testing.T) map[string]int {
	t.Helper()
	p.stop()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, what := range slices.Sorted(func(yield func(string) bool) {
		for k := range p.total {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Logf("%s: probe of %s: %d of %d requests failed%s%s", p.name, what, p.failed[what], p.total[what],
			map[bool]string{true: " (first: " + p.firstErr[what] + ")", false: ""}[p.failed[what] > 0], windows(p.failedAt[what]))
	}
	return p.failed
}

// windows sums up failure times as the spans of failures less than 3 s apart: when the probe
// failed, not only how often.
func windows(at []time.Time) string {
	if len(at) == 0 {
		return ""
	}
	var spans []string
	start, last, n := at[0], at[0], 1
	flush := func() {
		spans = append(spans, fmt.Sprintf("%s+%s (%d)", start.Format(time.TimeOnly), last.Sub(start).Round(time.Second), n))
	}
	for _, t := range at[1:] {
		if t.Sub(last) > 3*time.Second {
			flush()
			start, n = t, 0
		}
		last = t
		n++
	}
	flush()
	return "; failing at " + strings.Join(spans, ", ")
}

// machine is one Machine of a roll as the watch saw it.
type machine struct {
	Name         string
	ControlPlane bool
	Version      string
	Created      time.Time
	Running      time.Time // first seen Running
}

// roll follows a cluster's machines until every one runs version and their count is replicas; it
// returns every machine seen and when the control plane's last machine of another version went.
func roll(t *testing.T, kc, ns, cluster, version string, replicas int, timeout time.Duration) (map[string]*machine, time.Time) {
	t.Helper()
	seen := map[string]*machine{}
	var cpDone time.Time
	deadline := time.Now().Add(timeout)
	for {
		out := kubectlQuiet(kc, "-n", ns, "get", "machines", "-l", "cluster.x-k8s.io/cluster-name="+cluster, "-o", "json")
		var list struct {
			Items []struct {
				Metadata struct {
					Name              string            `json:"name"`
					CreationTimestamp time.Time         `json:"creationTimestamp"`
					Labels            map[string]string `json:"labels"`
				} `json:"metadata"`
				Spec struct {
					Version string `json:"version"`
				} `json:"spec"`
				Status struct {
					Phase string `json:"phase"`
				} `json:"status"`
			} `json:"items"`
		}
		if json.Unmarshal([]byte(out), &list) == nil && len(list.Items) > 0 {
			now := time.Now()
			done, oldControlPlane := 0, false
			for _, m := range list.Items {
				_, cp := m.Metadata.Labels["cluster.x-k8s.io/control-plane"]
				s := seen[m.Metadata.Name]
				if s == nil {
					s = &machine{Name: m.Metadata.Name, ControlPlane: cp, Version: m.Spec.Version, Created: m.Metadata.CreationTimestamp}
					seen[m.Metadata.Name] = s
				}
				if m.Status.Phase == "Running" && s.Running.IsZero() {
					s.Running = now
				}
				if cp && m.Spec.Version != version {
					oldControlPlane = true
				}
				if m.Spec.Version == version && m.Status.Phase == "Running" {
					done++
				}
			}
			if !oldControlPlane && cpDone.IsZero() {
				cpDone = now
			}
			if done == replicas && len(list.Items) == replicas {
				return seen, cpDone
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for the machines of %s at %s: %s", timeout, cluster, version, kubectlQuiet(kc, "-n", ns, "get", "machines", "-o", "wide"))
		}
		time.Sleep(2 * time.Second)
	}
}

// assertRoll checks a roll: every machine of the older version replaced once, the control plane
// first, the workers after it; it logs the time of each new machine.
func assertRoll(t *testing.T, what string, seen map[string]*machine, cpDone time.Time, version string, controlPlanes, workers int) {
	t.Helper()
	var lines []string
	newCP, newW := 0, 0
	for _, m := range seen {
		if m.Version != version {
			continue
		}
		role := "worker"
		if m.ControlPlane {
			role = "control plane"
			newCP++
		} else {
			newW++
			// Created after the control plane's roll (2 s: the watch's period, 1 s: timestamps).
			if m.Created.Before(cpDone.Add(-3 * time.Second)) {
				t.Errorf("%s: worker %s created at %s, before the control plane's roll ended at %s", what, m.Name, m.Created.Format(time.TimeOnly), cpDone.Format(time.TimeOnly))
			}
		}
		lines = append(lines, fmt.Sprintf("%s %s: created %s, Running after %s", role, m.Name, m.Created.Format(time.TimeOnly), m.Running.Sub(m.Created).Round(time.Second)))
	}
	sort.Strings(lines)
	for _, l := range lines {
		t.Logf("%s: %s", what, l)
	}
	if newCP != controlPlanes || newW != workers {
		t.Errorf("%s: %d control plane and %d worker machines made at %s, want %d and %d (each replaced once)", what, newCP, newW, version, controlPlanes, workers)
	}
}

// nodeVersions lists the kubelet versions of a cluster's nodes.
func nodeVersions(kubeconfig string) []string {
	v := strings.Fields(kubectlQuiet(kubeconfig, "get", "nodes", "-o", "jsonpath={.items[*].status.nodeInfo.kubeletVersion}"))
	slices.Sort(v)
	return slices.Compact(v)
}

// capiObjects lists every Cluster API object that must neither come nor go in a roll.
func capiObjects(t *testing.T, kc string) []string {
	t.Helper()
	return strings.Fields(kubectl(t, kc, "get", "clusters.cluster.x-k8s.io,kubeadmcontrolplanes,machinedeployments,dockerclusters", "-A", "-o",
		`jsonpath={range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name}/{.metadata.uid}{"\n"}{end}`))
}

// upgradePlan runs `bootstrap upgrade plan` on the repository's environment and logs its table.
func upgradePlan(t *testing.T, r *repository, when string) upgrades.Plan {
	t.Helper()
	run := func(format string) []byte {
		cmd := exec.Command(binary, "upgrade", "plan", env, "--repo", r.dir, "--age-key-file", r.key, "-o", format)
		cmd.Dir, cmd.Env = repo, append(os.Environ(), "CLUSTER_INIT_STATE_DIR="+state.Path)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bootstrap upgrade plan %s: %v", when, err)
		}
		return out
	}
	t.Logf("bootstrap upgrade plan, %s:\n%s", when, run("table"))
	var p upgrades.Plan
	if err := json.Unmarshal(run("json"), &p); err != nil {
		t.Fatalf("bootstrap upgrade plan -o json %s: %v", when, err)
	}
	return p
}

// planStep is what the plan says of a cluster: its asked version and action.
func planStep(p upgrades.Plan, ns, name string) string {
	for _, c := range p.Clusters {
		if c.Namespace == ns && c.Name == name {
			return c.Asked + " " + c.Action
		}
	}
	return "missing"
}

// Upgrades by commits only, from a platform at the test bed's older Kubernetes minor and the
// previous Cluster API set: a workload cluster, then the management cluster itself (a
// self-hosted roll), each to the pinned minor, then the Cluster API set to the pinned one; the
// steps the rules refuse change nothing and say why.
func TestClustersAreUpgradedByCommits(t *testing.T) {
	requireEveryTestbedImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Minute)
	defer cancel()
	r, _ := bootstrapFromGit(t, ctx, func(r *repository) {
		useClusterAPISet(t, r, "upstream", "upstream-previous")
		values := readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
		values = strings.Replace(values, "kubernetes_version: "+newerVersion, "kubernetes_version: "+olderVersion, 1)
		r.write(t, "environment-values/"+env+"/values.yaml", values+
			"workload_clusters:\n  kubernetes_versions: ["+olderVersion+", "+newerVersion+"]\n")
	})
	kc := managementKubeconfig()
	if got := nodeVersions(kc); !slices.Equal(got, []string{olderVersion}) {
		t.Fatalf("the management cluster's nodes run %v, want %s", got, olderVersion)
	}
	for nd, img := range providerImages(kc) {
		if !strings.Contains(img, ":"+olderClusterAPI+" ") {
			t.Fatalf("%s runs %q, want the previous Cluster API set (%s)", nd, img, olderClusterAPI)
		}
	}
	const dir = "clusters/management/workload-clusters"
	wl1 := func(version string) string {
		return workloadCluster("wl1", "", "      kubernetes_version: "+version+"\n")
	}
	r.write(t, filepath.Join(dir, "wl1", "cluster.yaml"), wl1(olderVersion))
	pushed := r.commit(t, "wl1 at "+olderVersion)
	fetchTenantSources(t, kc)
	waitFor(t, 20*time.Minute, "wl1 Available", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "cluster", "wl1", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`) == "True"
	})
	t.Logf("push -> wl1 at %s Available: %s", olderVersion, time.Since(pushed).Round(time.Second))

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
	objects := capiObjects(t, kc)
	plan := upgradePlan(t, r, "before the rolls")
	if got := planStep(plan, "workload-clusters", "wl1"); got != olderVersion+" "+upgrades.UpToDate {
		t.Errorf("the plan before the rolls says wl1: %s", got)
	}
	if got := planStep(plan, "cluster-init", "management"); got != olderVersion+" "+upgrades.UpToDate {
		t.Errorf("the plan before the rolls says management: %s", got)
	}

	// 1. The workload cluster, by a commit to its file.
	p := startProbe(t, "wl1 "+olderVersion+" -> "+newerVersion, map[string][2]string{"wl1 API server": {wlkc, "/readyz"}, "wl1 hello Service": {wlkc, helloPath}})
	r.write(t, filepath.Join(dir, "wl1", "cluster.yaml"), wl1(newerVersion))
	pushed = r.commit(t, "wl1 to "+newerVersion)
	fetchTenantSources(t, kc)
	seen, cpDone := roll(t, kc, "workload-clusters", "wl1", newerVersion, 2, 30*time.Minute)
	t.Logf("push -> wl1 rolled to %s: %s", newerVersion, time.Since(pushed).Round(time.Second))
	p.finish(t)
	assertRoll(t, "wl1", seen, cpDone, newerVersion, 1, 1)
	waitFor(t, 5*time.Minute, "wl1's nodes at "+newerVersion, func() bool {
		return slices.Equal(nodeVersions(wlkc), []string{newerVersion})
	})
	if got := kubectlQuiet(wlkc, "-n", "hello", "get", "deployment", "hello", "-o", "jsonpath={.status.availableReplicas}"); got != "2" {
		t.Errorf("hello in wl1 after the roll: %q available", got)
	}

	// 2. Steps the rules refuse: a downgrade (the chart, from the running control plane) and a
	// version the platform does not offer (the tenant's admission policy). Neither changes a machine.
	machines := kubectl(t, kc, "-n", "workload-clusters", "get", "machines", "-o", "name")
	r.write(t, filepath.Join(dir, "wl1", "cluster.yaml"), wl1(olderVersion))
	pushed = r.commit(t, "wl1 back to "+olderVersion)
	fetchTenantSources(t, kc)
	var message string
	waitFor(t, 6*time.Minute, "the downgrade refused", func() bool {
		message = kubectlQuiet(kc, "-n", "workload-clusters", "get", "helmrelease", "wl1-cluster", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		return strings.Contains(message, "a downgrade is not supported")
	})
	t.Logf("downgrade refused in %s: %.200s", time.Since(pushed).Round(time.Second), message)
	if got := planStep(upgradePlan(t, r, "with the downgrade committed"), "workload-clusters", "wl1"); got != olderVersion+" "+upgrades.Refused {
		t.Errorf("the plan with the downgrade committed says wl1: %s", got)
	}
	r.write(t, filepath.Join(dir, "wl1", "cluster.yaml"), wl1("v1.38.0"))
	pushed = r.commit(t, "wl1 to an unknown version")
	fetchTenantSources(t, kc)
	waitFor(t, 3*time.Minute, "the unknown version refused", func() bool {
		message = kubectlQuiet(kc, "-n", "workload-clusters", "get", "kustomization", "workload-clusters", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		return strings.Contains(message, "kubernetes_version: expected one of "+olderVersion+","+newerVersion)
	})
	t.Logf("unknown version refused in %s: %.200s", time.Since(pushed).Round(time.Second), message)
	r.write(t, filepath.Join(dir, "wl1", "cluster.yaml"), wl1(newerVersion))
	r.commit(t, "wl1 at "+newerVersion+" again")
	fetchTenantSources(t, kc)
	waitFor(t, 6*time.Minute, "wl1-cluster Ready again", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "helmrelease", "wl1-cluster", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`) == "True"
	})
	if now := kubectl(t, kc, "-n", "workload-clusters", "get", "machines", "-o", "name"); now != machines {
		t.Errorf("the refused commits changed wl1's machines: %s -> %s", machines, now)
	}

	// 3. The management cluster itself, by a commit to its environment's values: its own
	// controllers roll the machines they run on.
	wlMachines := kubectl(t, kc, "-n", "workload-clusters", "get", "machines", "-o", "name")
	p = startProbe(t, "management "+olderVersion+" -> "+newerVersion, map[string][2]string{"management API server": {kc, "/readyz"}, "wl1 hello Service": {wlkc, helloPath}})
	values := readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
	r.write(t, "environment-values/"+env+"/values.yaml", strings.Replace(values, "kubernetes_version: "+olderVersion, "kubernetes_version: "+newerVersion, 1))
	if got := planStep(upgradePlan(t, r, "with the management cluster's new version in the checkout"), "cluster-init", "management"); got != newerVersion+" "+upgrades.Upgrade {
		t.Errorf("the plan before the management cluster's commit says: %s", got)
	}
	pushed = r.commit(t, "management to "+newerVersion)
	kubectlQuiet(kc, "-n", "cluster-init", "annotate", "--overwrite", "gitrepository", "cluster-init", "reconcile.fluxcd.io/requestedAt="+time.Now().Format(time.RFC3339Nano))
	seen, cpDone = roll(t, kc, "cluster-init", "management", newerVersion, 2, 40*time.Minute)
	t.Logf("push -> management rolled to %s: %s", newerVersion, time.Since(pushed).Round(time.Second))
	p.finish(t)
	assertRoll(t, "management", seen, cpDone, newerVersion, 1, 1)
	waitFor(t, 5*time.Minute, "the management cluster's nodes at "+newerVersion, func() bool {
		return slices.Equal(nodeVersions(kc), []string{newerVersion})
	})
	waitFor(t, 10*time.Minute, "the management cluster's units Ready after its roll", func() bool {
		states := strings.Fields(kubectlQuiet(kc, "-n", "cluster-init", "get", "kustomizations", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`))
		return len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return !strings.HasSuffix(s, "=True") })
	})
	if now := kubectl(t, kc, "-n", "workload-clusters", "get", "machines", "-o", "name"); now != wlMachines {
		t.Errorf("the management cluster's roll changed wl1's machines: %s -> %s", wlMachines, now)
	}
	plan = upgradePlan(t, r, "after the rolls")
	for _, c := range plan.Clusters {
		if c.Action != upgrades.UpToDate || c.Asked != newerVersion {
			t.Errorf("the plan after the rolls says %s/%s: %s %s", c.Namespace, c.Name, c.Asked, c.Action)
		}
	}
	for _, c := range plan.Components {
		if c.Action != upgrades.UpToDate {
			t.Errorf("the plan after the rolls says component %s %s: %s (%s, checkout %s)", c.Unit, c.Deployment, c.Action, c.Running, c.Checkout)
		}
	}
	if now := capiObjects(t, kc); !slices.Equal(now, objects) {
		t.Errorf("Cluster API objects came or went in the rolls: %v -> %v", objects, now)
	}

	// 4. The components: the pinned Cluster API set in place of the previous one, by one commit.
	// Nothing of the clusters is replaced; the stored objects end in the storage version.
	mgmtMachines := kubectl(t, kc, "-n", "cluster-init", "get", "machines", "-o", "name")
	wlMachines = kubectl(t, kc, "-n", "workload-clusters", "get", "machines", "-o", "name")
	useClusterAPISet(t, r, "upstream-previous", "upstream")
	plan = upgradePlan(t, r, "with the pinned Cluster API set in the checkout")
	upgrading := 0
	for _, c := range plan.Components {
		want := upgrades.UpToDate
		if slices.Contains(clusterAPIUnits, c.Unit) {
			want, upgrading = upgrades.Upgrade, upgrading+1
		}
		if c.Action != want {
			t.Errorf("the plan before the components' commit says %s %s: %s %s, want %s", c.Unit, c.Deployment, c.Action, c.Reason, want)
		}
	}
	if upgrading != len(clusterAPIProviders) {
		t.Errorf("the plan before the components' commit upgrades %d controllers, want %d", upgrading, len(clusterAPIProviders))
	}
	p = startProbe(t, "Cluster API "+olderClusterAPI+" -> "+newerClusterAPI, map[string][2]string{
		"management API server": {kc, "/readyz"}, "wl1 API server": {wlkc, "/readyz"}, "wl1 hello Service": {wlkc, helloPath}})
	pushed = r.commit(t, "Cluster API "+newerClusterAPI)
	kubectlQuiet(kc, "-n", "cluster-init", "annotate", "--overwrite", "gitrepository", "cluster-init", "reconcile.fluxcd.io/requestedAt="+time.Now().Format(time.RFC3339Nano))
	rolledOut := map[string]time.Duration{}
	waitFor(t, 20*time.Minute, "every Cluster API controller at "+newerClusterAPI, func() bool {
		for nd, img := range providerImages(kc) {
			f := strings.Fields(img)
			if _, seen := rolledOut[nd]; !seen && len(f) == 2 && strings.HasSuffix(f[0], ":"+newerClusterAPI) && f[1] == "1/1/1" {
				rolledOut[nd] = time.Since(pushed).Round(time.Second)
			}
		}
		return len(rolledOut) == len(clusterAPIProviders)
	})
	t.Logf("push -> Cluster API controllers at %s: %v", newerClusterAPI, rolledOut)
	waitFor(t, 10*time.Minute, "the management cluster's units Ready after the components' upgrade", func() bool {
		states := strings.Fields(kubectlQuiet(kc, "-n", "cluster-init", "get", "kustomizations", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`))
		return len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return !strings.HasSuffix(s, "=True") })
	})
	// Let the new controllers reconcile every object once (a roll would start now if any did).
	time.Sleep(90 * time.Second)
	t.Logf("push -> the components' upgrade settled: %s", time.Since(pushed).Round(time.Second))
	p.finish(t)
	if got := strings.Fields(kubectl(t, kc, "get", "providers.clusterctl.cluster.x-k8s.io", "-A", "-o", `jsonpath={range .items[*]}{.metadata.name}={.version}{"\n"}{end}`)); len(got) != len(clusterAPIProviders) ||
		slices.ContainsFunc(got, func(s string) bool { return !strings.HasSuffix(s, "="+newerClusterAPI) }) {
		t.Errorf("clusterctl's inventory after the upgrade: %v, want %d providers at %s", got, len(clusterAPIProviders), newerClusterAPI)
	}
	if got := unmigratedCRDs(t, kc); len(got) > 0 {
		t.Errorf("Cluster API CustomResourceDefinitions still storing objects in another version than their storage version: %v", got)
	}
	if now := kubectl(t, kc, "-n", "cluster-init", "get", "machines", "-o", "name"); now != mgmtMachines {
		t.Errorf("the components' upgrade replaced the management cluster's machines: %s -> %s", mgmtMachines, now)
	}
	if now := kubectl(t, kc, "-n", "workload-clusters", "get", "machines", "-o", "name"); now != wlMachines {
		t.Errorf("the components' upgrade replaced wl1's machines: %s -> %s", wlMachines, now)
	}
	if now := capiObjects(t, kc); !slices.Equal(now, objects) {
		t.Errorf("Cluster API objects came or went in the components' upgrade: %v -> %v", objects, now)
	}
	for _, cl := range []string{"management", "wl1"} {
		ns := map[string]string{"management": "cluster-init", "wl1": "workload-clusters"}[cl]
		if got := kubectlQuiet(kc, "-n", ns, "get", "cluster", cl, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`); got != "True" {
			t.Errorf("cluster %s after the components' upgrade: Available=%q", cl, got)
		}
	}
	if got := kubectlQuiet(wlkc, "-n", "hello", "get", "deployment", "hello", "-o", "jsonpath={.status.availableReplicas}"); got != "2" {
		t.Errorf("hello in wl1 after the components' upgrade: %q available", got)
	}
	for _, c := range upgradePlan(t, r, "after the components' upgrade").Components {
		if c.Action != upgrades.UpToDate {
			t.Errorf("the plan after the components' upgrade says %s %s: %s (%s, checkout %s)", c.Unit, c.Deployment, c.Action, c.Running, c.Checkout)
		}
	}
}

// A standalone cluster upgraded by `bootstrap upgrade ENV --kubernetes-version`: the steps the
// rules refuse are refused in seconds with nothing created; the next minor rolls every machine,
// the control plane first, with the API server answering through its load balancer.
func TestAStandaloneClusterIsUpgraded(t *testing.T) {
	requireEveryTestbedImage(t)
	cleanStandalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()

	older := writeValues(t, "cluster:\n  kubernetes_version: "+olderVersion+"\n")
	r := bootstrap(t, ctx, nil, env, "--standalone", "--values", testbedVs, "--values", older, "--output", "plain")
	r.report(t, "bootstrap "+env+" --standalone at "+olderVersion)
	if r.err != nil {
		t.Fatalf("bootstrap --standalone: %v", r.err)
	}
	kc := filepath.Join(standaloneDir(), "kubeconfig")
	if got := nodeVersions(kc); !slices.Equal(got, []string{olderVersion}) {
		t.Fatalf("the standalone cluster's nodes run %v, want %s", got, olderVersion)
	}
	ca := servedCA(t, kc)
	before := clusterContainers(t)

	for version, says := range map[string]string{"v1.36.1": "a downgrade is not supported", "v1.38.0": "one minor at a time", "v1.37": "not a version"} {
		r := bootstrap(t, ctx, nil, "upgrade", env, "--kubernetes-version", version, "--output", "plain")
		if r.err == nil || r.wall > 20*time.Second || !strings.Contains(r.output.String(), says) {
			t.Errorf("upgrade to %s: %v after %s, want a refusal in seconds saying %q: %s", version, r.err, r.wall, says, r.output.String())
		}
		assertNoBootstrapCluster(t)
	}
	if st := assertStandaloneState(t, false); st["kubernetes_version"] != olderVersion {
		t.Errorf("the refusals changed the state: %v", st["kubernetes_version"])
	}

	p := startProbe(t, "standalone "+olderVersion+" -> "+newerVersion, map[string][2]string{"API server": {kc, "/readyz"}})
	r = bootstrap(t, ctx, nil, "upgrade", env, "--kubernetes-version", newerVersion, "--output", "plain")
	p.finish(t)
	r.report(t, "upgrade "+env+" --kubernetes-version "+newerVersion)
	if r.err != nil {
		t.Fatalf("upgrade: %v", r.err)
	}
	assertNoBootstrapCluster(t)
	if got := nodeVersions(kc); !slices.Equal(got, []string{newerVersion}) {
		t.Errorf("after the upgrade the nodes run %v, want %s", got, newerVersion)
	}
	after := clusterContainers(t)
	if len(after) != len(before) {
		t.Errorf("containers %v after the upgrade, %v before", after, before)
	}
	for name := range before {
		if _, ok := after[name]; ok && !strings.HasSuffix(name, "-lb") {
			t.Errorf("machine container %s not replaced", name)
		}
	}
	if got := servedCA(t, kc); got != ca {
		t.Error("the cluster's CA changed")
	}
	if st := assertStandaloneState(t, false); st["kubernetes_version"] != newerVersion {
		t.Errorf("state: kubernetes_version %v, want %s", st["kubernetes_version"], newerVersion)
	}
	// The cluster is still managed from its state: a scale after the upgrade keeps its machines.
	r = bootstrap(t, ctx, nil, "scale", env, "--workers", "2", "--output", "plain")
	r.report(t, "scale "+env+" --workers 2 after the upgrade")
	if r.err != nil {
		t.Fatalf("scale after the upgrade: %v", r.err)
	}
	if got := nodeVersions(kc); !slices.Equal(got, []string{newerVersion}) {
		t.Errorf("after the scale the nodes run %v, want %s", got, newerVersion)
	}
}
