//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"cluster-init.dev/cluster-init/internal/diagnostics"
)

// Bad values stop the run before anything is created.
func TestBadValuesFailBeforeAnythingIsCreated(t *testing.T) {
	cleanup(t, env)
	before := docker(t, "ps", "-aq")
	bad := writeValues(t, "cluster:\n  workers:\n    replicas: two\n")
	r := bootstrap(t, context.Background(), nil, env, "--values", testbedVs, "--values", bad, "--output", "plain")
	if r.err == nil {
		t.Fatal("bootstrap with bad values succeeded")
	}
	out := r.output.String()
	for _, want := range []string{"nothing was created", "values.yaml:3: cluster.workers.replicas: got string, expected integer"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if after := docker(t, "ps", "-aq"); after != before {
		t.Errorf("containers changed:\nbefore %q\nafter  %q", before, after)
	}
	if slices.Contains(kindClusters(t), "cluster-init-bootstrap") {
		t.Error("a kind cluster was created")
	}
}

// A run killed mid-way and run again completes, without a second cluster or duplicate objects.
func TestKilledRunContinuesWithoutDuplicates(t *testing.T) {
	cleanup(t, env)
	t.Cleanup(func() { cleanup(t, env) })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()

	// Kill while the machines come up: the units, the cluster and its machines are half done.
	r := bootstrap(t, ctx, func(line string) bool { return strings.Contains(line, "unit cluster: reconciling") }, env, "--values", testbedVs, "--output", "plain")
	if r.err == nil {
		t.Fatal("the first run was not killed")
	}
	r.report(t, "killed run")
	r = bootstrap(t, ctx, nil, env, "--values", testbedVs, "--output", "plain")
	r.report(t, "run again")
	if r.err != nil {
		t.Fatalf("second run: %v", r.err)
	}
	if !strings.Contains(r.output.String(), "kind cluster cluster-init-bootstrap exists: continuing with it") {
		t.Error("the second run did not continue with the first run's kind cluster")
	}
	kc := managementKubeconfig()
	assertExactlyOnce(t, kc)
	if n := len(strings.Fields(docker(t, "ps", "-q", "--filter", "label=io.x-k8s.kind.cluster=management"))); n != 3 {
		t.Errorf("%d containers of the management cluster, want 3 (load balancer, control plane, worker)", n)
	}

	// A kind cluster of the same name labels its nodes as CAPD labels the machines: cleanup
	// leaves it alone, and says so.
	foreign := docker(t, "create", "--name", "management-control-plane", "--label", "io.x-k8s.kind.cluster=management",
		"--label", "io.x-k8s.kind.role=control-plane", "cluster-init/bootstrap:v0.1.0")
	defer docker(t, "rm", "-f", foreign)
	out := bootstrap(t, context.Background(), nil, "cleanup", env)
	if out.err != nil || !strings.Contains(out.output.String(), "leaving container management-control-plane alone") {
		t.Errorf("cleanup with a foreign container of the same name: %v", out.err)
	}
	left := strings.Fields(docker(t, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster=management"))
	if len(left) != 1 || !strings.HasPrefix(foreign, left[0]) {
		t.Errorf("after cleanup, containers labelled management: %v, want only the foreign one %s", left, foreign)
	}
}

// A unit that can never become ready is named in the conclusion once its timeout is spent, and
// the diagnostics bundle holds no secret value.
func TestStuckUnitIsNamedAndDiagnosticsHoldNoSecret(t *testing.T) {
	const sentinel = "SENTINEL-e2e-3c9a71f0"
	dir := copyEnvironment(t, env, "stuck", "credentials:\n  git:\n    username: e2e\n    password: "+sentinel+"\n")
	never := writeValues(t, `units:
  never-ready:
    info:
      description: waits for a ConfigMap nobody creates
    depends_on:
      capi: true
    kustomization_spec:
      path: ./kustomize-components/gates/empty
      healthChecks:
        - apiVersion: v1
          kind: ConfigMap
          name: nobody-creates-this
          namespace: cluster-init
    timeout: 1m
`)
	cleanup(t, dir)
	t.Cleanup(func() { cleanup(t, dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	r := bootstrap(t, ctx, nil, dir, "--values", testbedVs, "--values", never, "--output", "plain")
	r.report(t, "stuck unit")
	if r.err == nil {
		t.Fatal("the bootstrap did not fail")
	}
	out := r.output.String()
	m := regexp.MustCompile(`unit never-ready failed after (\S+): HealthCheckFailed`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the conclusion does not name never-ready:\n%s", out)
	}
	if d, _ := time.ParseDuration(m[1]); d < time.Minute || d > time.Minute+30*time.Second {
		t.Errorf("never-ready concluded after %s, want its 1m timeout (plus one poll)", m[1])
	}
	bm := regexp.MustCompile(`diagnostics \(no secret values in it\): (\S+\.tar\.gz)`).FindStringSubmatch(out)
	if bm == nil {
		t.Fatalf("no diagnostics bundle in the output")
	}
	files := readTarball(t, bm[1])
	for _, want := range []string{"conclusion.txt", "bootstrap/resources/Kustomization.kustomize.toolkit.fluxcd.io.yaml", "bootstrap/cluster-api-tree.txt"} {
		if _, ok := files[want]; !ok {
			t.Errorf("bundle lacks %s", want)
		}
	}
	logs := 0
	for name, data := range files {
		if strings.Contains(name, "/logs/") {
			logs++
		}
		if strings.Contains(string(data), sentinel) || strings.Contains(string(data), base64.StdEncoding.EncodeToString([]byte(sentinel))) {
			t.Errorf("secret value in the bundle: %s", name)
		}
	}
	if logs == 0 {
		t.Error("bundle has no controller logs")
	}
	// The secret is in the cluster (so the check above could fail): only the bundle leaves it out.
	kc := filepath.Join(state.KindClusters(), "cluster-init-bootstrap", "kubeconfig")
	enc := kubectl(t, kc, "-n", "cluster-init", "get", "secret", "cluster-init-secrets", "-o", "jsonpath={.data.secrets\\.yaml}")
	if dec, _ := base64.StdEncoding.DecodeString(enc); !strings.Contains(string(dec), sentinel) {
		t.Error("the sentinel is not in the cluster's Secret: the bundle check proves nothing")
	}

	// The kind cluster bootstraps this environment: another environment is refused, and nothing
	// of it is touched.
	r = bootstrap(t, ctx, nil, env, "--values", testbedVs, "--output", "plain")
	if r.err == nil || !strings.Contains(r.output.String(), "bootstraps environment \""+dir+"\", not \""+env+"\"") {
		t.Errorf("bootstrap of another environment on this kind cluster: %v\n%s", r.err, r.output.String())
	}
}

// The bootstrap cluster is never deleted when the pivot did not finish.
func TestBootstrapClusterKeptWhenThePivotFails(t *testing.T) {
	cleanup(t, env)
	t.Cleanup(func() { cleanup(t, env) })
	broken := writeValues(t, "units:\n  pivot:\n    timeout: 3m\n    kustomization_spec:\n      postBuild:\n        substitute:\n          CLUSTER_NAME: no-such-cluster\n")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	r := bootstrap(t, ctx, nil, env, "--values", testbedVs, "--values", broken, "--output", "plain")
	r.report(t, "broken pivot")
	if r.err == nil {
		t.Fatal("the bootstrap succeeded with a broken pivot")
	}
	if !strings.Contains(r.output.String(), "unit pivot failed") {
		t.Errorf("the conclusion does not name the pivot")
	}
	if !slices.Contains(kindClusters(t), "cluster-init-bootstrap") {
		t.Error("the bootstrap cluster was deleted although the pivot did not finish")
	}
	if _, err := os.Stat(managementKubeconfig()); err == nil {
		t.Error("a management kubeconfig was written although the pivot did not finish")
	}
}

func readTarball(t *testing.T, path string) map[string][]byte {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode %v, want 0600", st.Mode().Perm())
	}
	files, err := diagnostics.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return files
}
