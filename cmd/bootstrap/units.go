package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newUnitsCommand(g *globals) *cobra.Command {
	var context, output string
	var valueFiles []string
	cmd := &cobra.Command{
		Use:   "units ENV",
		Short: "Show the unit graph: what is enabled and why, dependencies, critical path",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := g.openWithValues(args[0], valueFiles)
			if err != nil {
				return err
			}
			opts := w.renderOptions(context)
			res, err := w.render(cmd.Context(), opts.Context)
			if err != nil {
				return err
			}
			switch output {
			case "tree":
				return res.Graph.WriteTree(cmd.OutOrStdout(), fmt.Sprintf("%s, context %s", w.env.Name, opts.Context))
			case "mermaid":
				return res.Graph.WriteMermaid(cmd.OutOrStdout())
			case "json":
				return res.Graph.WriteJSON(cmd.OutOrStdout())
			default:
				return fmt.Errorf("-o: unknown output %q, expected tree, mermaid or json", output)
			}
		},
	}
	cmd.Flags().StringVar(&context, "context", "", "bootstrap, management or workload (default: workload for workload-clusters/*, else bootstrap)")
	cmd.Flags().StringVarP(&output, "output", "o", "tree", "tree, mermaid or json")
	addValuesFlag(cmd, &valueFiles)
	return cmd
}
