package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"cluster-init.dev/cluster-init/internal/changegate"
)

func newChangeGateCommand() *cobra.Command {
	opts := changegate.Options{}
	cmd := &cobra.Command{
		Use:    "change-gate",
		Short:  "Hold each new commit of the platform's repository until a backup before it is written (runs in the backup unit's change-gate Deployment)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New())
			cfg, err := ctrlconfig.GetConfig()
			if err != nil {
				return fmt.Errorf("in-cluster configuration: %w", err)
			}
			return changegate.Run(ctrl.SetupSignalHandler(), cfg, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the platform's namespace, of its sources and the backup CronJob (default: $POD_NAMESPACE)")
	cmd.Flags().StringVar(&opts.Probes, "probes", ":8081", "address of the health probes")
	return cmd
}
