package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/render"
)

func newRenderCommand(g *globals) *cobra.Command {
	var context, unit string
	var valueFiles []string
	var showSecrets bool
	cmd := &cobra.Command{
		Use:   "render ENV",
		Short: "Print every object the environment sends to a cluster, offline",
		Long: `Print every object the environment sends to a cluster: the environment's ConfigMaps and
Secret, the umbrella chart's output (units as Flux Kustomizations, their sources), the kustomize
build of every enabled unit and the charts of HelmRelease units. Each object is annotated with the
unit that applies it. Secret values, and any credential of the environment wherever it appears
(a proxy URL with a password, say), are redacted unless --show-secrets is given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := g.openWithValues(args[0], valueFiles)
			if err != nil {
				return err
			}
			res, err := w.Render(cmd.Context(), context)
			if err != nil {
				return err
			}
			objs := res.Objects
			if unit != "" {
				if _, ok := res.Graph.Units[unit]; !ok {
					return fmt.Errorf("--unit: no unit %q (units: %v)", unit, res.Graph.Names())
				}
				objs = nil
				for _, o := range res.Objects {
					if o.Unit == unit {
						objs = append(objs, o)
					}
				}
			}
			out := cmd.OutOrStdout()
			if showSecrets {
				out = g.stdout
			}
			return render.Write(out, objs, showSecrets)
		},
	}
	cmd.Flags().StringVar(&context, "context", "", "bootstrap, management or workload")
	cmd.Flags().StringVar(&unit, "unit", "", "only the objects of this unit")
	addValuesFlag(cmd, &valueFiles)
	cmd.Flags().BoolVar(&showSecrets, "show-secrets", false, "print Secret values instead of redacting them")
	return cmd
}
