package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/status"
	"cluster-init.dev/cluster-init/internal/values"
)

func newStatusCommand(g *globals) *cobra.Command {
	var kubeconfig, kubeContext, output string
	var watch bool
	cmd := &cobra.Command{
		Use:   "status ENV [--watch]",
		Short: "Show the state of every unit, workload cluster and application once, and the commit each runs",
		Long: `Show the unit tree of the environment once: in its kind bootstrap cluster while there is one,
and in its management cluster once the pivot wrote its kubeconfig (both while the bootstrap
cluster is kept), with the commit each unit, tenant directory and application runs and whether
its source has fetched a newer one (it is behind its branch). It reads only the names it needs from
the values, and works whatever they are. --watch follows the units of the management cluster (the
bootstrap cluster before the pivot) live, as bootstrap shows them, until interrupted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, v, clusters, err := g.openClusters(args[0], kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			if watch {
				if len(clusters) == 0 {
					return fmt.Errorf("environment %s has no cluster on this machine to watch: give its --kubeconfig", w.Env.Name)
				}
				return g.watchStatus(cmd, output, progress.Source{Cluster: clusters[len(clusters)-1], ClusterName: v.Cluster.Name, Revisions: true})
			}
			// A single look: a cluster that does not answer within this is reported, not waited for.
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			var unread []error
			for i, c := range clusters {
				look, err := status.LookAt(ctx, c, v.Cluster.Name)
				if err != nil {
					unread = append(unread, err)
				}
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				if look.UnitsRead {
					snap := progress.NewTracker(time.Now()).Update(look.Units, time.Now())
					progress.WriteStatus(cmd.OutOrStdout(), fmt.Sprintf("%s, %s cluster (%s)", w.Env.Name, c.Name, c.Config.Host), snap)
				}
				progress.WriteCluster(cmd.OutOrStdout(), look.Units.Cluster, time.Now())
				line, troubles := look.Backup.Summary(time.Now())
				progress.WriteSection(cmd.OutOrStdout(), line, troubles)
				progress.WriteWorkloadClusters(cmd.OutOrStdout(), look.Tenants)
				progress.WriteApplications(cmd.OutOrStdout(), look.Apps, look.Revisions)
			}
			return errors.Join(unread...)
		},
	}
	addKubeconfigFlags(cmd, &kubeconfig, &kubeContext, "the cluster to read, if it is not one of cluster-init's")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the units live until interrupted")
	cmd.Flags().StringVarP(&output, "output", "o", "auto", "with --watch: auto (a live view on a terminal, else plain), tty, plain or json")
	return cmd
}

// watchStatus shows the units of one cluster live, with the printer of bootstrap, until the
// command is interrupted; a look that fails is said and tried again.
func (g *globals) watchStatus(cmd *cobra.Command, output string, src progress.Source) error {
	start := time.Now()
	p, err := g.printer(cmd, output, start)
	if err != nil {
		return err
	}
	defer p.Close()
	tracker := progress.NewTracker(start)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		obs, err := src.Observe(ctx)
		cancel()
		if err != nil {
			p.Waiting("the "+src.Cluster.Name+" cluster to answer", []string{err.Error()})
		} else {
			p.Units(tracker.Update(obs, time.Now()))
		}
		select {
		case <-cmd.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}

// addKubeconfigFlags adds --kubeconfig and --kube-context (as Helm names it: --context is the
// release context of the offline commands), read the way kubectl reads them.
func addKubeconfigFlags(cmd *cobra.Command, kubeconfig, kubeContext *string, what string) {
	cmd.Flags().StringVar(kubeconfig, "kubeconfig", "", what)
	cmd.Flags().StringVar(kubeContext, "kube-context", "", "the context of the kubeconfig to use (default: its current context)")
}

// openClusters opens the environment and connects to the clusters that hold its units: the one
// of --kubeconfig, else those of status.Clusters.
func (g *globals) openClusters(env, kubeconfig, kubeContext string) (*workspace, values.Settings, []*kube.Cluster, error) {
	w, err := g.open(env)
	if err != nil {
		return nil, values.Settings{}, nil, err
	}
	v, err := w.Settings()
	if err != nil {
		return nil, values.Settings{}, nil, err
	}
	if kubeconfig != "" {
		c, err := kube.Load("given", kubeconfig, kubeContext)
		if err != nil {
			return nil, values.Settings{}, nil, err
		}
		return w, v, []*kube.Cluster{c}, nil
	}
	dir, err := stateDir()
	if err != nil {
		return nil, values.Settings{}, nil, err
	}
	clusters, err := status.Clusters(dir, w.Env.Name, v.BootstrapCluster.Name)
	return w, v, clusters, err
}
