package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/testenv"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

func TestCommandsOnTheKubeadmCAPDEnvironment(t *testing.T) {
	out, err := run(t, "validate", "kubeadm-capd")
	if err != nil || !strings.Contains(out, "kubeadm-capd: management (after pivot):") {
		t.Fatalf("validate: %v\n%s", err, out)
	}

	// As an adopted management cluster: the management context with no definitions of its own.
	out, err = run(t, "validate", "kubeadm-capd", "--adopt")
	if err != nil || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "kubeadm-capd: management (adopted): ") || !strings.HasSuffix(out, " valid\n") {
		t.Errorf("validate --adopt: %v\n%s", err, out)
	}

	out, err = run(t, "render", "kubeadm-capd")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# unit: capi, from: kustomize-components/capi", "kind: Kustomization", "name: cluster-init-secrets", "secrets.yaml: " + "REDACTED"} {
		if !strings.Contains(out, want) {
			t.Errorf("render output lacks %q", want)
		}
	}
	out, err = run(t, "render", "kubeadm-capd", "--unit", "cni")
	if err != nil || !strings.Contains(out, "kind: DaemonSet") || strings.Contains(out, "unit: capi") {
		t.Errorf("render --unit cni: %v\n%s", err, out)
	}

	out, err = run(t, "units", "kubeadm-capd", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var graph struct {
		Context      string   `json:"context"`
		Order        []string `json:"order"`
		CriticalPath []string `json:"critical_path"`
	}
	if err := json.Unmarshal([]byte(out), &graph); err != nil {
		t.Fatalf("units -o json: %v\n%s", err, out)
	}
	if graph.Context != "bootstrap" || graph.CriticalPath[0] != "cert-manager" || graph.CriticalPath[len(graph.CriticalPath)-1] != "pivot" {
		t.Errorf("units -o json: %+v", graph)
	}
	if out, err = run(t, "units", "kubeadm-capd", "-o", "mermaid", "--context", "management"); err != nil || !strings.Contains(out, "cert_manager ==> capi") {
		t.Errorf("units -o mermaid: %v\n%s", err, out)
	}

	out, err = run(t, "images", "kubeadm-capd")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/fluxcd/source-controller:", "/jetstack/cert-manager-webhook:", "/cluster-api/capd-manager:", "/flannel-io/flannel:", "kindest/node:", "cluster-init/bootstrap:"} {
		if !strings.Contains(out, want) {
			t.Errorf("images lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "capi-openstack") || strings.Contains(out, "rke2") {
		t.Errorf("images of disabled providers listed:\n%s", out)
	}
}

func TestUnknownEnvironmentListsTheKnownOnes(t *testing.T) {
	_, err := run(t, "validate", "kubeadm-capz")
	if err == nil || !strings.Contains(err.Error(), "kubeadm-capd") || !strings.Contains(err.Error(), "environment-values/kubeadm-capz") {
		t.Errorf("error: %v", err)
	}
}

// The offline commands take bootstrap's --values, so that a values file is checked and shown
// before it reaches a cluster; changed values make the management-configs Job copy them again.
func TestOfflineCommandsTakeValuesFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bad := write("bad.yaml", "cluster:\n  workers:\n    replicas: many\n")
	_, err := run(t, "validate", "kubeadm-capd", "--values", bad)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:3: cluster.workers.replicas") {
		t.Errorf("validate --values with a string replica count: %v", err)
	}

	checksum := func(args ...string) string {
		t.Helper()
		out, err := run(t, append([]string{"render", "kubeadm-capd", "--unit", "management-configs"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(out, "cluster-init.dev/values-checksum: ")
		if !ok {
			t.Fatalf("the management-configs Job has no values checksum:\n%s", out)
		}
		return strings.Fields(rest)[0]
	}
	base := checksum()
	if more := checksum("--values", write("workers.yaml", "cluster:\n  workers:\n    replicas: 3\n")); more == base {
		t.Errorf("changed values leave the checksum at %s: the copy would not run again", base)
	}
	if same := checksum("--values", write("same.yaml", "cluster:\n  workers:\n    replicas: 1\n")); same != base {
		t.Errorf("unchanged values change the checksum: %s, then %s", base, same)
	}
}

// A problem every context shares is reported once, naming the contexts, and no target with a
// problem is called valid.
func TestValidateReportsAProblemOnceAndNoInvalidTargetAsValid(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "prune.yaml")
	if err := os.WriteFile(bad, []byte("units:\n  capi:\n    kustomization_spec:\n      prune: \"yes please\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "validate", "kubeadm-capd", "--values", bad)
	if err == nil {
		t.Fatalf("a string prune passed:\n%s", out)
	}
	if strings.Contains(out, "objects valid") || !strings.Contains(out, "INVALID (1 problems, below)") {
		t.Errorf("stdout calls an invalid target valid, or does not say it is invalid:\n%s", out)
	}
	msg := err.Error()
	if n := strings.Count(msg, "Kustomization cluster-init/capi: spec.prune"); n != 1 || !strings.Contains(msg, "bootstrap, management (before pivot), management (after pivot): ") {
		t.Errorf("the problem is reported %d times, or without its contexts:\n%s", n, msg)
	}
}

// validate --all checks every environment of the checkout: one broken environment is named with
// its problem, the others are still checked and reported, and the command fails.
func TestValidateAllChecksEveryEnvironment(t *testing.T) {
	root := checkoutCopy(t, "environment-values")
	envs := filepath.Join(root, "environment-values")
	for name, edit := range map[string]func(file string, data []byte) []byte{
		"good":       func(_ string, data []byte) []byte { return data },
		"team/other": func(_ string, data []byte) []byte { return data },
		"broken": func(file string, data []byte) []byte {
			if file == "values.yaml" {
				return append(data, []byte("proxies:\n  https_proxy: http://proxy.example.invalid:99999\n")...)
			}
			return data
		},
	} {
		dir := copyEnvironment(t, "kubeadm-capd", edit)
		if err := os.MkdirAll(filepath.Dir(filepath.Join(envs, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir, filepath.Join(envs, name)); err != nil {
			t.Fatal(err)
		}
	}

	out, err := run(t, "--repo", root, "validate", "--all")
	if err == nil {
		t.Fatalf("validate --all accepted a broken environment:\n%s", out)
	}
	for _, want := range []string{"1 of 3 environments invalid (broken)", "environment-values/broken/values.yaml", "proxies.https_proxy", `port "99999"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	for _, want := range []string{"good: management (after pivot): ", "team/other: management (after pivot): "} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}

	if err := os.RemoveAll(filepath.Join(envs, "broken")); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "--repo", root, "validate", "--all"); err != nil || !strings.HasSuffix(out, "all 2 environments valid\n") {
		t.Errorf("validate --all: %v\n%s", err, out)
	}
	if _, err := run(t, "--repo", root, "validate", "--all", "good"); err == nil || !strings.Contains(err.Error(), "expected no ENV") {
		t.Errorf("validate --all ENV: %v", err)
	}
}

// kubeconfigFile writes a kubeconfig of the test cluster c, as a user gives it with --kubeconfig.
func kubeconfigFile(t *testing.T, c *kube.Cluster) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, testenv.Kubeconfig(c.Config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
