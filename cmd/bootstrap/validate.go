package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/validate"
)

func newValidateCommand(g *globals) *cobra.Command {
	var valueFiles, tenants []string
	var adopted bool
	cmd := &cobra.Command{
		Use:   "validate ENV",
		Short: "Check the environment offline: values, unit graph, builds and object schemas",
		Long: `Check the environment offline in every context it runs in (bootstrap, then management before
and after the pivot; or workload): its values against the chart's values.schema.json, the unit
graph, the build of every enabled unit, and every resulting object against the schemas of the
vendored components; with a git source, the workload clusters committed to the tenants' directories
as the management cluster's admission will see them (--tenant NAMESPACE=DIR for a tenant with a
repository of its own). With --adopt, as an adopted management cluster renders it (bootstrap
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
			checkouts, err := tenantCheckouts(tenants)
			if err != nil {
				return err
			}
			reports, err := validate.EnvironmentAs(cmd.Context(), r, w.root, w.renderOptions(""), targets, checkouts)
			for _, r := range reports {
				if r.Unread != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: %s: %s\n", w.env.Name, r.Target, r.Unread)
					continue
				}
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
	cmd.Flags().StringArrayVar(&tenants, "tenant", nil, "NAMESPACE=DIR: validate the workload clusters of a checkout of that tenant's own repository (workload_clusters.tenants.NAMESPACE.repository) against the platform's rules; repeatable")
	cmd.Flags().BoolVar(&adopted, "adopt", false, "validate as an existing cluster adopted as the management cluster renders it (bootstrap ENV --kubeconfig FILE --adopt)")
	return cmd
}

// tenantCheckouts parses --tenant NAMESPACE=DIR.
func tenantCheckouts(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range flags {
		ns, dir, ok := strings.Cut(f, "=")
		if !ok || ns == "" || dir == "" {
			return nil, fmt.Errorf("--tenant %q: expected NAMESPACE=DIR (a checkout of the tenant's repository)", f)
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("--tenant %s: %w", f, err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--tenant %s: %s is not a directory", ns, dir)
		}
		out[ns] = abs
	}
	return out, nil
}
