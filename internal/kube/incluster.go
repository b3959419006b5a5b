package kube

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
)

// InCluster connects to the cluster this process runs in (a pod's service account, or $KUBECONFIG
// as controller-runtime finds it), as name.
func InCluster(name string) (*Cluster, error) {
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster configuration: %w", err)
	}
	return FromKubeconfig(name, kubeconfigOf(cfg))
}

// kubeconfigOf writes a REST config's server and credentials as a kubeconfig, the form every
// client of this project (and clusterctl) takes.
func kubeconfigOf(c *rest.Config) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["in-cluster"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthority: c.CAFile, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["in-cluster"] = &clientcmdapi.AuthInfo{Token: c.BearerToken, TokenFile: c.BearerTokenFile}
	cfg.Contexts["in-cluster"] = &clientcmdapi.Context{Cluster: "in-cluster", AuthInfo: "in-cluster"}
	cfg.CurrentContext = "in-cluster"
	data, _ := clientcmd.Write(*cfg)
	return data
}
