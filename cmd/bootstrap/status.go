package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/placement"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/revisions"
	"cluster-init.dev/cluster-init/internal/termtext"
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
					return fmt.Errorf("environment %s has no cluster on this machine to watch: give its --kubeconfig", w.env.Name)
				}
				return g.watchStatus(cmd, output, progress.Source{Cluster: clusters[len(clusters)-1], ClusterName: v.Cluster.Name, Revisions: true})
			}
			// A single look: a cluster that does not answer within this is reported, not waited for.
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			var unread []error
			for i, c := range clusters {
				look, err := lookAt(ctx, c, v.Cluster.Name)
				if err != nil {
					unread = append(unread, err)
				}
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				if look.unitsRead {
					snap := progress.NewTracker(time.Now()).Update(look.units, time.Now())
					progress.WriteStatus(cmd.OutOrStdout(), fmt.Sprintf("%s, %s cluster (%s)", w.env.Name, c.Name, c.Config.Host), snap)
				}
				progress.WriteWorkloadClusters(cmd.OutOrStdout(), look.tenants)
				writeApplications(cmd.OutOrStdout(), look.apps, look.revisions)
			}
			return errors.Join(unread...)
		},
	}
	addKubeconfigFlags(cmd, &kubeconfig, &kubeContext, "the cluster to read, if it is not one of cluster-init's")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the units live until interrupted")
	cmd.Flags().StringVarP(&output, "output", "o", "auto", "with --watch: auto (a live view on a terminal, else plain), tty, plain or json")
	return cmd
}

// clusterLook is what status shows of one cluster.
type clusterLook struct {
	units     progress.Observed
	tenants   []progress.Tenant
	apps      []appsv1.Application
	revisions map[string]map[string]revisions.Revision // by namespace/name of the application, then cluster
	// unitsRead is false when the units could not be read: there is no tree to show.
	unitsRead bool
}

// lookAt reads one cluster's units, workload clusters and applications, the three side by side:
// on a management cluster loaded with clusters coming up, each read waits, and status must stay
// quick. A part that cannot be read does not keep the others from being shown: each part read is
// in look, and err says which were not.
func lookAt(ctx context.Context, c *kube.Cluster, clusterName string) (look clusterLook, err error) {
	var unitsErr, tenantsErr, appsErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		if look.units, unitsErr = (progress.Source{Cluster: c, ClusterName: clusterName, Revisions: true}).Observe(ctx); unitsErr != nil {
			unitsErr = fmt.Errorf("read the units of the %s cluster: %w", c.Name, unitsErr)
		}
	})
	wg.Go(func() {
		if look.tenants, tenantsErr = progress.ObserveWorkloadClusters(ctx, c.Client); tenantsErr != nil {
			tenantsErr = fmt.Errorf("read the workload clusters of the %s cluster: %w", c.Name, tenantsErr)
		}
	})
	wg.Go(func() {
		apps, err := placement.List(ctx, c.Client)
		if err != nil {
			appsErr = fmt.Errorf("read the applications of the %s cluster: %w", c.Name, err)
			return
		}
		rd := revisions.NewReader(c.Client)
		revs := map[string]map[string]revisions.Revision{}
		for i := range apps {
			if revs[apps[i].Namespace+"/"+apps[i].Name], err = placement.Revisions(ctx, c.Client, rd, &apps[i]); err != nil {
				appsErr = err
				return
			}
		}
		look.apps, look.revisions = apps, revs
	})
	wg.Wait()
	look.unitsRead = unitsErr == nil
	return look, errors.Join(unitsErr, tenantsErr, appsErr)
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

// openClusters opens the environment and connects to the clusters that hold its units
// (statusClusters).
func (g *globals) openClusters(env, kubeconfig, kubeContext string) (*workspace, values.Settings, []*kube.Cluster, error) {
	w, err := g.open(env)
	if err != nil {
		return nil, values.Settings{}, nil, err
	}
	v, err := w.settings()
	if err != nil {
		return nil, values.Settings{}, nil, err
	}
	clusters, err := w.statusClusters(v, kubeconfig, kubeContext)
	return w, v, clusters, err
}

// statusClusters are the clusters that hold the environment's units: the one given, else the
// kind bootstrap cluster and the management cluster, whichever exist.
func (w *workspace) statusClusters(v values.Settings, kubeconfig, kubeContext string) ([]*kube.Cluster, error) {
	if kubeconfig != "" {
		c, err := kube.Load("given", kubeconfig, kubeContext)
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
	kindName := v.BootstrapCluster.Name
	m := kindcluster.New(dir.KindClusters(), func(string) {})
	if ok, err := m.Exists(kindName); err != nil {
		return nil, err
	} else if ok {
		c, err := m.Connect(kindName)
		if err != nil {
			return nil, err
		}
		clusters = append(clusters, c)
	}
	path := dir.Environment(w.env.Name).ManagementKubeconfig()
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

// writeApplications prints each application with its summed state and every cluster it is on;
// each line escaped whole: most of it is the tenants' text.
func writeApplications(w io.Writer, apps []appsv1.Application, revs map[string]map[string]revisions.Revision) {
	if len(apps) == 0 {
		return
	}
	fmt.Fprintln(w, "\napplications:")
	for _, a := range apps {
		state := "not placed yet"
		if c := apimeta.FindStatusCondition(a.Status.Conditions, meta.ReadyCondition); c != nil {
			state = c.Message
			if c.Status == metav1.ConditionTrue {
				state = "Ready, " + state
			}
		}
		fmt.Fprintf(w, "  %s\n", termtext.Line(fmt.Sprintf("%s/%s: %s", a.Namespace, a.Name, state)))
		for _, p := range a.Status.Placements {
			line := fmt.Sprintf("    %s: %s", p.Cluster, p.State)
			if p.Message != "" {
				line += " (" + p.Message + ")"
			}
			if rev := revs[a.Namespace+"/"+a.Name][p.Cluster].String(); rev != "" {
				line += ", commit " + rev
			}
			fmt.Fprintln(w, termtext.Line(line))
		}
	}
}
