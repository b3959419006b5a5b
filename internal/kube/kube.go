// Package kube connects to a cluster from a kubeconfig: REST config, a controller-runtime client
// that knows the Flux and Cluster API types, and a REST mapper that follows CRDs as they appear.
package kube

import (
	"context"
	"fmt"
	"os"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
)

// Cluster is a connection to one cluster.
type Cluster struct {
	// Name is how messages call the cluster ("bootstrap", "management").
	Name       string
	Kubeconfig []byte
	Config     *rest.Config
	Client     client.Client
	Mapper     meta.RESTMapper
}

// Scheme knows the types cluster-init reads: core, CRDs, Flux, Cluster API and its own Applications.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, appsv1alpha1.AddToScheme,
		sourcev1.AddToScheme, kustomizev1.AddToScheme, helmv2.AddToScheme, clusterv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// FromKubeconfig connects with a kubeconfig's current context.
func FromKubeconfig(name string, kubeconfig []byte) (*Cluster, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: kubeconfig: %w", name, err)
	}
	// Bootstraps apply hundreds of objects: do not wait on client-side throttling.
	cfg.QPS, cfg.Burst = 50, 100
	// API deprecation warnings (of versions the vendored CRDs still serve) would land in the
	// middle of the progress view; the schemas are checked offline instead.
	cfg.WarningHandlerWithContext = rest.NoWarnings{}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %w", name, err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: REST mapper: %w", name, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return nil, fmt.Errorf("%s cluster: client: %w", name, err)
	}
	return &Cluster{Name: name, Kubeconfig: kubeconfig, Config: cfg, Client: c, Mapper: mapper}, nil
}

// Load connects with kubeconfig files the way kubectl finds them: path when given, else
// $KUBECONFIG, else ~/.kube/config; contextName, when given, instead of the current context. The
// connection keeps a self-contained kubeconfig of that one context (for clusterctl).
func Load(name, path, contextName string) (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	raw, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: contextName}).RawConfig()
	if err != nil {
		return nil, fmt.Errorf("%s cluster: kubeconfig: %w", name, err)
	}
	if contextName != "" {
		raw.CurrentContext = contextName
	}
	if err := clientcmdapi.MinifyConfig(&raw); err != nil {
		return nil, fmt.Errorf("%s cluster: kubeconfig: %w", name, err)
	}
	if err := clientcmdapi.FlattenConfig(&raw); err != nil {
		return nil, fmt.Errorf("%s cluster: kubeconfig: %w", name, err)
	}
	data, err := clientcmd.Write(raw)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: kubeconfig: %w", name, err)
	}
	return FromKubeconfig(name, data)
}

// FromFile connects with a kubeconfig file.
func FromFile(name, path string) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %w", name, err)
	}
	return FromKubeconfig(name, data)
}

// KubeconfigSecret is a kubeconfig kept in a Secret: Cluster API's (key "value"), the pivot's copy,
// or the one a Flux Kustomization's spec.kubeConfig.secretRef names.
type KubeconfigSecret struct {
	Namespace, Name string
	// Key is the data key; empty, Flux's default keys in its order ("value", then "value.yaml").
	Key string
}

// Read returns the kubeconfig and the Secret's resourceVersion (a new one is a new kubeconfig).
func (s KubeconfigSecret) Read(ctx context.Context, c client.Reader) (data []byte, version string, err error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, secret); err != nil {
		return nil, "", fmt.Errorf("read kubeconfig Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	keys := []string{s.Key}
	if s.Key == "" {
		keys = []string{"value", "value.yaml"}
	}
	for _, k := range keys {
		if data := secret.Data[k]; len(data) > 0 {
			return data, secret.ResourceVersion, nil
		}
	}
	return nil, "", fmt.Errorf("kubeconfig Secret %s/%s has no key %s", s.Namespace, s.Name, strings.Join(keys, " or "))
}

// Connect connects to the cluster the Secret's kubeconfig reaches; name is how messages call it.
func (s KubeconfigSecret) Connect(ctx context.Context, c client.Reader, name string) (*Cluster, error) {
	data, _, err := s.Read(ctx, c)
	if err != nil {
		return nil, err
	}
	return FromKubeconfig(name, data)
}

// ClusterAPICluster connects to a cluster that Cluster API created, through the kubeconfig Secret
// it wrote for it in namespace (Cluster API's own reader of that Secret).
func ClusterAPICluster(ctx context.Context, c client.Reader, namespace, name string) (*Cluster, error) {
	data, err := kubeconfig.FromSecret(ctx, c, client.ObjectKey{Namespace: namespace, Name: name})
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of %s: %w", name, err)
	}
	return FromKubeconfig(name, data)
}
