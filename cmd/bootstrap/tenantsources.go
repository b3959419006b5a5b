package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"cluster-init.dev/cluster-init/internal/tenantsources"
)

func newTenantSourcesCommand() *cobra.Command {
	opts := tenantsources.Options{}
	cmd := &cobra.Command{
		Use:    "tenant-sources",
		Short:  "Check each tenant's directory within bounds before its shard's controllers parse it (runs in the tenant-sources Deployment)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New())
			cfg, err := ctrlconfig.GetConfig()
			if err != nil {
				return fmt.Errorf("in-cluster configuration: %w", err)
			}
			opts.Bounds = tenantsources.DefaultBounds()
			return tenantsources.Run(ctrl.SetupSignalHandler(), cfg, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the platform's namespace, of the tenants' GitRepositories (default: $POD_NAMESPACE)")
	cmd.Flags().StringVar(&opts.StoreDir, "store", "/artifacts", "directory of the checked artifacts")
	cmd.Flags().StringVar(&opts.AdvertiseURL, "advertise-url", "", "URL at which the controllers reach the checked artifacts")
	cmd.Flags().StringVar(&opts.Listen, "listen", ":9090", "address of the checked artifacts' server")
	cmd.Flags().StringVar(&opts.Probes, "probes", ":8081", "address of the health probes")
	_ = cmd.MarkFlagRequired("advertise-url")
	return cmd
}
