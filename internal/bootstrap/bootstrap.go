// Package bootstrap is the flow of `bootstrap ENV` and of day 2 (`bootstrap apply ENV`). Like
// kind's create.go, each verb (Run, Standalone, TakeBack here, Adopt in adopt.go, Apply in
// dayapply.go, Manage in standalone.go) reads as the list of its phases, built from shared phase
// functions; each phase lives in the file named after it, takes what it needs and returns what it
// produced:
//
//	validate           validate.go         the environment in every context; the plan of the bootstrap context
//	bootstrap cluster  bootstrapcluster.go the kind cluster (or the one given) with the CNI
//	flux               flux.go             Flux's controllers
//	source             source.go           the checkout published where the clusters read it
//	environment        environment.go      the values and the cluster-init release
//	units              units.go            every unit followed until done; a conclusion if stuck
//	finish             finish.go           the pivot verified, the management kubeconfig, kind deleted
//	                   standalone.go       or, for a standalone cluster, its state kept (internal/standalone)
//
// The change of a standalone cluster (Manage, standalone.go) runs the phases of
// standalone.Changing. Day 2 (Apply, dayapply.go) connects to the management cluster instead of creating one, and
// ends by waiting for the machines. Every phase is safe to run again: a second run continues
// where the first stopped.
package bootstrap

import (
	"context"
	"fmt"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/values"
)

// Result is what a finished (or failed) run saw.
type Result struct {
	Phases    []progress.Span
	Units     progress.Snapshot
	Bootstrap string // kubeconfig path of the bootstrap cluster, if kind
	// Management is the kubeconfig path of the self-managed management cluster.
	Management string
	// Conclusion and Diagnostics are set when the run failed while following the units.
	Conclusion  *progress.Conclusion
	Diagnostics string
}

// Run bootstraps the environment: its management cluster, made self-managed by the pivot (or,
// from an existing cluster, managed by it).
func Run(ctx context.Context, opts CreateOptions) (*Result, error) {
	if opts.Kubeconfig != "" {
		// The existing cluster keeps managing the new one: nothing to pivot.
		opts.Overrides = append(opts.Overrides, values.FromMap("(--kubeconfig: no pivot)", map[string]any{"pivot": false}))
	}
	s, err := newSessionBesideStandalone(opts.Common, opts.Source)
	if err != nil {
		return &Result{}, err
	}
	defer s.close()
	c := &flow{s: s}
	check := validateNew
	if opts.Kubeconfig != "" {
		check = validateBootstrap // the cluster given makes the new one, and keeps managing it
	}
	return s.run(ctx, opts.Until, append(c.upToUnits(c.validate(check), existingCluster{opts.Kubeconfig, opts.Context}),
		phase{"finish", func(ctx context.Context) error {
			return finish(ctx, s, c.bc, c.plan.Settings, opts.KeepBootstrap)
		}}))
}

// Standalone creates the environment's cluster as a standalone cluster: no pivot, its definitions
// exported to the state directory, the bootstrap cluster deleted.
func Standalone(ctx context.Context, opts StandaloneOptions) (*Result, error) {
	opts.Overrides = append(opts.Overrides, standaloneValues())
	s, err := newSession(opts.Common, opts.Source)
	if err != nil {
		return &Result{}, err
	}
	defer s.close()
	sa := newCreating(s, opts.Key)
	defer sa.Close()
	if done, err := sa.Start(); err != nil || done {
		return s.result, err
	}
	c := &flow{s: s}
	return s.run(ctx, opts.Until, append(c.upToUnits(c.validate(validateNew), existingCluster{}),
		phase{"finish", func(ctx context.Context) error {
			return keepStandalone(ctx, s, c.bc, c.plan, sa, opts)
		}}))
}

