//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/pivot"
)

const env = "kubeadm-capd"

func writeValues(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func managementKubeconfig() string {
	return state.Environment(env).ManagementKubeconfig()
}

// The main job, end to end: from a clean state to a self-managed management cluster, with the
// pivot stopped after each of its steps (it must resume every time), then day 2.
func TestBootstrapPivotAndApply(t *testing.T) {
	cleanup(t, env)
	t.Cleanup(func() { cleanup(t, env) })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	hook := writeValues(t, pivotStopsValues(pivot.StepNames()))
	timeline := filepath.Join(os.TempDir(), "cluster-init-e2e-timeline.html")
	r := bootstrap(t, ctx, nil, env, "--values", testbedVs, "--values", hook, "--output", "plain", "--timeline", timeline)
	r.report(t, "bootstrap "+env)
	if r.err != nil {
		t.Fatalf("bootstrap %s: %v", env, r.err)
	}

	kc := managementKubeconfig()
	st, err := os.Stat(kc)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("management kubeconfig %s: %v (mode %v)", kc, err, st.Mode())
	}
	if names := kindClusters(t); slices.Contains(names, "cluster-init-bootstrap") {
		t.Errorf("the bootstrap cluster was not deleted after the pivot: %v", names)
	}

	// The management cluster holds its own definitions, Available, with 1 control plane + 1 worker.
	if got := kubectl(t, kc, "-n", "cluster-init", "get", "cluster", "management", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`); got != "True" {
		t.Errorf("Cluster management Available=%q", got)
	}
	machines := strings.Fields(kubectl(t, kc, "-n", "cluster-init", "get", "machines", "-o", "jsonpath={.items[*].status.phase}"))
	if len(machines) != 2 || slices.ContainsFunc(machines, func(p string) bool { return p != "Running" }) {
		t.Errorf("machines: %v", machines)
	}
	assertExactlyOnce(t, kc)
	assertPivotRecord(t, kc)
	assertUnitsReady(t, kc, []string{"cert-manager", "capi", "cabpk", "capd", "cluster", "cni", "cluster-ready", "cluster-init"})
	assertPulledThroughMirror(t)

	// After the bootstrap cluster is gone, the management cluster's Flux reconciles its own units.
	at := time.Now().Format(time.RFC3339Nano)
	kubectl(t, kc, "-n", "cluster-init", "annotate", "--overwrite", "kustomization", "cluster", "reconcile.fluxcd.io/requestedAt="+at)
	waitFor(t, 5*time.Minute, "the management cluster's Flux to reconcile unit cluster", func() bool {
		return kubectl(t, kc, "-n", "cluster-init", "get", "kustomization", "cluster", "-o", "jsonpath={.status.lastHandledReconcileAt}") == at
	})

	// Day 2: two workers instead of one.
	workers := writeValues(t, "cluster:\n  workers:\n    replicas: 2\n")
	r = bootstrap(t, ctx, nil, "apply", env, "--values", testbedVs, "--values", workers, "--output", "plain")
	r.report(t, "apply "+env+" (workers 1 -> 2)")
	if r.err != nil {
		t.Fatalf("apply: %v", r.err)
	}
	machines = strings.Fields(kubectl(t, kc, "-n", "cluster-init", "get", "machines", "-o", "jsonpath={.items[*].status.phase}"))
	if len(machines) != 3 {
		t.Errorf("after apply: %d machines %v, want 3", len(machines), machines)
	}
	// Done means the new node is Ready as the cluster itself says, not only its Machine Running.
	ready := strings.Fields(kubectl(t, kc, "get", "nodes", "-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`))
	if len(ready) != 3 || strings.Join(ready, " ") != "True True True" {
		t.Errorf("when apply returned, the nodes' Ready conditions were %v, want 3 True", ready)
	}
}

// assertExactlyOnce checks that every Cluster API object of the cluster is in the management
// cluster exactly once and that nothing was replaced: one of each definition, as many
// infrastructure machines and bootstrap configs as machines.
func assertExactlyOnce(t *testing.T, kc string) {
	t.Helper()
	count := func(kind string) int {
		return len(strings.Fields(kubectl(t, kc, "-n", "cluster-init", "get", kind, "-o", "jsonpath={.items[*].metadata.name}")))
	}
	for kind, want := range map[string]int{"clusters.v1beta2.cluster.x-k8s.io": 1, "dockerclusters.v1beta2.infrastructure.cluster.x-k8s.io": 1,
		"kubeadmcontrolplanes.v1beta2.controlplane.cluster.x-k8s.io": 1, "machinedeployments.v1beta2.cluster.x-k8s.io": 1, "machinesets.v1beta2.cluster.x-k8s.io": 1,
		"machinehealthchecks.v1beta2.cluster.x-k8s.io": 2} {
		if got := count(kind); got != want {
			t.Errorf("%s: %d, want %d", kind, got, want)
		}
	}
	m := count("machines.v1beta2.cluster.x-k8s.io")
	for _, kind := range []string{"dockermachines.v1beta2.infrastructure.cluster.x-k8s.io", "kubeadmconfigs.v1beta2.bootstrap.cluster.x-k8s.io"} {
		if got := count(kind); got != m {
			t.Errorf("%s: %d for %d machines", kind, got, m)
		}
	}
}

