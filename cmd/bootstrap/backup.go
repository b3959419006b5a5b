package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/backupjob"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/termtext"
)

func newBackupCommand(g *globals) *cobra.Command {
	var kubeconfig, kubeContext string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "backup ENV",
		Short: "Take a backup of the management cluster now, and wait for it",
		Long: `Take a backup of the environment's management cluster now, as its schedule does (values backup,
docs/disaster-recovery.md): the cluster's backup Job runs once, with the reason on-demand, and the
command follows it until the backup is in the store. The management cluster is read with the
kubeconfig bootstrap wrote, or with --kubeconfig.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, clusters, err := g.openClusters(args[0], kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			mgmt := clusters[len(clusters)-1]
			start := time.Now()
			job, err := backupjob.Start(ctx, mgmt.Client, names.Namespace, backup.ReasonOnDemand, start)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "started Job %s/%s\n", names.Namespace, job)
			st, err := backupjob.Wait(ctx, mgmt, names.Namespace, job, func(what string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "waiting (%s): %s\n", time.Since(start).Round(time.Second), termtext.Line(what))
			})
			if err != nil {
				return err
			}
			if s := st.LastSuccess; s != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s) in %s\n", termtext.Line(s.Key), humanBytes(s.Size), s.Finished.Sub(s.Started).Round(time.Second))
				for _, ns := range s.Skipped {
					fmt.Fprintln(cmd.OutOrStdout(), termtext.Line(fmt.Sprintf("left out namespace %s: %s", ns.Name, ns.Skipped)))
				}
			}
			return nil
		},
	}
	addKubeconfigFlags(cmd, &kubeconfig, &kubeContext, "the management cluster, if bootstrap did not write its kubeconfig here")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long to wait for the backup")
	cmd.AddCommand(newBackupListCommand(g))
	return cmd
}

func newBackupListCommand(g *globals) *cobra.Command {
	var endpoint string
	cmd := &cobra.Command{
		Use:   "list ENV",
		Short: "List the environment's backups in its object store",
		Long: `List the environment's backups in the object store of its values (backup.store), with the
store's keys of its secrets (credentials.backup): name, time, reason and size, oldest first. It
needs no cluster: it is what a restore chooses from. --store-endpoint reaches the store by
another address than the clusters do.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := g.open(args[0])
			if err != nil {
				return err
			}
			v, err := w.Settings()
			if err != nil {
				return err
			}
			if endpoint != "" {
				v.Backup.Store.Endpoint = endpoint
			}
			store, err := backupjob.OpenStore(v.Backup, v.Credentials.Backup)
			if err != nil {
				return fmt.Errorf("environment %s: %w", w.Env.Name, err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			name := w.Env.ClusterName()
			if name == "" {
				return fmt.Errorf("environment %s: its directory's name is no DNS label, and its backups are named after it", w.Env.Name)
			}
			entries, err := backupjob.List(ctx, store, name)
			if err != nil {
				return err
			}
			if len(entries) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no backup of %s in %s\n", name, store)
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCREATED\tREASON\tSIZE")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", termtext.Line(e.Key), e.Created.Format(time.RFC3339), e.Reason, humanBytes(e.Size))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&endpoint, "store-endpoint", "", "the store's address from this machine, if not backup.store.endpoint (http(s)://host[:port])")
	return cmd
}

// newBackupJobCommand is what the backup Job runs in the management cluster.
func newBackupJobCommand() *cobra.Command {
	var namespace, configFile, keysDir, reason, eventsAddress string
	cmd := &cobra.Command{
		Use:    "backup-job",
		Short:  "Back the management cluster up to the object store (runs in the backup Job)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := backupjob.ReadConfig(configFile)
			if err != nil {
				return err
			}
			here, err := kube.InCluster("management")
			if err != nil {
				return err
			}
			work, err := os.MkdirTemp("", "backup-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			events, err := backupjob.NewFluxEvents(here, namespace, names.BackupUnit, eventsAddress, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			res, err := backupjob.Run(cmd.Context(), here, backupjob.RunOptions{Namespace: namespace, Config: cfg, StoreKeys: keysDir,
				Reason: reason, Version: buildVersion(), WorkDir: work, Notifier: events})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s)\n", termtext.Line(res.Entry.Key), humanBytes(res.Entry.Size))
			for _, ns := range res.Skipped {
				fmt.Fprintln(cmd.OutOrStdout(), termtext.Line(fmt.Sprintf("left out namespace %s: %s", ns.Name, ns.Skipped)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the cluster-init release (default: $POD_NAMESPACE)")
	cmd.Flags().StringVar(&configFile, "config", "", "the backup configuration the chart rendered")
	cmd.Flags().StringVar(&keysDir, "store-keys", "", "the directory of the object store's keys")
	cmd.Flags().StringVar(&reason, "reason", envOr(backupjob.ReasonEnv, backup.ReasonSchedule), "why the backup is taken")
	cmd.Flags().StringVar(&eventsAddress, "events-address", "", "Flux's events endpoint (notification-controller)")
	_ = cmd.MarkFlagRequired("config")
	_ = cmd.MarkFlagRequired("store-keys")
	return cmd
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func humanBytes(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }

// buildVersion names the binary that wrote a backup: its module version and commit.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
		}
	}
	return v
}
