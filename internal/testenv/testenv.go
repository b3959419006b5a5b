// Package testenv starts a real kube-apiserver and etcd for tests (controller-runtime's envtest,
// with the binaries tools/testbed/envtest-assets builds: export
// KUBEBUILDER_ASSETS=$(tools/testbed/envtest-assets)), loaded with the CRDs of the vendored Flux,
// Cluster API and clusterctl manifests. No controller runs: tests set the statuses they need.
package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa/utils"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"cluster-init.dev/cluster-init/internal/checkout"
	"cluster-init.dev/cluster-init/internal/kube"
)

// vendored are the manifests whose CRDs every test cluster gets.
var vendored = []string{
	"flux-system/upstream/flux.yaml",
	"capi/upstream/clusterctl-api.yaml",
	"capi/upstream/core-cluster-api.yaml",
	"cabpk/upstream/bootstrap-kubeadm.yaml",
	"cabpk/upstream/control-plane-kubeadm.yaml",
	"cabpr/upstream/bootstrap-rke2.yaml",
	"cabpr/upstream/control-plane-rke2.yaml",
	"capd/upstream/infrastructure-docker.yaml",
	"capo/upstream/infrastructure-openstack.yaml",
	"applications/crd/apps.cluster-init.dev_applications.yaml",
}

// Start starts a cluster for the test, stopped when the test ends.
func Start(t testing.TB, name string) *kube.Cluster {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: export KUBEBUILDER_ASSETS=$(tools/testbed/envtest-assets) (ci/test.sh does)")
	}
	root, err := checkout.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	// envtest gives each component 20s to start: a CI runner with its cores busy can take longer,
	// and a test must not fail on that.
	newEnv := func() *envtest.Environment {
		return &envtest.Environment{BinaryAssetsDirectory: assets, CRDs: crds(t, root), ErrorIfCRDPathMissing: true,
			ControlPlaneStartTimeout: 2 * time.Minute, ControlPlaneStopTimeout: time.Minute}
	}
	env := newEnv()
	// envtest waits 5s at most for the default namespace, which a busy machine can miss: start
	// again rather than fail a test on the machine's load.
	cfg, err := env.Start()
	for attempt := 2; err != nil && attempt <= 3; attempt++ {
		t.Logf("start kube-apiserver and etcd (attempt %d): %v", attempt-1, err)
		_ = env.Stop()
		env = newEnv()
		cfg, err = env.Start()
	}
	if err != nil {
		// A start that failed past the processes' launch (the CRDs refused) leaves them running.
		_ = env.Stop()
		t.Fatalf("start kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := kube.FromKubeconfig(name, Kubeconfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CRDs are the CRDs every test cluster gets, as it gets them.
func CRDs(t testing.TB) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	root, err := checkout.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	return crds(t, root)
}

// crds reads the vendored CRDs. Conversion webhooks are dropped: no provider runs here, and the
// tests only use storage versions.
func crds(t testing.TB, root string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range vendored {
		data, err := os.ReadFile(filepath.Join(root, "kustomize-components", f))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := utils.ReadObjects(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
				t.Fatal(err)
			}
			crd.Spec.Conversion = nil
			for k := range crd.Annotations {
				if strings.HasPrefix(k, "cert-manager.io/") {
					delete(crd.Annotations, k)
				}
			}
			out = append(out, crd)
		}
	}
	return out
}

// Kubeconfig writes a REST config with client certificates (as envtest gives) as a kubeconfig.
func Kubeconfig(cfg *rest.Config) []byte {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	data, _ := clientcmd.Write(*kc)
	return data
}
