package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/cleanup"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/termtext"
)

func newCleanupCommand(g *globals) *cobra.Command {
	var valueFiles []string
	var output string
	var lost bool
	cmd := &cobra.Command{
		Use:   "cleanup ENV",
		Short: "Remove what a bootstrap created: the kind cluster and the CAPD containers of the cluster",
		Long: `Remove what a bootstrap of the environment created: its workload clusters and the Cluster API
cluster (through Cluster API while a cluster runs its controllers), the kind cluster (only the one
marked as this environment's), the CAPD containers of its clusters and its management kubeconfig.
A self-managed management cluster whose machines are not containers of this host (OpenStack)
cannot delete itself: it is taken back into a kind cluster with the same providers (clusterctl
move) and deleted there, its provider removing every server, port, floating IP and security
group it made; give the --values the bootstrap was given (registry mirrors, proxies), which that
kind cluster needs too. What the provider recorded and could not remove is named, and the kind
cluster kept, the only record of it.
An adopted management cluster (bootstrap --adopt) stays: its workload clusters are deleted, then
what cluster-init installed into it (the units, dependents first, each through Flux; the release;
Flux), each step bounded in time.
A container is removed directly only when it is named after a machine or load balancer of the
environment's clusters, as they define them or as recorded at the bootstrap: another kind or CAPD
cluster with the same name is left alone, and named. It reads only the names it needs from the
values, and works whatever they are.
With --lost, after a restore (bootstrap restore), only what the lost management cluster left
behind goes, its own machines as the restore recorded them from the backup: their containers that
still run on this host, and their servers at an OpenStack cloud, deleted there with the new
cluster's credentials together with the ports, floating IPs and load-balancer members made for
them (the network, router, security groups and load balancer, which the new cluster of the same
name took over, stay). Nothing of the new management cluster or of any cluster it defines is
removed; a machine at another provider is named with its provider ID.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := g.openWithValues(args[0], valueFiles)
			if err != nil {
				return err
			}
			v, err := w.Settings()
			if err != nil {
				return err
			}
			dir, err := stateDir()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			logf := func(format string, a ...any) { fmt.Fprintln(out, termtext.Block(fmt.Sprintf(format, a...), "    ")) }
			if lost {
				// A cloud's deletions are waited for, each bounded (lostservers).
				ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Minute)
				defer cancel()
				_, err := cleanup.RemoveLostOf(ctx, cleanup.DockerCLI{}, dir, w.Env.Name, logf)
				return err
			}
			// The progress of a take-back, checked before anything is removed.
			printer, err := g.printer(cmd, output, time.Now())
			if err != nil {
				return err
			}
			// Every wait inside is bounded; this bounds the requests to a cluster that stops answering.
			ctx, cancel := context.WithTimeout(cmd.Context(), 45*time.Minute)
			defer cancel()
			kind := kindcluster.New(dir.KindClusters(), func(msg string) { fmt.Fprintln(out, "kind:", termtext.Block(msg, "  ")) })
			return cleanup.Run(ctx, kind, cleanup.DockerCLI{}, cleanup.Target{
				Environment: w.Env.Name,
				State:       dir,
				Kind:        v.BootstrapCluster.Name,
				Cluster:     v.Cluster.Name,
				CAPD:        v.Cluster.OnDocker(),
				Bootstrap:   g.common(w, dir, 30*time.Minute, "", printer),
			}, logf)
		},
	}
	cmd.Flags().StringArrayVar(&valueFiles, "values", nil, "the values files the bootstrap was given (repeatable): the kind cluster a self-managed cluster is taken back into needs them")
	cmd.Flags().BoolVar(&lost, "lost", false, "after a restore: remove only what the lost management cluster left: its containers on this host, its servers at an OpenStack cloud")
	cmd.Flags().StringVarP(&output, "output", "o", "plain", "progress of the kind cluster a cluster is taken back into: plain, json or tty")
	return cmd
}
