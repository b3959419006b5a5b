package changegate

import (
	"context"
	"fmt"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"cluster-init.dev/cluster-init/internal/backupjob"
	"cluster-init.dev/cluster-init/internal/kube"
)

// Options are the gate's settings.
type Options struct {
	// Namespace is the platform's.
	Namespace string
	// Probes is the address of the health probes.
	Probes string
}

// Run runs the gate until ctx ends, one pod at a time (a lease).
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	ns := map[string]cache.Config{opts.Namespace: {}}
	mgr, err := kube.NewManager(cfg, "cluster-init-change-gate", opts.Namespace, ctrl.Options{
		HealthProbeBindAddress:        opts.Probes,
		LeaderElectionReleaseOnCancel: true,
		// All it reads is in the platform's namespace.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&sourcev1.GitRepository{}: {Namespaces: ns},
			&batchv1.Job{}:            {Namespaces: ns},
			&batchv1.CronJob{}:        {Namespaces: ns},
			&corev1.ConfigMap{}:       {Namespaces: ns},
		}},
	})
	if err != nil {
		return fmt.Errorf("change gate: %w", err)
	}
	r := &Reconciler{Client: mgr.GetClient(), Namespace: opts.Namespace, Events: mgr.GetEventRecorder("change-gate"), RetryAfter: backupjob.BeforeChangeRetry}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("change gate: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
