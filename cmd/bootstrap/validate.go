package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/validate"
)

func newValidateCommand(g *globals) *cobra.Command {
	var valueFiles []string
	var adopted bool
	cmd := &cobra.Command{
		Use:   "validate ENV",
		Short: "Check the environment offline: values, unit graph, builds and object schemas",
		Long: `Check the environment offline in every context it runs in (bootstrap, then management before
and after the pivot; or workload): its values against the chart's values.schema.json, the unit
graph, the build of every enabled unit, and every resulting object against the schemas of the
vendored components. With --adopt, as an adopted management cluster renders it (bootstrap
--adopt) instead. Exits non-zero with every problem, each naming its file and key.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := g.openWithValues(args[0], valueFiles)
			if err != nil {
				return err
			}
			r, err := w.renderer()
			if err != nil {
				return err
			}
			defer r.Close()
			targets := validate.Targets()
			if adopted {
				targets = validate.AdoptedTargets()
			}
			reports, err := validate.EnvironmentAs(cmd.Context(), r, w.root, w.renderOptions(""), targets)
			for _, r := range reports {
				verdict := "valid"
				if r.Problems > 0 {
					verdict = fmt.Sprintf("INVALID (%d problems, below)", r.Problems)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s: %d units, %d objects %s\n", w.env.Name, r.Target, r.Units, r.Objects, verdict)
			}
			if err != nil {
				return fmt.Errorf("environment %s is invalid:\n%w", w.env.Name, err)
			}
			return nil
		},
	}
	addValuesFlag(cmd, &valueFiles)
	cmd.Flags().BoolVar(&adopted, "adopt", false, "validate as an existing cluster adopted as the management cluster renders it (bootstrap ENV --kubeconfig FILE --adopt)")
	return cmd
}
