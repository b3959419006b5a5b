package kube

import (
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// NewManager is a controller manager of this project's controllers in a cluster: the types of
// Scheme, no metrics server (nothing scrapes them), leader election in namespace under the lease
// id, and what else opts sets (the health probes, the cache).
func NewManager(cfg *rest.Config, id, namespace string, opts ctrl.Options) (ctrl.Manager, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	opts.Scheme = scheme
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.LeaderElection, opts.LeaderElectionID, opts.LeaderElectionNamespace = true, id, namespace
	return ctrl.NewManager(cfg, opts)
}
