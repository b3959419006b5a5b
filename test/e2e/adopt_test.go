//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// adoptedCluster is the kind cluster the test bed makes with kind's own CLI, not bootstrap.
const adoptedCluster = "platform"

// An existing cluster becomes the management cluster: no cluster is created, the units run in
// it, a workload cluster comes from a commit, and cleanup leaves the cluster running without
// anything cluster-init installed.
func TestAdoptAnExistingCluster(t *testing.T) {
	cleanup(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()

	start := time.Now()
	create := exec.Command(filepath.Join(repo, "tools/testbed/kind-cluster"), "create", adoptedCluster)
	create.Stderr = os.Stderr
	out, err := create.Output()
	if err != nil {
		t.Fatalf("tools/testbed/kind-cluster create: %v", err)
	}
	kc := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		del := exec.Command(filepath.Join(repo, "tools/testbed/kind-cluster"), "delete", adoptedCluster)
		del.Stderr = os.Stderr
		_ = del.Run()
	})
	t.Logf("plain kind cluster %s (kind CLI, flannel): %s", adoptedCluster, time.Since(start).Round(time.Second))
	namespacesBefore := strings.Fields(kubectl(t, kc, "get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}"))

	r := newRepository(t)
	run := bootstrap(t, ctx, nil, env, "--kubeconfig", kc, "--adopt", "--repo", r.dir, "--age-key-file", r.key, "--values", testbedVs, "--output", "plain")
	run.report(t, "bootstrap "+env+" --kubeconfig FILE --adopt")
	if run.err != nil {
		t.Fatalf("bootstrap --adopt: %v", run.err)
	}
	t.Cleanup(func() { cleanup(t, env) })
	if slices.Contains(kindClusters(t), "cluster-init-bootstrap") {
		t.Error("a kind bootstrap cluster was created")
	}
	assertUnitsReady(t, kc, []string{"cert-manager", "capi", "cabpk", "capd", "environment", "workload-clusters"})
	if got := kubectlQuiet(kc, "get", "clusters.cluster.x-k8s.io", "-A", "-o", "name"); got != "" {
		t.Errorf("the adopted cluster defines clusters: %s", got)
	}
	if got := kubectl(t, kc, "-n", "cluster-init", "get", "configmap", "cluster-init-state", "-o", "jsonpath={.data.values\\.yaml}"); !strings.Contains(got, "adopted: true") {
		t.Errorf("the state of the adopted cluster: %q", got)
	}
	status := bootstrapOK(t, "status", env, "--repo", r.dir, "--age-key-file", r.key)
	for _, want := range []string{"capd", "workload-clusters", "workload clusters:"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	// The adopted cluster is never bootstrapped as something else: not as a permanent bootstrap
	// cluster, not next to a kind one.
	for _, args := range [][]string{
		{env, "--kubeconfig", kc, "--values", testbedVs, "--until", "bootstrap cluster"},
		{env, "--values", testbedVs, "--until", "bootstrap cluster"},
	} {
		refused := bootstrap(t, ctx, nil, append(args, "--repo", r.dir, "--age-key-file", r.key, "--output", "plain")...)
		if refused.err == nil || !strings.Contains(refused.output.String(), "adopted") {
			t.Errorf("bootstrap %v on the adopted cluster was not refused as adopted:\n%s", args, refused.output.String())
		}
	}
	if slices.Contains(kindClusters(t), "cluster-init-bootstrap") {
		t.Error("a kind bootstrap cluster was created next to the adopted cluster")
	}
	// Running it again changes nothing and finishes.
	again := bootstrap(t, ctx, nil, env, "--kubeconfig", kc, "--adopt", "--repo", r.dir, "--age-key-file", r.key, "--values", testbedVs, "--output", "plain")
	again.report(t, "bootstrap --adopt again")
	if again.err != nil {
		t.Fatalf("bootstrap --adopt again: %v", again.err)
	}

	// Day 2 works on it as on a pivoted management cluster, and still defines no cluster.
	applied := bootstrap(t, ctx, nil, "apply", env, "--repo", r.dir, "--age-key-file", r.key, "--values", testbedVs, "--output", "plain")
	applied.report(t, "apply "+env+" (adopted)")
	if applied.err != nil || !strings.Contains(applied.output.String(), "adopted") {
		t.Fatalf("apply on the adopted cluster: %v", applied.err)
	}
	if got := kubectlQuiet(kc, "get", "clusters.cluster.x-k8s.io", "-A", "-o", "name"); got != "" {
		t.Errorf("the adopted cluster defines clusters after apply: %s", got)
	}

	// A workload cluster, by a commit, as from a pivoted management cluster.
	wl1 := readFile(t, filepath.Join(repo, "environment-values/workload-clusters/example/cluster.yaml"))
	r.write(t, "clusters/management/workload-clusters/wl1/cluster.yaml", wl1)
	pushed := r.commit(t, "workload cluster wl1")
	waitFor(t, 20*time.Minute, "workload cluster wl1 Available", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "cluster", "wl1", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`) == "True"
	})
	t.Logf("push -> workload cluster wl1 Available: %s", time.Since(pushed).Round(time.Second))
	waitFor(t, 10*time.Minute, "the CNI of wl1 Ready", func() bool {
		return kubectlQuiet(kc, "-n", "workload-clusters", "get", "kustomization", "wl1-cni", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`) == "True"
	})
	t.Logf("push -> CNI Ready in wl1: %s", time.Since(pushed).Round(time.Second))

	// Cleanup: the workload cluster and what was installed go, the cluster stays.
	start = time.Now()
	rc := bootstrap(t, ctx, nil, "cleanup", env)
	if rc.err != nil {
		t.Fatalf("cleanup: %v", rc.err)
	}
	t.Logf("cleanup of the adopted cluster: %s", time.Since(start).Round(time.Second))
	if got := kubectl(t, kc, "get", "nodes", "-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`); got != "True" {
		t.Errorf("the adopted cluster's node after cleanup: Ready=%q", got)
	}
	if left := docker(t, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster=wl1"); left != "" {
		t.Errorf("containers of wl1 left: %s", left)
	}
	namespacesAfter := strings.Fields(kubectl(t, kc, "get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}"))
	if !slices.Equal(namespacesAfter, namespacesBefore) {
		t.Errorf("namespaces after cleanup %v, before adoption %v", namespacesAfter, namespacesBefore)
	}
	for _, group := range []string{"toolkit.fluxcd.io", "cluster.x-k8s.io", "cert-manager.io"} {
		for _, crd := range strings.Fields(kubectl(t, kc, "get", "crds", "-o", "name")) {
			if strings.HasSuffix(crd, group) {
				t.Errorf("CRD left after cleanup: %s", crd)
			}
		}
	}
	if got := kubectlQuiet(kc, "-n", "kube-system", "get", "configmap", "cluster-init-bootstrap", "-o", "name"); got != "" {
		t.Errorf("the marker is left: %s", got)
	}
}
