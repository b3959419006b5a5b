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
)

const standaloneCluster = "management" // the cluster of kubeadm-capd

func standaloneDir() string { return filepath.Join(state.Standalone(), env) }

// clusterContainers maps the names of the cluster's containers (CAPD labels them as kind does) to
// their IDs.
func clusterContainers(t *testing.T) map[string]string {
	t.Helper()
	out := docker(t, "ps", "-a", "--filter", "label=io.x-k8s.kind.cluster="+standaloneCluster, "--format", "{{.Names}} {{.ID}}")
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			m[f[0]] = f[1]
		}
	}
	return m
}

func controlPlaneContainers(all map[string]string) map[string]string {
	out := map[string]string{}
	for n, id := range all {
		if strings.Contains(n, "control-plane") {
			out[n] = id
		}
	}
	return out
}

// readyNodes counts the cluster's nodes whose Ready condition is True.
func readyNodes(t *testing.T, kc string) int {
	t.Helper()
	return strings.Count(kubectl(t, kc, "get", "nodes", "-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`), "True")
}

// servedCA is the CA certificate the cluster's kubeconfig trusts; the API server answering
// through it proves it still serves a certificate of that CA.
func servedCA(t *testing.T, kc string) string {
	t.Helper()
	return kubectl(t, kc, "config", "view", "--raw", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
}

func assertStandaloneState(t *testing.T, wantPending bool) map[string]any {
	t.Helper()
	err := filepath.Walk(standaloneDir(), func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if info.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("state %s: mode %v, want %v", path, info.Mode().Perm(), want)
		}
		if !info.IsDir() && strings.HasPrefix(filepath.Base(path), "Secret_") && !strings.HasSuffix(path, ".age") {
			t.Errorf("state %s: a Secret not encrypted", path)
		}
		if data, _ := os.ReadFile(path); !info.IsDir() && filepath.Base(path) != "kubeconfig" && strings.Contains(string(data), "PRIVATE KEY") {
			t.Errorf("state %s: holds a private key in clear", path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("state directory: %v", err)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(standaloneDir(), "state.json"))), &st); err != nil {
		t.Fatal(err)
	}
	if _, pending := st["pending"]; pending != wantPending {
		t.Errorf("state.json pending: %v, want %t", st["pending"], wantPending)
	}
	return st
}

func assertNoBootstrapCluster(t *testing.T) {
	t.Helper()
	if names := kindClusters(t); slices.Contains(names, "cluster-init-bootstrap") {
		t.Errorf("a kind management cluster is left running: %v", names)
	}
}

// A standalone cluster: created with no management left, scaled twice (once with the command
// killed right after the restore), refused to a second command and to a damaged state, deleted.
// cleanStandalone starts a standalone test from a clean state, and leaves one: the cluster deleted
// through its state if it is still there.
func cleanStandalone(t *testing.T) {
	t.Helper()
	cleanup(t, env)
	// cluster-init's own age key for standalone states, in a directory of this test.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	os.RemoveAll(standaloneDir())
	t.Cleanup(func() {
		if _, err := os.Stat(standaloneDir()); err == nil {
			bootstrap(t, context.Background(), nil, "delete", env, "--yes", "--output", "plain")
		}
		cleanup(t, env)
		os.RemoveAll(standaloneDir())
	})
}

func TestStandaloneCluster(t *testing.T) {
	cleanStandalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()

	// Create.
	r := bootstrap(t, ctx, nil, env, "--standalone", "--values", testbedVs, "--output", "plain")
	r.report(t, "bootstrap "+env+" --standalone")
	if r.err != nil {
		t.Fatalf("bootstrap --standalone: %v", r.err)
	}
	assertNoBootstrapCluster(t)
	containers := clusterContainers(t)
	if len(containers) != 3 {
		t.Errorf("the cluster's containers: %v, want the load balancer, 1 control plane, 1 worker", containers)
	}
	st := assertStandaloneState(t, false)
	if st["workers"] != float64(1) || st["control_plane"] != float64(1) {
		t.Errorf("state: %v control plane, %v workers", st["control_plane"], st["workers"])
	}
	key := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "cluster-init", "standalone.agekey")
	if info, err := os.Stat(key); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("cluster-init's own age key %s: %v", key, err)
	}
	kc := filepath.Join(standaloneDir(), "kubeconfig")
	if n := readyNodes(t, kc); n != 2 {
		t.Errorf("%d nodes Ready, want 2", n)
	}
	// No management in it: no Cluster API, cert-manager, providers or Flux.
	namespaces := kubectl(t, kc, "get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}")
	for _, ns := range []string{"capi-system", "cert-manager", "capd-system", "flux-system", "cluster-init"} {
		if slices.Contains(strings.Fields(namespaces), ns) {
			t.Errorf("namespace %s in the standalone cluster: %s", ns, namespaces)
		}
	}
	if crds := kubectl(t, kc, "get", "crds", "-o", "name"); strings.Contains(crds, "cluster.x-k8s.io") {
		t.Errorf("Cluster API CRDs in the standalone cluster: %s", crds)
	}
	ca := servedCA(t, kc)
	list := bootstrapOK(t, "standalone", "list")
	assertContains(t, "standalone list", list, env, standaloneCluster, "kubeadm-capd", "no management running")

	// Refusals, in seconds, before anything is created: a second creation, no state, a damaged state.
	for name, args := range map[string][]string{
		"second creation":     {env, "--standalone", "--values", testbedVs},
		"a bootstrap over it": {env, "--values", testbedVs},
		"no state":            {"scale", "rke2-capd", "--workers", "2"},
	} {
		r := bootstrap(t, ctx, nil, args...)
		if r.err == nil || r.wall > 20*time.Second {
			t.Errorf("%s: %v after %s, want a refusal in seconds", name, r.err, r.wall)
		}
	}
	secretFiles, _ := filepath.Glob(filepath.Join(standaloneDir(), "objects", "Secret_*-ca.yaml.age"))
	if len(secretFiles) == 0 {
		t.Fatal("no encrypted CA Secret in the state")
	}
	intact := readFile(t, secretFiles[0])
	os.WriteFile(secretFiles[0], []byte(intact[:len(intact)/2]), 0o600)
	r = bootstrap(t, ctx, nil, "scale", env, "--workers", "2", "--output", "plain")
	os.WriteFile(secretFiles[0], []byte(intact), 0o600)
	if r.err == nil || r.wall > 20*time.Second || !strings.Contains(r.output.String(), "damaged") {
		t.Errorf("scale with a damaged state: %v after %s", r.err, r.wall)
	}
	assertNoBootstrapCluster(t)

	// Scale to 2 workers; a second command meanwhile is refused (the lock).
	cpBefore := controlPlaneContainers(containers)
	var concurrent *run
	r = bootstrap(t, ctx, func(line string) bool {
		if concurrent == nil && strings.Contains(line, "creating the temporary management cluster") {
			concurrent = bootstrap(t, ctx, nil, "delete", env, "--yes")
		}
		return false
	}, "scale", env, "--workers", "2", "--output", "plain")
	r.report(t, "scale "+env+" --workers 2")
	if r.err != nil {
		t.Fatalf("scale: %v", r.err)
	}
	if concurrent == nil || concurrent.err == nil || !strings.Contains(concurrent.output.String(), "being changed by another command") {
		t.Errorf("a concurrent delete was not refused by the lock: %+v", concurrent)
	}
	assertScaled := func(workers int, before map[string]string) map[string]string {
		t.Helper()
		assertNoBootstrapCluster(t)
		after := clusterContainers(t)
		if len(after) != 2+workers {
			t.Errorf("containers after scale: %v, want %d", after, 2+workers)
		}
		for name, id := range before {
			if after[name] != id {
				t.Errorf("container %s replaced or gone (%s -> %q)", name, id, after[name])
			}
		}
		if got := controlPlaneContainers(after); len(got) != 1 || !includes(values(got), values(cpBefore)) {
			t.Errorf("control plane containers %v, before %v", got, cpBefore)
		}
		if n := readyNodes(t, kc); n != 1+workers {
			t.Errorf("%d nodes Ready, want %d", n, 1+workers)
		}
		if got := servedCA(t, kc); got != ca {
			t.Error("the cluster's CA changed")
		}
		if st := assertStandaloneState(t, false); st["workers"] != float64(workers) {
			t.Errorf("state: %v workers, want %d", st["workers"], workers)
		}
		return after
	}
	containers = assertScaled(2, containers)

	// Scale to 3, killed right after the restore, then run again.
	r = bootstrap(t, ctx, func(line string) bool {
		return strings.Contains(line, "restored the objects of "+standaloneCluster+" into the temporary management cluster")
	}, "scale", env, "--workers", "3", "--output", "plain")
	r.report(t, "scale "+env+" --workers 3, killed after the restore")
	if r.err == nil {
		t.Fatal("the scale was not killed after the restore")
	}
	if !slices.Contains(kindClusters(t), "cluster-init-bootstrap") {
		t.Error("the killed scale left no temporary management cluster to continue with")
	}
	assertStandaloneState(t, true)
	r = bootstrap(t, ctx, nil, "scale", env, "--workers", "3", "--output", "plain")
	r.report(t, "scale "+env+" --workers 3, run again")
	if r.err != nil {
		t.Fatalf("scale run again: %v", r.err)
	}
	assertContains(t, "the scale run again", r.output.String(), "not restored again")
	assertScaled(3, containers)

	// A backup: the export holds the state, its secrets encrypted; an import over it is refused.
	backup := filepath.Join(t.TempDir(), "state.tgz")
	bootstrapOK(t, "standalone", "export", env, "-o", backup)
	if info, err := os.Stat(backup); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("export %s: %v", backup, err)
	}
	if r := bootstrap(t, ctx, nil, "standalone", "import", backup); r.err == nil || !strings.Contains(r.output.String(), "already has a state") {
		t.Errorf("import over the existing state: %v", r.err)
	}

	// Delete.
	r = bootstrap(t, ctx, nil, "delete", env, "--yes", "--output", "plain")
	r.report(t, "delete "+env)
	if r.err != nil {
		t.Fatalf("delete: %v", r.err)
	}
	if left := clusterContainers(t); len(left) != 0 {
		t.Errorf("containers left after delete: %v", left)
	}
	if _, err := os.Stat(standaloneDir()); !os.IsNotExist(err) {
		t.Errorf("state left after delete: %v", err)
	}
	assertNoBootstrapCluster(t)
}

func values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
