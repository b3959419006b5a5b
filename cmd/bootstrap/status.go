package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/bootstrap"
	"cluster-init.dev/cluster-init/internal/cleanup"
	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/render"
)

func newStatusCommand(g *globals) *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "status ENV",
		Short: "Show the state of every unit of a bootstrap once",
		Long: `Show the unit tree of the environment once: in its kind bootstrap cluster while there is one,
and in its management cluster once the pivot wrote its kubeconfig (both while the bootstrap
cluster is kept).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, vals, err := g.openBootstrap(cmd, args[0])
			if err != nil {
				return err
			}
			clusters, err := w.statusClusters(vals, kubeconfig)
			if err != nil {
				return err
			}
			clusterName, _, _ := unstructured.NestedString(vals, "cluster", "name")
			// A single look: a cluster that does not answer within this is reported, not waited for.
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			for i, c := range clusters {
				obs, err := progress.Source{Cluster: c, Namespace: environment.Namespace, Release: render.ReleaseName,
					ClusterName: clusterName, ClusterUnit: "cluster"}.Observe(ctx)
				if err != nil {
					return fmt.Errorf("read the units of the %s cluster: %w", c.Name, err)
				}
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				snap := progress.NewTracker(time.Now()).Update(obs, time.Now())
				progress.WriteStatus(cmd.OutOrStdout(), fmt.Sprintf("%s, %s cluster (%s)", w.env.Name, c.Name, c.Config.Host), snap)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the cluster to read, if it is not one of cluster-init's")
	return cmd
}

// statusClusters are the clusters that hold the environment's units: the one given, else the
// kind bootstrap cluster and the management cluster, whichever exist.
func (w *workspace) statusClusters(vals map[string]any, kubeconfig string) ([]*kube.Cluster, error) {
	if kubeconfig != "" {
		c, err := kube.FromFile("given", kubeconfig)
		if err != nil {
			return nil, err
		}
		return []*kube.Cluster{c}, nil
	}
	dir, err := stateDir()
	if err != nil {
		return nil, err
	}
	var clusters []*kube.Cluster
	kindName, _, _ := unstructured.NestedString(vals, "bootstrap_cluster", "name")
	m := kindcluster.New(dir, func(string) {})
	if ok, err := m.Exists(kindName); err != nil {
		return nil, err
	} else if ok {
		c, err := m.Connect(kindName)
		if err != nil {
			return nil, err
		}
		clusters = append(clusters, c)
	}
	path := bootstrap.ManagementKubeconfig(dir, w.env.Name)
	if _, err := os.Stat(path); err == nil {
		c, err := kube.FromFile("management", path)
		if err != nil {
			return nil, err
		}
		clusters = append(clusters, c)
	}
	if len(clusters) == 0 {
		return nil, fmt.Errorf("no bootstrap of %s here: no kind cluster %s and no management kubeconfig %s: run `bootstrap %s` first", w.env.Name, kindName, path, w.env.Name)
	}
	return clusters, nil
}

// openBootstrap opens an environment and renders its values in the bootstrap context.
func (g *globals) openBootstrap(cmd *cobra.Command, envName string) (*workspace, map[string]any, error) {
	w, err := g.open(envName)
	if err != nil {
		return nil, nil, err
	}
	res, err := render.Render(cmd.Context(), w.renderOptions(render.ContextBootstrap))
	if err != nil {
		return nil, nil, err
	}
	return w, res.Values, nil
}

func newCleanupCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cleanup ENV",
		Short: "Remove what a bootstrap created: the kind cluster and the CAPD containers of the cluster",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, vals, err := g.openBootstrap(cmd, args[0])
			if err != nil {
				return err
			}
			dir, err := stateDir()
			if err != nil {
				return err
			}
			str := func(f ...string) string { s, _, _ := unstructured.NestedString(vals, f...); return s }
			out := cmd.OutOrStdout()
			return cleanup.Run(cmd.Context(), kindcluster.New(dir, func(msg string) { fmt.Fprintln(out, "kind:", msg) }), cleanup.Target{
				Environment:          w.env.Name,
				Kind:                 str("bootstrap_cluster", "name"),
				Namespace:            environment.Namespace,
				Cluster:              str("cluster", "name"),
				CAPD:                 str("cluster", "providers", "infrastructure") == "capd",
				ManagementKubeconfig: bootstrap.ManagementKubeconfig(dir, w.env.Name),
			}, func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) })
		},
	}
}
