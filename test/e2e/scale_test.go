//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// scaleClusters is how many workload clusters one commit adds: what CAPD runs on the test bed's
// machine (one control-plane machine each).
const scaleClusters = 10

// Ten workload clusters from one commit: all Available with their CNI Ready, then all deleted by
// one commit. The management cluster keeps up (no unit or tenant Kustomization left failing),
// and `bootstrap status` stays fast; the wall times, the management cluster's peak memory and
// status's time are reported.
func TestTenWorkloadClustersFromOneCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Minute)
	defer cancel()
	r, _ := bootstrapFromGit(t, ctx, func(r *repository) {
		values := readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
		r.write(t, "environment-values/"+env+"/values.yaml", values+fmt.Sprintf(
			"workload_clusters:\n  default_limits:\n    clusters: %d\n    workers_replicas: 0\n    machines: %d\n", scaleClusters, 2*scaleClusters))
	})
	kc := managementKubeconfig()
	used := sampleUsage(t, "management")

	names := make([]string, scaleClusters)
	for i := range names {
		names[i] = "s" + strconv.Itoa(i+1)
		r.write(t, filepath.Join("clusters/management/workload-clusters", names[i], "cluster.yaml"),
			strings.Replace(workloadCluster(names[i], "", ""), "      workers:\n        replicas: 1\n", "      workers:\n        replicas: 0\n", 1))
	}
	pushed := r.commit(t, fmt.Sprintf("%d workload clusters", scaleClusters))
	waitExplained(t, 45*time.Minute, fmt.Sprintf("%d workload clusters Available", scaleClusters), func() bool {
		return countTrue(kubectlQuiet(kc, "-n", "workload-clusters", "get", "clusters", "-o",
			`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Available")].status}{"\n"}{end}`)) == scaleClusters
	}, func() string { return clustersState(kc, "workload-clusters", 12) })
	available := time.Since(pushed).Round(time.Second)
	cni := make([]string, 0, scaleClusters)
	for _, n := range names {
		cni = append(cni, n+"-cni")
	}
	waitExplained(t, 20*time.Minute, "the CNI of every cluster Ready", func() bool {
		return countTrue(kubectlQuiet(kc, append([]string{"-n", "workload-clusters", "get", "kustomization", "-o",
			`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`}, cni...)...)) == scaleClusters
	}, func() string { return clustersState(kc, "workload-clusters", 12) })
	ready := time.Since(pushed).Round(time.Second)
	t.Logf("push -> %d workload clusters Available: %s; their CNI Ready: %s (Receiver)", scaleClusters, available, ready)

	// The management cluster kept up: every unit and the tenant's Kustomization ready. (The
	// clusters' own units that need a worker, metrics-server, wait: they have none.)
	expectKustomizationsReady(t, kc, fmt.Sprintf("with %d clusters", scaleClusters), "cluster-init/", "workload-clusters/workload-clusters")
	// Twice: as the clusters' CNI comes up (the machine at its busiest), and once the management
	// cluster's controllers have settled. Its processor time says what status itself costs: on
	// 2 cores a load of 70 makes any command's wall time about 35 times its processor time.
	for _, when := range []string{"as their CNI came up", "a minute later"} {
		if when == "a minute later" {
			time.Sleep(time.Minute)
		}
		load := "unknown"
		if b, err := os.ReadFile("/proc/loadavg"); err == nil && len(strings.Fields(string(b))) >= 3 {
			load = strings.Join(strings.Fields(string(b))[:3], " ")
		}
		st := bootstrap(t, context.Background(), nil, "status", env, "--repo", r.dir, "--age-key-file", r.key)
		if st.err != nil {
			t.Fatalf("bootstrap status: %v", st.err)
		}
		for _, n := range names {
			if !strings.Contains(st.output.String(), n+": ") {
				t.Errorf("status lacks cluster %s:\n%s", n, st.output.String())
			}
		}
		t.Logf("bootstrap status with %d workload clusters, %s: %s (whole command, its own start included), processor time %s, load average %s",
			scaleClusters, when, st.wall.Round(10*time.Millisecond), st.cpu.Round(10*time.Millisecond), load)
	}

	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(r.dir, "clusters/management/workload-clusters", n)); err != nil {
			t.Fatal(err)
		}
	}
	pushed = r.commit(t, fmt.Sprintf("remove the %d workload clusters", scaleClusters))
	waitFor(t, 30*time.Minute, "every workload cluster and its containers gone", func() bool {
		for _, n := range names {
			if docker(t, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster="+n) != "" {
				return false
			}
		}
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "clusters", "-o", "name") == ""
	})
	t.Logf("push -> %d workload clusters deleted: %s (Receiver)", scaleClusters, time.Since(pushed).Round(time.Second))
	t.Logf("the management cluster's containers over the test: peak memory %s; CPU %s", used.Memory(), used.CPU())
}

// dockerQuiet is docker's output, or "" when it fails (a container gone meanwhile).
func dockerQuiet(args ...string) string {
	out, _ := exec.Command("docker", args...).Output()
	return strings.TrimSpace(string(out))
}

func countTrue(lines string) int {
	n := 0
	for _, l := range strings.Split(lines, "\n") {
		if strings.TrimSpace(l) == "True" {
			n++
		}
	}
	return n
}

// usage is what sampleUsage saw of a cluster's containers.
type usage struct {
	mu sync.Mutex
	// peakMemory is the peak of the containers' memory summed; cpu the containers' CPU summed at
	// each sample, in cores.
	peakMemory float64
	cpu        []float64
}

