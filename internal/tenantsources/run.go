package tenantsources

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"cluster-init.dev/cluster-init/internal/boundedfile"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/tenantshards"
)

// DefaultBounds are the bounds of a tenant's directory, the CLI's own for the same files
// (internal/boundedfile: a manifest's size, documents, aliases and depth; a directory's files and
// bytes, and its aliases together), so that what validate accepts the gate hands on; and its
// artifact, of at most 8 MiB compressed.
func DefaultBounds() Bounds {
	return Bounds{
		ArtifactBytes: 8 << 20,
		Files:         boundedfile.MaxTreeFiles,
		FileBytes:     int64(boundedfile.Manifest.MaxBytes),
		TotalBytes:    int64(boundedfile.Manifest.TreeBytes()),
		CheckManifest: boundedfile.Manifest.CheckIn,
	}
}

// Options are the gate's settings.
type Options struct {
	// Namespace is the platform's.
	Namespace string
	// StoreDir holds the checked artifacts; AdvertiseURL is where the controllers reach them.
	StoreDir, AdvertiseURL string
	// Listen is the address of the artifacts' server, Probes of the health probes.
	Listen, Probes string
	Bounds         Bounds
}

// Run runs the gate until ctx ends: the reconciler (one at a time, under a lease), the server of
// the checked artifacts, and the removal of the shards of tenants that are gone
// (internal/tenantshards).
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	mgr, err := kube.NewManager(cfg, "cluster-init-tenant-sources", opts.Namespace, ctrl.Options{
		HealthProbeBindAddress: opts.Probes,
		// A pod that goes lets the next one lead at once, not after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		// The tenants' sources are in the platform's namespace: nothing else is cached of them.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&sourcev1.GitRepository{}:    {Namespaces: map[string]cache.Config{opts.Namespace: {}}},
			&kustomizev1.Kustomization{}: {Namespaces: map[string]cache.Config{opts.Namespace: {}}},
			&appsv1.Deployment{}:         {Namespaces: map[string]cache.Config{names.FluxNamespace: {}}},
		}},
	})
	if err != nil {
		return fmt.Errorf("tenant sources: %w", err)
	}
	store := &Store{Dir: opts.StoreDir, BaseURL: opts.AdvertiseURL}
	r := &Reconciler{
		Client: mgr.GetClient(), Namespace: opts.Namespace, Store: store,
		HTTP:   &http.Client{Timeout: time.Minute},
		Bounds: opts.Bounds, Events: mgr.GetEventRecorder("tenant-sources"), Direct: mgr.GetAPIReader(), Resync: 10 * time.Minute,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("tenant sources: %w", err)
	}
	// In the same process, the shards of tenants that are gone.
	if err := (&tenantshards.Reconciler{Client: mgr.GetClient(), Namespace: opts.Namespace, Recheck: 10 * time.Minute}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("tenant shards: %w", err)
	}
	srv := &http.Server{Addr: opts.Listen, Handler: store, ReadHeaderTimeout: 10 * time.Second}
	if err := mgr.Add(serveAlways(func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve the checked artifacts: %w", err)
		}
		return nil
	})); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// serveAlways is a runnable that runs whether or not this pod leads: the store serves what it
// holds from the start, and is filled as the leader checks each directory.
type serveAlways func(ctx context.Context) error

func (f serveAlways) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection tells the manager to run it on every pod.
func (serveAlways) NeedLeaderElection() bool { return false }
