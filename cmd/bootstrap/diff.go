package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/diff"
	"cluster-init.dev/cluster-init/internal/termtext"
)

func newDiffCommand(g *globals) *cobra.Command {
	var kubeconfig, kubeContext, output string
	var tenants []string
	cmd := &cobra.Command{
		Use:   "diff ENV",
		Short: "Show what the checkout would change in the running management cluster: objects added, changed, removed",
		Long: `Compare the checkout with the environment's management cluster (or the one of --kubeconfig),
as ` + "`flux diff kustomization`" + ` does, for every unit, the cluster-init release and the tenants'
workload clusters: each object the checkout has a Flux Kustomization or HelmRelease apply is
applied in dry-run mode (server-side, as that controller) and compared with the cluster's; what
their inventories hold and the checkout no longer has is what Flux would remove. A Secret is named,
never shown. Units applied into workload clusters through a kubeconfig are not compared. It changes
nothing, and exits 0 whether or not there are changes (-o json for a pipeline to read).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: expected table or json", output)
			}
			checkouts, err := tenantCheckouts(tenants)
			if err != nil {
				return err
			}
			w, _, clusters, err := g.openClusters(args[0], kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			if len(clusters) == 0 {
				return fmt.Errorf("environment %s has no management cluster on this machine: give its --kubeconfig", w.Env.Name)
			}
			// The management cluster once the pivot is done, else the bootstrap cluster.
			c := clusters[len(clusters)-1]
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
			defer cancel()
			owners, skipped, err := diff.Owners(ctx, c, w, checkouts)
			if err != nil {
				return err
			}
			report, err := diff.Compute(ctx, c.Client, owners, g.redactor.String)
			if err != nil {
				return fmt.Errorf("diff against the %s cluster (%s): %w", c.Name, c.Config.Host, err)
			}
			if output == "json" {
				return termtext.WriteJSON(cmd.OutOrStdout(), report, "  ")
			}
			writeDiff(cmd.OutOrStdout(), fmt.Sprintf("%s, %s cluster (%s)", w.Env.Name, c.Name, c.Config.Host), report, skipped)
			return nil
		},
	}
	addKubeconfigFlags(cmd, &kubeconfig, &kubeContext, "the management cluster to compare with (a pipeline's: a kubeconfig file from a CI variable)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().StringArrayVar(&tenants, "tenant", nil, "NAMESPACE=DIR: a checkout of that tenant's own repository, compared too; repeatable")
	return cmd
}

// writeDiff prints a report, grouped by what applies the objects. Names and values come from
// the cluster and the checkouts (a tenant's): each is escaped on its line.
func writeDiff(out io.Writer, title string, r diff.Report, skipped []string) {
	fmt.Fprintf(out, "%s: %d changes, %d objects unchanged\n", termtext.Line(title), len(r.Changes), r.Unchanged)
	sign := map[diff.Action]string{diff.Added: "+", diff.Changed: "~", diff.Removed: "-"}
	owner := ""
	for _, ch := range r.Changes {
		if ch.Owner != owner {
			owner = ch.Owner
			fmt.Fprintf(out, "\n%s\n", termtext.Line(owner))
		}
		fmt.Fprintf(out, "  %s %s (%s)\n", sign[ch.Action], termtext.Line(ch.Object), ch.Action)
		for _, f := range ch.Fields {
			fmt.Fprintf(out, "      %s\n", termtext.Line(f))
		}
	}
	for _, n := range r.NotApplied {
		fmt.Fprintf(out, "\nnot in the cluster yet: %s (everything it holds is added)\n", termtext.Line(n))
	}
	for _, s := range skipped {
		fmt.Fprintf(out, "not compared: %s\n", termtext.Line(s))
	}
}
