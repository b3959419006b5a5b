package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"cluster-init.dev/cluster-init/internal/bootstrap"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/statedir"
)

// bootstrapFlags are the flags of `bootstrap ENV`.
type bootstrapFlags struct {
	kubeconfig string
	context    string
	source     string
	valueFiles []string
	timeout    time.Duration
	output     string
	timeline   string
	until      string
	keep       bool
	adopt      bool
	takeOver   bool
	standalone bool
}

func addBootstrapFlags(cmd *cobra.Command, f *bootstrapFlags) {
	addKubeconfigFlags(cmd, &f.kubeconfig, &f.context, "bootstrap: use this existing cluster instead of a kind cluster, to create the environment's cluster and keep managing it (no pivot), or with --adopt as the management cluster itself; apply: the management cluster")
	cmd.Flags().StringVar(&f.source, "source", "", "what the clusters reconcile from: git (source.url and source.ref of the values, or the checkout's origin and branch; credentials from the secrets) or oci (the checkout pushed to the registry next to kind, for quick local runs); default: git when the values name a git source.url, else oci")
	addValuesFlag(cmd, &f.valueFiles)
	cmd.Flags().DurationVar(&f.timeout, "timeout", 60*time.Minute, "give up after this long")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "tty (redraw in place), plain (timestamped lines) or json (default: tty on a terminal, else plain)")
	cmd.Flags().StringVar(&f.timeline, "timeline", "", "write a timeline of the run to this file: an HTML page, or a standalone SVG picture if it ends in .svg")
}

// addFlowFlags adds the flags of `bootstrap ENV` only.
func addFlowFlags(cmd *cobra.Command, f *bootstrapFlags) {
	cmd.Flags().StringVar(&f.until, "until", "", "stop after this phase (validate, bootstrap cluster, flux, source, environment, units, finish)")
	cmd.Flags().BoolVar(&f.keep, "keep-bootstrap", false, "keep the bootstrap cluster after a successful pivot")
	cmd.Flags().BoolVar(&f.adopt, "adopt", false, "make the existing cluster of --kubeconfig the management cluster: install into it, create no cluster")
	cmd.Flags().BoolVar(&f.standalone, "standalone", false, "create a standalone cluster: its CNI and add-ons, no management in it, no pivot; its definitions are kept (secrets age-encrypted) in the state directory and the bootstrap cluster is deleted; `bootstrap scale` and `bootstrap delete` bring management back for the time of a change")
	cmd.Flags().BoolVar(&f.takeOver, "take-over", false, "with --adopt: own the Flux, cert-manager or Cluster API another tool installed in the cluster (cleanup then deletes them)")
}

func (g *globals) runBootstrap(cmd *cobra.Command, envName string, f *bootstrapFlags) error {
	switch {
	case f.takeOver && !f.adopt:
		return fmt.Errorf("--take-over: only with --adopt")
	case f.standalone && f.kubeconfig != "":
		return fmt.Errorf("--standalone: the cluster is created from a kind cluster of its own, which is deleted afterwards: not with --kubeconfig")
	case f.standalone && f.adopt:
		return fmt.Errorf("--standalone and --adopt: a standalone cluster has no management cluster to adopt")
	}
	return g.runFlow(cmd, envName, f, func(ctx context.Context, c bootstrap.Common, w *workspace) (*bootstrap.Result, error) {
		switch {
		case f.adopt:
			return bootstrap.Adopt(ctx, bootstrap.AdoptOptions{Common: c, Kubeconfig: f.kubeconfig, Context: f.context, Source: f.source, Until: f.until, TakeOver: f.takeOver})
		case f.standalone:
			key, err := g.standaloneKey(true)
			if err != nil {
				return &bootstrap.Result{}, err
			}
			return bootstrap.Standalone(ctx, bootstrap.StandaloneOptions{Common: c, Source: f.source, Until: f.until, KeepBootstrap: f.keep, Key: key, Versions: w.Pins})
		}
		return bootstrap.Run(ctx, bootstrap.CreateOptions{Common: c, Kubeconfig: f.kubeconfig, Context: f.context, Source: f.source, Until: f.until, KeepBootstrap: f.keep})
	})
}

func newApplyCommand(g *globals) *cobra.Command {
	f := &bootstrapFlags{}
	var noBackup bool
	cmd := &cobra.Command{
		Use:   "apply ENV",
		Short: "Day 2: apply the environment's changed values to its management cluster and follow the roll-out",
		Long: `apply re-applies the environment (values, secrets, source) to its self-managed management
cluster, has the cluster-init release take the new values, and follows the units and the machines
until the change is rolled out. The management cluster is the one bootstrap wrote the kubeconfig
of, or --kubeconfig. Where it runs the backup unit, a backup is taken first (reason
before-change), and a backup that fails stops the change before anything is changed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runFlow(cmd, args[0], f, func(ctx context.Context, c bootstrap.Common, _ *workspace) (*bootstrap.Result, error) {
				return bootstrap.Apply(ctx, bootstrap.ApplyOptions{Common: c, Kubeconfig: f.kubeconfig, Context: f.context, Source: f.source, NoBackup: noBackup})
			})
		},
	}
	addBootstrapFlags(cmd, f)
	cmd.Flags().BoolVar(&noBackup, "no-backup", false, "apply without the backup taken before the change")
	return cmd
}

// runFlow opens the environment and runs one verb of internal/bootstrap with the live progress,
// then prints the summary.
func (g *globals) runFlow(cmd *cobra.Command, envName string, f *bootstrapFlags, run func(context.Context, bootstrap.Common, *workspace) (*bootstrap.Result, error)) error {
	w, err := g.openWithValues(envName, f.valueFiles)
	if err != nil {
		return err
	}
	stateDir, err := stateDir()
	if err != nil {
		return err
	}
	start := time.Now()
	printer, err := g.printer(cmd, f.output, start)
	if err != nil {
		return err
	}
	res, err := run(cmd.Context(), g.common(w, stateDir, f.timeout, f.timeline, printer), w)
	var phases []progress.Span
	if res != nil {
		phases = res.Phases
	}
	printer.Summary(phases, time.Since(start), g.redactor.Error(err))
	return err
}

// common is what every verb of internal/bootstrap is given.
func (g *globals) common(w *workspace, dir statedir.Dir, timeout time.Duration, timeline string, out progress.Printer) bootstrap.Common {
	return bootstrap.Common{
		RepoRoot:    w.Root,
		Env:         w.Env,
		Redactor:    g.redactor,
		Overrides:   w.Overrides,
		KubeVersion: w.Pins["KUBERNETES_VERSION"],
		BuildCache:  statedir.BuildCache(),
		StateDir:    dir,
		Timeout:     timeout,
		Timeline:    timeline,
		Out:         out,
	}
}

// printer is the live progress of a long command, in the --output format.
func (g *globals) printer(cmd *cobra.Command, output string, start time.Time) (progress.Printer, error) {
	var size progress.TerminalSize
	if file, ok := g.stdout.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		size = func() (int, int) {
			w, h, err := term.GetSize(int(file.Fd()))
			if err != nil {
				return 0, 0
			}
			return w, h
		}
	}
	return progress.New(cmd.OutOrStdout(), progress.Format(output), size, start, g.redactor.String)
}

// stateDir is the state directory of this user (statedir.Default), opened in this build's layout.
func stateDir() (statedir.Dir, error) {
	d, err := statedir.Default()
	if err != nil {
		return d, err
	}
	return statedir.Open(d.Path)
}
