package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/kubeconfigreaders"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/placement"
)

func newPlacementControllerCommand() *cobra.Command {
	var namespace, management string
	var rules placement.Rules
	cmd := &cobra.Command{
		Use:    "placement-controller",
		Short:  "Place the Applications on the clusters of this management cluster, and keep the kubeconfigs the tenants' people may get (runs in the applications unit's Deployment)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New())
			ns, name, ok := strings.Cut(management, "/")
			if !ok || ns == "" || name == "" {
				return fmt.Errorf("--management-cluster %q: expected NAMESPACE/NAME of the management cluster's Cluster", management)
			}
			rules.Management = client.ObjectKey{Namespace: ns, Name: name}
			cfg, err := ctrlconfig.GetConfig()
			if err != nil {
				return fmt.Errorf("in-cluster configuration: %w", err)
			}
			scheme, err := kube.Scheme()
			if err != nil {
				return err
			}
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                  scheme,
				Metrics:                 metricsserver.Options{BindAddress: "0"},
				HealthProbeBindAddress:  ":8081",
				LeaderElection:          true,
				LeaderElectionID:        "cluster-init-placement",
				LeaderElectionNamespace: namespace,
				Cache:                   cache.Options{ByObject: kubeconfigreaders.CacheOptions()},
			})
			if err != nil {
				return fmt.Errorf("placement controller: %w", err)
			}
			if err := (&placement.Reconciler{Client: mgr.GetClient(), RequeueAfter: time.Minute, Rules: rules}).SetupWithManager(mgr); err != nil {
				return fmt.Errorf("placement controller: %w", err)
			}
			// The tenants' people get the kubeconfigs of their clusters, by name, as they come.
			if err := (&kubeconfigreaders.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
				return fmt.Errorf("placement controller: %w", err)
			}
			// With no CLI running (a machine added or replaced by a commit), this controller asks
			// the infrastructure providers to look again for the nodes of their machines
			// (machines.AskToLookAgain says why they can give up), as bootstrap does while it runs.
			if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
				lookAgain(ctx, mgr.GetClient())
				return nil
			})); err != nil {
				return fmt.Errorf("placement controller: %w", err)
			}
			if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
				return err
			}
			if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
				return err
			}
			// Stopped by SIGTERM when its pod goes: the lease is released at once.
			return mgr.Start(ctrl.SetupSignalHandler())
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the leader election lease (default: $POD_NAMESPACE)")
	cmd.Flags().StringVar(&management, "management-cluster", "", "NAMESPACE/NAME of the management cluster's own Cluster")
	cmd.Flags().BoolVar(&rules.OnManagement, "on-management", false, "applications may run on the management cluster (values: applications.on_management)")
	cmd.Flags().StringSliceVar(&rules.SelectorNamespaces, "selector-namespaces", nil, "namespaces, besides an application's own, whose Clusters its selector may match (values: applications.selector_namespaces)")
	return cmd
}

// lookAgain runs machines.AskToLookAgainEverywhere every half NodeWait until ctx ends; a failed
// look is logged and tried again at the next tick.
func lookAgain(ctx context.Context, c client.Client) {
	log := ctrl.Log.WithName("look-again")
	tick := time.NewTicker(machines.NodeWait / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		asked, err := machines.AskToLookAgainEverywhere(ctx, c, time.Now())
		for _, m := range asked {
			log.Info("asked the infrastructure provider to look again for the node of a machine", "machine", m.String())
		}
		if err != nil && ctx.Err() == nil {
			log.Error(err, "ask the infrastructure providers to look again for the nodes of their machines")
		}
	}
}
