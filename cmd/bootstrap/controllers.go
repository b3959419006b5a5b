package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/controllers"
)

func newManagementControllersCommand() *cobra.Command {
	var opts controllers.Options
	var management string
	cmd := &cobra.Command{
		Use: "management-controllers",
		// The name of this command before it hosted more than the placement controller: a
		// Deployment of the release before it still runs it until the upgrade replaces it.
		Aliases: []string{"placement-controller"},
		Short:   "Run the management cluster's controllers: the placement of Applications, the kubeconfigs the tenants' people may get, the machines' look-again (runs in the applications unit's Deployment)",
		Hidden:  true,
		Args:    cobra.NoArgs,
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
