package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"cluster-init.dev/cluster-init/internal/changegate"
)

func newChangeGateCommand() *cobra.Command {
	opts := changegate.Options{}
	cmd := newControllerCommand("change-gate",
		"Hold each new commit of the platform's repository until a backup before it is written (runs in the backup unit's change-gate Deployment)",
		func(ctx context.Context, cfg *rest.Config) error { return changegate.Run(ctx, cfg, opts) })
	cmd.Flags().StringVar(&opts.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the platform's namespace, of its sources and the backup CronJob (default: $POD_NAMESPACE)")
	cmd.Flags().StringVar(&opts.Probes, "probes", ":8081", "address of the health probes")
	return cmd
}
