package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/bootstrap"
)

func newRestoreCommand(g *globals) *cobra.Command {
	f := &bootstrapFlags{}
	var from, identity, endpoint string
	cmd := &cobra.Command{
		Use:   "restore ENV --identity FILE",
		Short: "Make a new management cluster from git and a backup of the lost one, keeping every workload cluster",
		Long: `restore replaces the environment's lost management cluster (docs/disaster-recovery.md). It reads
the backup first (the newest in the environment's store, or --from) with the age key of --identity,
and refuses, before anything is created, one of another environment, of a newer format, damaged or
truncated, or not encrypted to that key. It then bootstraps a new management cluster from git as
bootstrap ENV does, with the tenants' directories held; restores the backup's workload clusters
into it as clusterctl move --from-directory does (paused, then unpaused), so that Cluster API takes
the running clusters back without replacing a machine; and releases the tenants, whose committed
values are the truth where the backup differs. Killed, it continues when run again. The lost
cluster's own machines are listed, never removed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.kubeconfig != "" {
				return fmt.Errorf("--kubeconfig: a restore makes its management cluster from a kind cluster of its own")
			}
			ids, err := backup.ReadIdentities(identity)
			if err != nil {
				return err
			}
			return g.runFlow(cmd, args[0], f, func(ctx context.Context, c bootstrap.Common, _ *workspace) (*bootstrap.Result, error) {
				return bootstrap.Restore(ctx, bootstrap.RestoreOptions{Common: c, Source: f.source, From: from, Identities: ids, StoreEndpoint: endpoint})
			})
		},
	}
	addBootstrapFlags(cmd, f)
	cmd.Flags().StringVar(&from, "from", "", "the backup to restore: its name, or the start of it (bootstrap backup list ENV); default: the newest")
	cmd.Flags().StringVar(&identity, "identity", "", "the age key file that decrypts the backups (the private key of a backup.recipients entry)")
	cmd.Flags().StringVar(&endpoint, "store-endpoint", "", "the store's address from this machine, if not backup.store.endpoint (http(s)://host[:port])")
	_ = cmd.MarkFlagRequired("identity")
	return cmd
}
