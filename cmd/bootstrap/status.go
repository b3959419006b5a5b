package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, vals, err := g.openBootstrap(cmd, args[0])
			if err != nil {
				return err
			}
			var c *kube.Cluster
			if kubeconfig != "" {
				c, err = kube.FromFile("bootstrap", kubeconfig)
			} else {
				c, err = w.kindCluster(vals)
			}
			if err != nil {
				return err
			}
			clusterName, _, _ := unstructured.NestedString(vals, "cluster", "name")
			obs, err := progress.Source{Cluster: c, Namespace: environment.Namespace, Release: render.ReleaseName,
				ClusterName: clusterName, ClusterUnit: "cluster"}.Observe(cmd.Context())
			if err != nil {
				return err
			}
			snap := progress.NewTracker(time.Now()).Update(obs, time.Now())
			progress.WriteStatus(cmd.OutOrStdout(), fmt.Sprintf("%s (cluster %s)", w.env.Name, c.Config.Host), snap)
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the bootstrap cluster, if it is not cluster-init's kind cluster")
	return cmd
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

// kindCluster connects to the kind bootstrap cluster of the environment.
func (w *workspace) kindCluster(vals map[string]any) (*kube.Cluster, error) {
	dir, err := stateDir()
	if err != nil {
		return nil, err
	}
	name, _, _ := unstructured.NestedString(vals, "bootstrap_cluster", "name")
	m := kindcluster.New(dir, func(string) {})
	if ok, err := m.Exists(name); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("no kind cluster %s: run `bootstrap %s` first", name, w.env.Name)
	}
	return m.Connect(name)
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
				Environment: w.env.Name,
				Kind:        str("bootstrap_cluster", "name"),
				Namespace:   environment.Namespace,
				Cluster:     str("cluster", "name"),
				CAPD:        str("cluster", "providers", "infrastructure") == "capd",
			}, func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) })
		},
	}
}
