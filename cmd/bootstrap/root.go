package main

import (
	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/checkout"
	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/versions"
)

// globals are the flags every command shares.
type globals struct {
	repo string
}

func newRootCommand() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "bootstrap",
		Short:         "Bootstrap a self-managed Cluster API management cluster with Flux and Helm",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.repo, "repo", "", "the cluster-init checkout (default: the one containing the current directory)")
	root.AddCommand(
		newRenderCommand(g),
		newValidateCommand(g),
		newUnitsCommand(g),
		newImagesCommand(g),
	)
	return root
}

// workspace is what a command works on: the checkout, its pins and an environment.
type workspace struct {
	root string
	pins versions.Pins
	env  *environment.Environment
}

func (g *globals) open(envName string) (*workspace, error) {
	start := g.repo
	if start == "" {
		start = "."
	}
	root, err := checkout.Root(start)
	if err != nil {
		return nil, err
	}
	pins, err := versions.Load(root)
	if err != nil {
		return nil, err
	}
	name, dir, err := environment.Resolve(root, envName)
	if err != nil {
		return nil, err
	}
	env, err := environment.Load(name, dir, func(p string) string { return checkout.Relative(root, p) })
	if err != nil {
		return nil, err
	}
	return &workspace{root: root, pins: pins, env: env}, nil
}

// defaultContext is the context an environment is first rendered in.
func (w *workspace) defaultContext() string {
	if w.env.Workload() {
		return render.ContextWorkload
	}
	return render.ContextBootstrap
}

func (w *workspace) renderOptions(context string) render.Options {
	if context == "" {
		context = w.defaultContext()
	}
	return render.Options{RepoRoot: w.root, Env: w.env, Context: context, KubeVersion: w.pins["KUBERNETES_VERSION"]}
}
