package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/controllers"
)

func newPlacementControllerCommand() *cobra.Command {
	var opts controllers.Options
	var management string
	cmd := &cobra.Command{
		Use:    "placement-controller",
		Short:  "Place the Applications on the clusters of this management cluster, and keep the kubeconfigs the tenants' people may get (runs in the applications unit's Deployment)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, name, ok := strings.Cut(management, "/")
			if !ok || ns == "" || name == "" {
				return fmt.Errorf("--management-cluster %q: expected NAMESPACE/NAME of the management cluster's Cluster", management)
			}
			opts.Rules.Management = client.ObjectKey{Namespace: ns, Name: name}
			return controllers.Run(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the leader election lease (default: $POD_NAMESPACE)")
	cmd.Flags().StringVar(&management, "management-cluster", "", "NAMESPACE/NAME of the management cluster's own Cluster")
	cmd.Flags().BoolVar(&opts.Rules.OnManagement, "on-management", false, "applications may run on the management cluster (values: applications.on_management)")
	cmd.Flags().StringSliceVar(&opts.Rules.SelectorNamespaces, "selector-namespaces", nil, "namespaces, besides an application's own, whose Clusters its selector may match (values: applications.selector_namespaces)")
	return cmd
}