// TakeBack makes the kind cluster a self-managed management cluster is taken back into to be
// deleted (`bootstrap cleanup`): the bootstrap flow up to its units, with the environment's
// providers and no cluster (the chart's providers_only), next to the management cluster that
// exists. clusterctl move can then bring the cluster into it, and its providers delete the
// machines, the management cluster's own included, which the management cluster cannot do to
// itself. Run again, it continues with the kind cluster that exists.
func TakeBack(ctx context.Context, opts TakeBackOptions) (*kube.Cluster, *Result, error) {
	opts.Overrides = append(opts.Overrides, values.FromMap("(cleanup: the providers only, to take the cluster back)", map[string]any{"providers_only": true}))
	s, err := newSessionBesideStandalone(opts.Common, opts.Source)
	if err != nil {
		return nil, &Result{}, err
	}
	defer s.close()
	c := &flow{s: s}
	res, err := s.run(ctx, "", c.upToUnits(c.validate(validateBootstrap), existingCluster{}))
	if err != nil {
		return nil, res, err
	}
	s.out.Log("the providers run: ready to take the cluster back")
	kc, err := kube.FromFile("bootstrap", res.Bootstrap)
	if err != nil {
		return nil, res, fmt.Errorf("the kind cluster to take the cluster back into: %w", err)
	}
	return kc, res, nil
}

// flow is what the phases of one verb hand each other: the plan of the validation, the cluster
// the units run in (the bootstrap cluster, the adopted one, the management cluster) and the
// source. Each verb lists the phases it runs, these shared ones among them.
type flow struct {
	s    *session
	plan *render.Result
	bc   *bootstrapCluster
	src  *publishedSource
}

// validateNew is validateBootstrap for a cluster made from a new kind cluster (Run without
// --kubeconfig, Standalone): refused while the environment has its management cluster, which a
// new kind cluster would make a second of. A take-back's kind cluster is made beside it on
// purpose, and validates with validateBootstrap alone.
func validateNew(ctx context.Context, s *session, src *publishedSource) (*render.Result, error) {
	if err := refuseSelfManaged(ctx, s.opts.StateDir, s.opts.Env.Name); err != nil {
		return nil, err
	}
	return validateBootstrap(ctx, s, src)
}

// upToUnits are the phases of every creation of a cluster from a bootstrap cluster (Run,
// Standalone, TakeBack), from validate (with the verb's check) to units; each verb appends what
// it does once they are done.
func (c *flow) upToUnits(validate func(context.Context) error, existing existingCluster) []phase {
	return []phase{
		{"validate", validate},
		{"bootstrap cluster", c.bootstrapCluster(existing)},
		{"flux", c.flux},
		{"source", c.source},
		{"environment", c.environment},
		{"units", c.units},
	}
}

// validate plans the source and validates the environment with check: the plan the other
// phases follow.
func (c *flow) validate(check func(context.Context, *session, *publishedSource) (*render.Result, error)) func(context.Context) error {
	return func(ctx context.Context) (err error) {
		if c.src, err = planSource(ctx, c.s); err != nil {
			return err
		}
		c.plan, err = check(ctx, c.s, c.src)
		return err
	}
}

// bootstrapCluster makes (or finds) the kind cluster, or connects to the existing one given.
func (c *flow) bootstrapCluster(existing existingCluster) func(context.Context) error {
	return func(ctx context.Context) (err error) {
		c.bc, err = ensureBootstrapCluster(ctx, c.s, c.plan, existing)
		return err
	}
}

func (c *flow) flux(ctx context.Context) error { return installFlux(ctx, c.s, c.bc) }

func (c *flow) source(ctx context.Context) (err error) {
	c.src, err = publishSource(ctx, c.s, c.bc, c.plan.Settings, c.src)
	return err
}

func (c *flow) environment(ctx context.Context) error {
	if c.src.pivotStarted {
		c.s.out.Log("the pivot has started: the environment stays as it was applied")
		return nil
	}
	return applyRelease(ctx, c.s, c.bc.cluster, c.plan, c.src)
}

func (c *flow) units(ctx context.Context) error {
	return followUnits(ctx, c.s, c.bc, c.plan.Settings)
}
