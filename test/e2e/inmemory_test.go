//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// inMemoryClusters is how many simulated workload clusters one commit adds: past what CAPD's
// containers can run here, what Cluster API's own scale tests simulate.
const inMemoryClusters = 100

// A hundred workload clusters committed by a tenant whose clusters CAPD simulates in memory
// (workload_clusters.tenants.<namespace>.infrastructure: in-memory): every one Available, with
// the management cluster's controllers keeping up; then all deleted by one commit. Reported: the
// time to each quarter Available (where it bends), the management cluster's memory and CPU,
// Flux's work queues and `bootstrap status` at that size.
func TestAHundredInMemoryWorkloadClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Minute)
	defer cancel()
	r, _ := bootstrapFromGit(t, ctx, func(r *repository) {
		values := readFile(t, filepath.Join(r.dir, "environment-values", env, "values.yaml"))
		r.write(t, "environment-values/"+env+"/values.yaml", values+fmt.Sprintf(
			"workload_clusters:\n  tenants:\n    workload-clusters:\n      infrastructure: in-memory\n      limits:\n        clusters: %d\n        machines: %d\n", inMemoryClusters, 2*inMemoryClusters))
	})
	kc := managementKubeconfig()
	used := sampleUsage(t, "management")
	queues := sampleFluxQueues(t, kc)

	names := make([]string, inMemoryClusters)
	for i := range names {
		names[i] = fmt.Sprintf("sim%03d", i+1)
		r.write(t, filepath.Join("clusters/management/workload-clusters", names[i], "cluster.yaml"), workloadCluster(names[i], "", ""))
	}
	pushed := r.commit(t, fmt.Sprintf("%d in-memory workload clusters", inMemoryClusters))
	var quarters []string
	next := inMemoryClusters / 4
	waitExplained(t, 80*time.Minute, fmt.Sprintf("%d in-memory workload clusters Available", inMemoryClusters), func() bool {
		n := countTrue(kubectlQuiet(kc, "-n", "workload-clusters", "get", "clusters", "-o",
			`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Available")].status}{"\n"}{end}`))
		for n >= next && next <= inMemoryClusters {
			quarters = append(quarters, fmt.Sprintf("%d at %s", next, time.Since(pushed).Round(time.Second)))
			next += inMemoryClusters / 4
		}
		return n == inMemoryClusters
	}, func() string { return clustersState(kc, "workload-clusters", 12) })
	t.Logf("push -> %d in-memory workload clusters Available: %s (%s; Receiver)", inMemoryClusters, time.Since(pushed).Round(time.Second), strings.Join(quarters, ", "))

	// The management cluster kept up: every unit and the tenant's Kustomization ready, and each
	// cluster's own units.
	expectKustomizationsReady(t, kc, fmt.Sprintf("with %d clusters", inMemoryClusters), "cluster-init/", "workload-clusters/")
	for i := range 2 {
		start := time.Now()
		status := bootstrapOK(t, "status", env, "--repo", r.dir, "--age-key-file", r.key)
		took := time.Since(start)
		if i == 0 {
			for _, n := range names {
				if !strings.Contains(status, n+": ") {
					t.Errorf("status lacks cluster %s", n)
				}
			}
		}
		t.Logf("bootstrap status with %d in-memory workload clusters, look %d: %s (whole command, its own start included; %d lines)", inMemoryClusters, i+1, took.Round(10*time.Millisecond), strings.Count(status, "\n"))
	}
	t.Logf("the management cluster's containers with %d clusters: peak memory %s; CPU %s", inMemoryClusters, used.Memory(), used.CPU())
	t.Logf("Flux's work queues while they came: %s", queues())

	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(r.dir, "clusters/management/workload-clusters", n)); err != nil {
			t.Fatal(err)
		}
	}
	pushed = r.commit(t, fmt.Sprintf("remove the %d in-memory workload clusters", inMemoryClusters))
	waitFor(t, 30*time.Minute, "every in-memory workload cluster gone", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "clusters", "-o", "name") == ""
	})
	t.Logf("push -> %d in-memory workload clusters deleted: %s (Receiver)", inMemoryClusters, time.Since(pushed).Round(time.Second))
	t.Logf("the management cluster's containers over the test: peak memory %s; CPU %s", used.Memory(), used.CPU())
	t.Logf("Flux's work queues over the test: %s", queues())
}

// sampleFluxQueues follows the work queues of the management cluster's Flux controllers every
// 10 s (controller-runtime's workqueue_depth, read from each controller's metrics through the API
// server's pod proxy) until the test ends; the function returned says each queue's peak and last
// depth.
func sampleFluxQueues(t *testing.T, kc string) func() string {
	t.Helper()
	var mu sync.Mutex
	peak, last := map[string]float64{}, map[string]float64{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			for _, app := range []string{"source-controller", "kustomize-controller", "helm-controller"} {
				pod := strings.TrimPrefix(kubectlQuiet(kc, "-n", "flux-system", "get", "pods", "-l", "app="+app, "-o", "name"), "pod/")
				if pod == "" || strings.Contains(pod, "\n") {
					continue
				}
				metrics := kubectlQuiet(kc, "get", "--raw", "/api/v1/namespaces/flux-system/pods/"+pod+":8080/proxy/metrics")
				for _, l := range strings.Split(metrics, "\n") {
					rest, ok := strings.CutPrefix(l, "workqueue_depth{")
					if !ok {
						continue
					}
					labels, value, _ := strings.Cut(rest, "} ")
					name := labels
					if i := strings.Index(labels, `name="`); i >= 0 {
						name, _, _ = strings.Cut(labels[i+len(`name="`):], `"`)
					}
					v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
					if err != nil {
						continue
					}
					mu.Lock()
					peak[name] = max(peak[name], v)
					last[name] = v
					mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for name, p := range peak {
			out = append(out, fmt.Sprintf("%s peak %.0f, now %.0f", name, p, last[name]))
		}
		sort.Strings(out)
		if len(out) == 0 {
			return "no metrics read"
		}
		return strings.Join(out, "; ")
	}
}