// pivotStopsValues are values that make the pivot stop once after each of steps (the pivot
// command's test hook, set by a patch of its Job: the shipped manifests carry no test hook).
func pivotStopsValues(steps []string) string {
	return `units:
  pivot:
    kustomization_spec:
      patches:
        - target: {kind: Job, name: pivot}
          patch: |
            - op: add
              path: /spec/template/spec/containers/0/env/-
              value: {name: CLUSTER_INIT_PIVOT_FAIL_ONCE_AFTER, value: "` + strings.Join(steps, ",") + `"}
`
}

// assertPivotRecord checks the record the pivot leaves in the management cluster: every step done,
// one attempt more than the test hook's stops (each restart resumed), no machine replaced.
func assertPivotRecord(t *testing.T, kc string) {
	t.Helper()
	raw := kubectl(t, kc, "-n", "cluster-init", "get", "configmap", names.PivotRecord, "-o", "jsonpath={.data.state\\.json}")
	var st pivot.State
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatalf("pivot record %q: %v", raw, err)
	}
	if !slices.Equal(st.Done, pivot.StepNames()) || st.Completed == nil || st.Failed != nil {
		t.Errorf("pivot record: done %v, completed %v, failed %v", st.Done, st.Completed, st.Failed)
	}
	if st.Attempts != len(pivot.StepNames())+1 {
		t.Errorf("pivot attempts %d, want %d (one per forced stop, plus the last)", st.Attempts, len(pivot.StepNames())+1)
	}
	now := map[string]string{}
	for _, line := range strings.Split(kubectl(t, kc, "-n", "cluster-init", "get", "machines", "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.providerID}{"\n"}{end}`), "\n") {
		if name, id, ok := strings.Cut(line, "="); ok {
			now[name] = id
		}
	}
	if replaced := machines.Replaced(st.ProviderIDs, now); len(replaced) > 0 || len(st.ProviderIDs) != 2 {
		t.Errorf("machines replaced by the pivot: %v (before %v)", replaced, st.ProviderIDs)
	}
}

func assertUnitsReady(t *testing.T, kc string, units []string) {
	t.Helper()
	for _, u := range units {
		if got := kubectl(t, kc, "-n", "cluster-init", "get", "kustomization", u, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`); got != "True" {
			t.Errorf("unit %s in the management cluster: Ready=%q", u, got)
		}
	}
}

// assertPulledThroughMirror reads the registry's access log: every controller image was pulled
// from it (no upstream registry is reachable here anyway).
func assertPulledThroughMirror(t *testing.T) {
	t.Helper()
	logs := docker(t, "logs", "cluster-init-registry")
	for _, repo := range []string{
		"ghcr.io/fluxcd/source-controller", "ghcr.io/fluxcd/kustomize-controller", "ghcr.io/fluxcd/helm-controller",
		"quay.io/jetstack/cert-manager-controller", "quay.io/jetstack/cert-manager-webhook", "quay.io/jetstack/cert-manager-cainjector",
		"registry.k8s.io/cluster-api/cluster-api-controller", "registry.k8s.io/cluster-api/kubeadm-bootstrap-controller",
		"registry.k8s.io/cluster-api/kubeadm-control-plane-controller", "registry.k8s.io/cluster-api/capd-manager",
		"ghcr.io/flannel-io/flannel",
	} {
		if !strings.Contains(logs, "/v2/"+repo+"/manifests/") {
			t.Errorf("no pull of %s through the mirror in the registry's log", repo)
		}
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Second)
	}
}

// waitExplained is waitFor for long waits: every few minutes, and at the timeout, it logs what
// explain says of the state (what is still missing), so a run that does not converge says where.
func waitExplained(t *testing.T, timeout time.Duration, what string, cond func() bool, explain func() string) {
	t.Helper()
	start := time.Now()
	lastLog := start
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s; state:\n%s", timeout, what, explain())
		}
		if time.Since(lastLog) > 3*time.Minute {
			t.Logf("still waiting for %s after %s:\n%s", what, time.Since(start).Round(time.Second), explain())
			lastLog = time.Now()
		}
		time.Sleep(5 * time.Second)
	}
}
