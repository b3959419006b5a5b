package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/units"
	"cluster-init.dev/cluster-init/internal/validate"
)

func newUnitsCommand(g *globals) *cobra.Command {
	var context, output string
	var valueFiles []string
	var contexts bool
	cmd := &cobra.Command{
		Use:   "units ENV",
		Short: "Show the unit graph: what is enabled and why, dependencies, critical path",
		Long: `Show the unit graph of the environment in a context: what is enabled and why, the
dependencies and the critical path. With --contexts, which unit runs in which cluster: the
bootstrap cluster, the management cluster before and after the pivot, and every workload cluster.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := g.openWithValues(args[0], valueFiles)
			if err != nil {
				return err
			}
			if contexts {
				return writeContexts(cmd, w)
			}
			opts := w.RenderOptions(context)
			res, err := w.Render(cmd.Context(), opts.Context)
			if err != nil {
				return err
			}
			switch output {
			case "tree":
				return res.Graph.WriteTree(cmd.OutOrStdout(), fmt.Sprintf("%s, context %s", w.Env.Name, opts.Context))
			case "mermaid":
				return res.Graph.WriteMermaid(cmd.OutOrStdout())
			case "json":
				return res.Graph.WriteJSON(cmd.OutOrStdout())
			default:
				return fmt.Errorf("-o: unknown output %q, expected tree, mermaid or json", output)
			}
		},
	}
	cmd.Flags().StringVar(&context, "context", "", "bootstrap, management or workload")
	cmd.Flags().StringVarP(&output, "output", "o", "tree", "tree, mermaid or json")
	cmd.Flags().BoolVar(&contexts, "contexts", false, "a table of the units and the clusters they run in")
	addValuesFlag(cmd, &valueFiles)
	return cmd
}

// writeContexts prints which unit runs where, from the graphs the chart resolves in each context.
func writeContexts(cmd *cobra.Command, w *workspace) error {
	r, err := w.Renderer()
	if err != nil {
		return err
	}
	defer r.Close()
	targets := append(validate.Targets(), validate.Target{Name: "workload", Context: render.ContextWorkload})
	var graphs []*units.Graph
	for _, t := range targets {
		opts := w.RenderOptions(t.Context)
		opts.State = t.State
		res, err := r.Render(cmd.Context(), opts)
		if err != nil {
			return err
		}
		graphs = append(graphs, res.Graph)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "%s: where each unit runs (✓ enabled in that release, ✓ inside: applied into the cluster the release defines, · disabled: see bootstrap units --context)\n\n", w.Env.Name)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "unit")
	for _, t := range targets {
		fmt.Fprintf(tw, "\t%s", t.Name)
	}
	fmt.Fprintln(tw)
	for _, name := range graphs[0].Names() {
		fmt.Fprint(tw, name)
		for _, g := range graphs {
			mark := "·"
			if u, ok := g.Units[name]; ok && u.Enabled {
				mark = "✓"
				if u.Kubeconfig {
					mark = "✓ inside"
				}
			}
			fmt.Fprintf(tw, "\t%s", mark)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