// Memory is the peak of the containers' memory.
func (u *usage) Memory() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return fmt.Sprintf("%.2f GiB", u.peakMemory/(1<<30))
}

// CPU is the containers' CPU, mean and peak of the samples, in cores.
func (u *usage) CPU() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.cpu) == 0 {
		return "no sample"
	}
	sum, peak := 0.0, 0.0
	for _, c := range u.cpu {
		sum += c
		peak = max(peak, c)
	}
	return fmt.Sprintf("mean %.2f cores, peak %.2f (%d samples)", sum/float64(len(u.cpu)), peak, len(u.cpu))
}

// sampleUsage follows the memory and CPU of a kind/CAPD cluster's containers every 10 s until the
// test ends.
func sampleUsage(t *testing.T, cluster string) *usage {
	t.Helper()
	u := &usage{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ids := strings.Fields(dockerQuiet("ps", "-q", "--filter", "label=io.x-k8s.kind.cluster="+cluster))
			if len(ids) > 0 {
				out := dockerQuiet(append([]string{"stats", "--no-stream", "--format", "{{.CPUPerc}} {{.MemUsage}}"}, ids...)...)
				mem, cpu := 0.0, 0.0
				for _, l := range strings.Split(out, "\n") {
					perc, rest, _ := strings.Cut(l, " ")
					used, _, _ := strings.Cut(rest, " / ")
					mem += parseBytes(strings.TrimSpace(used))
					if f, err := strconv.ParseFloat(strings.TrimSuffix(perc, "%"), 64); err == nil {
						cpu += f / 100
					}
				}
				u.mu.Lock()
				u.peakMemory = max(u.peakMemory, mem)
				u.cpu = append(u.cpu, cpu)
				u.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return u
}

// parseBytes reads docker stats' sizes: 512.3MiB, 1.2GiB, 800KiB, 12B.
func parseBytes(s string) float64 {
	for _, u := range []struct {
		suffix string
		factor float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"B", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0
			}
			return f * u.factor
		}
	}
	return 0
}

// clustersState says what of a namespace's workload clusters is not there yet: how many are
// Available, then each cluster that is not with its phase and Available message, each machine not
// Running, and each Kustomization not Ready (at most limit lines of each).
func clustersState(kc, ns string, limit int) string {
	pick := func(lines string, keep func(string) bool) []string {
		var out []string
		for _, l := range strings.Split(lines, "\n") {
			if l != "" && keep(l) {
				out = append(out, "  "+l)
			}
		}
		if len(out) > limit {
			out = append(out[:limit], fmt.Sprintf("  … and %d more", len(out)-limit))
		}
		return out
	}
	clusters := kubectlQuiet(kc, "-n", ns, "get", "clusters", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.phase} Available={.status.conditions[?(@.type=="Available")].status}: {.status.conditions[?(@.type=="Available")].message}{"\n"}{end}`)
	waiting := pick(clusters, func(l string) bool { return !strings.Contains(l, " Available=True:") })
	machines := pick(kubectlQuiet(kc, "-n", ns, "get", "machines", "-o",
		`jsonpath={range .items[*]}machine {.metadata.name} {.status.phase}: {.status.conditions[?(@.type=="Ready")].message}{"\n"}{end}`),
		func(l string) bool { return !strings.Contains(l, " Running:") })
	kustomizations := pick(kubectlQuiet(kc, "-n", ns, "get", "kustomizations", "-o",
		`jsonpath={range .items[*]}kustomization {.metadata.name} Ready={.status.conditions[?(@.type=="Ready")].status}: {.status.conditions[?(@.type=="Ready")].message}{"\n"}{end}`),
		func(l string) bool { return !strings.Contains(l, " Ready=True:") })
	total := len(strings.Split(strings.TrimSpace(clusters), "\n"))
	head := fmt.Sprintf("  %d of %d clusters Available", countTrue(kubectlQuiet(kc, "-n", ns, "get", "clusters", "-o",
		`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Available")].status}{"\n"}{end}`)), total)
	return strings.Join(append(append(append([]string{head}, waiting...), machines...), kustomizations...), "\n")
}

// expectKustomizationsReady fails the test unless the Kustomizations named (namespace/name, or
// namespace/ for all of a namespace) are Ready within 5 minutes: one caught reconciling a
// revision is not stuck, one still not Ready then is, and is named with its message.
func expectKustomizationsReady(t *testing.T, kc, when string, refs ...string) {
	t.Helper()
	var notReady []string
	deadline := time.Now().Add(5 * time.Minute)
	for {
		notReady = nil
		for _, ref := range refs {
			ns, name, _ := strings.Cut(ref, "/")
			args := []string{"-n", ns, "get", "kustomizations", "-o",
				`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}: {.status.conditions[?(@.type=="Ready")].message}{"\n"}{end}`}
			if name != "" {
				args = []string{"-n", ns, "get", "kustomization", name, "-o",
					`jsonpath={.metadata.name}={.status.conditions[?(@.type=="Ready")].status}: {.status.conditions[?(@.type=="Ready")].message}`}
			}
			for _, l := range strings.Split(kubectlQuiet(kc, args...), "\n") {
				if l != "" && !strings.Contains(l, "=True: ") {
					notReady = append(notReady, ns+"/"+l)
				}
			}
		}
		if len(notReady) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Second)
	}
	for _, l := range notReady {
		t.Errorf("Kustomization %s, not Ready %s after 5 minutes", l, when)
	}
}
