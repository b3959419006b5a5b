package main

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/standalone"
	"cluster-init.dev/cluster-init/internal/termtext"
	"cluster-init.dev/cluster-init/internal/upgrades"
)

func newUpgradeCommand(g *globals) *cobra.Command {
	f := &manageFlags{}
	var version string
	cmd := &cobra.Command{
		Use:   "upgrade ENV --kubernetes-version V | upgrade plan ENV",
		Short: "Upgrade a standalone cluster's Kubernetes; `upgrade plan`: what a commit would change, and whether the rules allow it",
		Long: `A cluster that lives from git is upgraded by a commit: cluster.kubernetes_version in the
environment's values (the management cluster) or in a workload cluster's HelmRelease.
` + "`upgrade plan ENV`" + ` shows, before the commit, what runs and what would change (docs/upgrades.md).

` + "`upgrade ENV --kubernetes-version V`" + ` upgrades the standalone cluster of ENV (kubeadm on CAPD): a
temporary management cluster comes back from its state, as for scale; the control plane rolls one
machine at a time to V with the node image of V, then the workers; the objects are exported again
and the temporary cluster deleted. One minor at a time, never down: a step the rules refuse is
refused before anything is created. Interrupted, the same command run again finishes it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if version == "" {
				return fmt.Errorf("upgrade %s: give --kubernetes-version V (a standalone cluster), or run `bootstrap upgrade plan %s`", args[0], args[0])
			}
			return g.runManage(cmd, args[0], f, standalone.Change{Command: standalone.CommandUpgrade, KubernetesVersion: version})
		},
	}
	cmd.Flags().StringVar(&version, "kubernetes-version", "", "the Kubernetes version to upgrade the standalone cluster to (the next minor at most, such as v1.37.0)")
	addManageFlags(cmd, f)
	cmd.AddCommand(newUpgradePlanCommand(g))
	return cmd
}

func newUpgradePlanCommand(g *globals) *cobra.Command {
	var kubeconfig, kubeContext, output string
	cmd := &cobra.Command{
		Use:   "plan ENV",
		Short: "Show every cluster and component: the version it runs, the one asked for, and whether the step is allowed",
		Long: `Read the management cluster of the environment (or the one of --kubeconfig) and show, like
clusterctl upgrade plan:
  clusters    every Cluster API cluster, the management cluster included: the Kubernetes version
              its control plane and workers run, the one asked for (the checkout's values for the
              management cluster, its committed HelmRelease for a workload cluster) and the step:
              up to date, upgrade, rolling, or refused with the rule it breaks (no downgrade, one
              minor at a time)
  components  every controller the checkout installs: the images running and the checkout's, and
              the step: up to date, upgrade, or refused (an older image than the running one; a
              CustomResourceDefinition that drops a version objects are still stored in; one
              the unit applied and the checkout no longer has, or moves to another unit)
It changes nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "table" && output != "json" {
				return fmt.Errorf("--output %q: expected table or json", output)
			}
			w, v, clusters, err := g.openClusters(args[0], kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			// The management cluster once the pivot is done, else the bootstrap cluster.
			c := clusters[len(clusters)-1]
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			// The management cluster's own Cluster is in the release's namespace.
			plan, err := upgrades.Read(ctx, c, w, upgrades.ManagementCluster{Namespace: names.Namespace, Name: v.Cluster.Name, Asked: v.Cluster.KubernetesVersion})
			if err != nil {
				return err
			}
			if output == "json" {
				return termtext.WriteJSON(cmd.OutOrStdout(), plan, "  ")
			}
			writePlan(cmd.OutOrStdout(), fmt.Sprintf("%s, %s cluster (%s)", w.Env.Name, c.Name, c.Config.Host), plan)
			return nil
		},
	}
	addKubeconfigFlags(cmd, &kubeconfig, &kubeContext, "the management cluster to read, if it is not one of cluster-init's")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// writePlan prints a plan as two tables; what comes from the cluster is escaped in its cell.
func writePlan(out io.Writer, title string, p upgrades.Plan) {
	fmt.Fprintf(out, "%s\n\nClusters:\n", termtext.Line(title))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tCONTROL PLANE\tWORKERS\tASKED\tBY\tSTEP")
	for _, c := range p.Clusters {
		cp := c.ControlPlane
		if c.ControlPlaneRuns != "" && c.ControlPlaneRuns != c.ControlPlane {
			cp += " (runs " + c.ControlPlaneRuns + ")"
		}
		step := c.Action
		if c.Reason != "" {
			step += ": " + c.Reason
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", termtext.Line(c.Namespace+"/"+c.Name), termtext.Line(orDash(cp)), termtext.Line(orDash(strings.Join(c.Workers, ","))),
			termtext.Line(orDash(c.Asked)), termtext.Line(c.AskedBy), termtext.Line(step))
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "\nComponents:\n")
	tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  UNIT\tDEPLOYMENT\tRUNNING\tCHECKOUT\tSTEP")
	for _, c := range p.Components {
		step := c.Action
		if c.Reason != "" {
			step += ": " + c.Reason
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", termtext.Line(c.Unit), termtext.Line(orDash(c.Deployment)), termtext.Line(orDash(shortImages(c.Running))),
			termtext.Line(orDash(shortImages(c.Checkout))), termtext.Line(step))
	}
	_ = tw.Flush()
}

// shortImages keeps the last path element of each image: the registry and organisation are the
// same on both sides, the tag is what changes.
func shortImages(images string) string {
	if images == "" {
		return ""
	}
	var out []string
	for _, img := range strings.Split(images, ", ") {
		out = append(out, path.Base(img))
	}
	return strings.Join(out, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
