package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"cluster-init.dev/cluster-init/internal/tenantsources"
)

func newTenantSourcesCommand() *cobra.Command {
	opts := tenantsources.Options{Bounds: tenantsources.DefaultBounds()}
	cmd := newControllerCommand("tenant-sources",
		"Check each tenant's directory within bounds before its shard's controllers parse it (runs in the tenant-sources Deployment)",
		func(ctx context.Context, cfg *rest.Config) error { return tenantsources.Run(ctx, cfg, opts) })
	cmd.Flags().StringVar(&opts.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the platform's namespace, of the tenants' GitRepositories (default: $POD_NAMESPACE)")
	cmd.Flags().StringVar(&opts.StoreDir, "store", "/artifacts", "directory of the checked artifacts")
	cmd.Flags().StringVar(&opts.AdvertiseURL, "advertise-url", "", "URL at which the controllers reach the checked artifacts")
	cmd.Flags().StringVar(&opts.Listen, "listen", ":9090", "address of the checked artifacts' server")
	cmd.Flags().StringVar(&opts.Probes, "probes", ":8081", "address of the health probes")
	_ = cmd.MarkFlagRequired("advertise-url")
	return cmd
}
