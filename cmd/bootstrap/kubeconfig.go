package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/atomicfile"
	"cluster-init.dev/cluster-init/internal/clusteraccess"
)

func newKubeconfigCommand(g *globals) *cobra.Command {
	var kubeconfig, kubeContext, namespace, output string
	cmd := &cobra.Command{
		Use:   "kubeconfig ENV CLUSTER",
		Short: "Write the kubeconfig of a cluster of the environment's management cluster to a file",
		Long: `Write the admin kubeconfig of a cluster the environment's management cluster runs (a tenant's
workload cluster, or the management cluster itself), as Cluster API wrote it, to a file of mode
0600, and say how to use it. The management cluster is read with the kubeconfig bootstrap wrote,
or with --kubeconfig: a tenant's people, with their own identity (member of the tenant's
workload_clusters.tenants.<namespace>.readers_group), give --namespace, their tenant's. The
kubeconfig is never printed.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, _, clusters, err := g.openClusters(args[0], kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			// The management cluster: the last one (the kind cluster comes first while it is kept).
			mgmt := clusters[len(clusters)-1]
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			key, err := clusteraccess.Find(ctx, mgmt.Client, namespace, args[1])
			if err != nil {
				return fmt.Errorf("in the %s cluster (%s): %w", mgmt.Name, mgmt.Config.Host, err)
			}
			data, err := clusteraccess.Kubeconfig(ctx, mgmt.Client, key)
			if err != nil {
				return err
			}
			if output == "" {
				dir, err := stateDir()
				if err != nil {
					return err
				}
				output = dir.Environment(w.Env.Name).WorkloadKubeconfig(key.Namespace, key.Name)
			}
			if err := os.MkdirAll(filepath.Dir(output), 0o700); err != nil {
				return fmt.Errorf("write the kubeconfig of %s: %w", key, err)
			}
			if err := atomicfile.Write(output, data, 0o600); err != nil {
				return fmt.Errorf("write the kubeconfig of %s: %w", key, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote the kubeconfig of cluster %s to %s\nuse it: export KUBECONFIG=%s\n", key, output, output)
			return nil
		},
	}
	addKubeconfigFlags(cmd, &kubeconfig, &kubeContext, "the management cluster to read (default: the one bootstrap wrote for ENV)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the cluster's namespace (default: the namespace of the only cluster of that name)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "the file to write (default: in the state directory, environments/ENV/clusters/NAMESPACE.CLUSTER.kubeconfig)")
	return cmd
}
