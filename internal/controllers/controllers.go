// Package controllers is the controller manager that runs in the management cluster (the
// applications unit's Deployment): the placement of Applications (internal/placement), the
// kubeconfigs a tenant's people may get (internal/kubeconfigreaders), and the machines'
// look-again (machines.AskToLookAgainEverywhere) when no CLI runs.
package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/kubeconfigreaders"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/placement"
)

// Options are the manager's settings.
type Options struct {
	// Namespace holds the leader election lease.
	Namespace string
	// Rules are where Applications may run.
	Rules placement.Rules
}

// Run runs the controllers with the in-cluster configuration until SIGTERM (its pod going: the
// lease is released at once).
func Run(opts Options) error {
	ctrl.SetLogger(zap.New())
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return fmt.Errorf("in-cluster configuration: %w", err)
	}
	mgr, err := kube.NewManager(cfg, "cluster-init-placement", opts.Namespace, ctrl.Options{
		HealthProbeBindAddress: ":8081",
		Cache:                  cache.Options{ByObject: kubeconfigreaders.CacheOptions()},
	})
	if err != nil {
		return fmt.Errorf("controller manager: %w", err)
	}
	if err := (&placement.Reconciler{Client: mgr.GetClient(), RequeueAfter: time.Minute, Rules: opts.Rules}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("placement controller: %w", err)
	}
	// The tenants' people get the kubeconfigs of their clusters, by name, as they come.
	if err := (&kubeconfigreaders.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("kubeconfig readers controller: %w", err)
	}
	// With no CLI running (a machine added or replaced by a commit), the infrastructure providers
	// are asked to look again for the nodes of their machines (machines.AskToLookAgain says why
	// they can give up), as bootstrap does while it runs.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		lookAgain(ctx, mgr.GetClient(), ctrl.Log.WithName("look-again"))
		return nil
	})); err != nil {
		return fmt.Errorf("look-again: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// lookAgain runs machines.AskToLookAgainEverywhere every half NodeWait until ctx ends; a failed
// look is logged and tried again at the next tick.
func lookAgain(ctx context.Context, c client.Client, log logr.Logger) {
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
