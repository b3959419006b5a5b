package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// newControllerCommand is a hidden command that runs one of this project's controllers in the
// pod of its Deployment until the pod is stopped, with the pod's own credentials.
func newControllerCommand(use, short string, run func(ctx context.Context, cfg *rest.Config) error) *cobra.Command {
	return &cobra.Command{
		Use:    use,
		Short:  short,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctrl.SetLogger(zap.New())
			cfg, err := ctrlconfig.GetConfig()
			if err != nil {
				return fmt.Errorf("in-cluster configuration: %w", err)
			}
			return run(ctrl.SetupSignalHandler(), cfg)
		},
	}
}
