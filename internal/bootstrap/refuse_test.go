package bootstrap_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cluster-init.dev/cluster-init/internal/bootstrap"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/redact"
	"cluster-init.dev/cluster-init/internal/standalone"
	"cluster-init.dev/cluster-init/internal/statedir"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/versions"
)

// An environment whose management cluster this machine knows (its kubeconfig in the state
// directory, the cluster answering) is not bootstrapped again from a new kind cluster, by any verb
// that would make one: a second management cluster of the same name would follow. Refused in the
// validate phase, before a kind cluster exists (and the runs stop after it: should the refusal be
// missing, the test makes no kind cluster).
func TestANewKindClusterIsRefusedBesideTheManagementCluster(t *testing.T) {
	root := testenv.Checkout(t)
	pins, err := versions.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	management := testenv.Start(t, "management")
	dir := statedir.Dir{Path: t.TempDir()}
	kubeconfig := dir.Environment("kubeadm-capd").ManagementKubeconfig()
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, management.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	common := func() bootstrap.Common {
		out, err := progress.New(io.Discard, progress.Format("plain"), nil, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return bootstrap.Common{RepoRoot: root, Env: testenv.Environment(t, root, "kubeadm-capd"), Redactor: redact.New(),
			KubeVersion: pins["KUBERNETES_VERSION"], StateDir: dir, Timeout: time.Minute, Out: out}
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // the standalone key cluster-init makes for itself
	key, err := standalone.LoadKey(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	for verb, run := range map[string]func() (*bootstrap.Result, error){
		"bootstrap ENV": func() (*bootstrap.Result, error) {
			return bootstrap.Run(t.Context(), bootstrap.CreateOptions{Common: common(), Until: "validate"})
		},
		"bootstrap ENV --standalone": func() (*bootstrap.Result, error) {
			return bootstrap.Standalone(t.Context(), bootstrap.StandaloneOptions{Common: common(), Key: key, Until: "validate"})
		},
	} {
		res, err := run()
		if err == nil || !strings.Contains(err.Error(), "environment kubeadm-capd already has its management cluster") {
			t.Errorf("%s: %v, want the refusal", verb, err)
		}
		if res != nil && res.Bootstrap != "" {
			t.Errorf("%s: a kind cluster was made: %s", verb, res.Bootstrap)
		}
		if n := len(res.Phases); n != 1 || res.Phases[0].Name != "validate" {
			t.Errorf("%s: phases run %v, want validate alone", verb, res.Phases)
		}
	}
}
