package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/termtext"
	"cluster-init.dev/cluster-init/internal/validate"
	"cluster-init.dev/cluster-init/internal/versions"
	ws "cluster-init.dev/cluster-init/internal/workspace"
)

// validateFlags are the flags of `bootstrap validate`.
type validateFlags struct {
	valueFiles, tenants []string
	adopted, all        bool
}

func newValidateCommand(g *globals) *cobra.Command {
	f := &validateFlags{}
	cmd := &cobra.Command{
		Use:   "validate ENV | --all",
		Short: "Check the environment offline: values, unit graph, builds and object schemas",
		Long: `Check the environment offline in every context it runs in (bootstrap, then management before
and after the pivot; or workload): its values against the chart's values.schema.json, the unit
graph, the build of every enabled unit, and every resulting object against the schemas of the
vendored components; with a git source, the workload clusters committed to the tenants' directories
as the management cluster's admission will see them (--tenant NAMESPACE=DIR for a tenant with a
repository of its own), and the applications committed for them. With --adopt, as an adopted
management cluster renders it (bootstrap --adopt) instead. With --all, every environment of the
checkout, side by side: what a merge request's pipeline runs. Exits non-zero with every problem,
each naming its file and key.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			checkouts, err := tenantCheckouts(f.tenants)
			if err != nil {
				return err
			}
			switch {
			case f.all && len(args) > 0:
				return fmt.Errorf("--all validates every environment of the checkout: expected no ENV with it (%s)", args[0])
			case !f.all && len(args) == 0:
				return errors.New("expected ENV (an environment's name or directory), or --all for every environment")
			case !f.all:
				return g.validateEnvironment(cmd.Context(), cmd.OutOrStdout(), nil, nil, args[0], f, checkouts)
			}
			return g.validateAll(cmd.Context(), cmd, f, checkouts)
		},
	}
	addValuesFlag(cmd, &f.valueFiles)
	cmd.Flags().StringArrayVar(&f.tenants, "tenant", nil, "NAMESPACE=DIR: validate the workload clusters of a checkout of that tenant's own repository (workload_clusters.tenants.NAMESPACE.repository) against the platform's rules; repeatable")
	cmd.Flags().BoolVar(&f.adopted, "adopt", false, "validate as an existing cluster adopted as the management cluster renders it (bootstrap ENV --kubeconfig FILE --adopt)")
	cmd.Flags().BoolVar(&f.all, "all", false, "validate every environment of the checkout (environment-values/), each with its workload clusters and applications")
	return cmd
}

// validateAll validates every environment of the checkout, as many at once as there are cores,
// and prints each one's lines together, in the environments' order.
func (g *globals) validateAll(ctx context.Context, cmd *cobra.Command, f *validateFlags, checkouts map[string]string) error {
	root, err := g.checkoutRoot()
	if err != nil {
		return err
	}
	envs, err := environment.List(root)
	if err != nil {
		return fmt.Errorf("list the environments of %s: %w", filepath.Join(root, environment.Dir), err)
	}
	if len(envs) == 0 {
		return fmt.Errorf("no environment in %s: expected directories with a kustomization.yaml", filepath.Join(root, environment.Dir))
	}
	// One renderer for all: one snapshot of the checkout, and each unit the environments share
	// built (or read from the build cache) once.
	pins, err := versions.Load(root)
	if err != nil {
		return err
	}
	r, err := ws.NewRenderer(root, pins)
	if err != nil {
		return err
	}
	defer r.Close()
	shared, err := validate.NewSchemas(ctx, r)
	if err != nil {
		return err
	}
	outs := make([]bytes.Buffer, len(envs))
	errs := make([]error, len(envs))
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, env := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			errs[i] = g.validateEnvironment(ctx, &outs[i], r, shared, env, f, checkouts)
		}()
	}
	wg.Wait()
	var invalid []string
	for i, env := range envs {
		if _, err := cmd.OutOrStdout().Write(outs[i].Bytes()); err != nil {
			return err
		}
		if errs[i] != nil {
			invalid = append(invalid, env)
		}
	}
	if len(invalid) > 0 {
		return fmt.Errorf("%d of %d environments invalid (%s):\n%w", len(invalid), len(envs), strings.Join(invalid, ", "), errors.Join(errs...))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "all %d environments valid\n", len(envs))
	return nil
}

// validateEnvironment validates one environment and prints a line per target to out. r and
// shared, if not nil, are the renderer and schemas of environments validated side by side;
// else it makes its own.
func (g *globals) validateEnvironment(ctx context.Context, out io.Writer, r *render.Renderer, shared *validate.Schemas, envName string, f *validateFlags, checkouts map[string]string) error {
	w, err := g.openWithValues(envName, f.valueFiles)
	if err != nil {
		return err
	}
	if r == nil {
		if r, err = w.Renderer(); err != nil {
			return err
		}
		defer r.Close()
	}
	targets := validate.Targets()
	if f.adopted {
		targets = validate.AdoptedTargets()
	}
	if shared == nil {
		if shared, err = validate.NewSchemas(ctx, r); err != nil {
			return err
		}
	}
	reports, err := shared.EnvironmentAs(ctx, r, w.Root, w.RenderOptions(""), targets, checkouts)
	for _, r := range reports {
		if r.Unread != "" {
			fmt.Fprintf(out, "%s: %s: %s\n", termtext.Line(w.Env.Name), r.Target, termtext.Line(r.Unread))
			continue
		}
		verdict := "valid"
		if r.Problems > 0 {
			verdict = fmt.Sprintf("INVALID (%d problems, below)", r.Problems)
		}
		fmt.Fprintf(out, "%s: %s: %d units, %d objects %s\n", termtext.Line(w.Env.Name), r.Target, r.Units, r.Objects, verdict)
	}
	if err != nil {
		return fmt.Errorf("environment %s is invalid:\n%w", w.Env.Name, err)
	}
	return nil
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
