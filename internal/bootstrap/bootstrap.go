// Package bootstrap is the flow of `bootstrap ENV` and of day 2 (`bootstrap apply ENV`). Like
// kind's create.go, Run reads as the list of its phases; each phase lives in the file named
// after it, takes what it needs and returns what it produced:
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
	"time"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/records"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/standalone"
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
	return create(ctx, opts.settings())
}

// Standalone creates the environment's cluster as a standalone cluster: no pivot, its definitions
// exported to the state directory, the bootstrap cluster deleted.
func Standalone(ctx context.Context, opts StandaloneOptions) (*Result, error) {
	return create(ctx, opts.settings())
}

// TakeBack makes the kind cluster a self-managed management cluster is taken back into to be
// deleted (`bootstrap cleanup`): the bootstrap flow up to its units, with the environment's
// providers and no cluster, next to the management cluster that exists. clusterctl move can then
// bring the cluster into it, and its providers delete the machines, the management cluster's own
// included, which the management cluster cannot do to itself. Run again, it continues with the
// kind cluster that exists.
func TakeBack(ctx context.Context, opts TakeBackOptions) (*kube.Cluster, *Result, error) {
	res, err := create(ctx, opts.settings())
	if err != nil {
		return nil, res, err
	}
	c, err := kube.FromFile("bootstrap", res.Bootstrap)
	if err != nil {
		return nil, res, fmt.Errorf("the kind cluster to take the cluster back into: %w", err)
	}
	return c, res, nil
}

// takeBackValues disable the cluster unit and the bootstrap context's units that need it (the
// CNI and cluster-ready follow it): what runs is the providers. The kind cluster serves no
// Receiver: no push is for it.
func takeBackValues() values.Layer {
	off := map[string]any{}
	for _, u := range []string{"cluster", "management-flux", "management-configs", "management-cluster-init", "pivot"} {
		off[u] = map[string]any{"enabled": false}
	}
	return values.FromMap("(cleanup: the providers only, to take the cluster back)", map[string]any{
		"units":         off,
		"notifications": map[string]any{"receiver": map[string]any{"node_port": 0}},
	})
}

// create is the flow of Run, Standalone and TakeBack.
func create(ctx context.Context, opts settings) (*Result, error) {
	if opts.Kubeconfig != "" {
		// The existing cluster keeps managing the new one: nothing to pivot.
		opts.Overrides = append(opts.Overrides, values.FromMap("(--kubeconfig: no pivot)", map[string]any{"pivot": false}))
	}
	if opts.Standalone {
		opts.Overrides = append(opts.Overrides, standaloneValues())
	}
	if opts.TakeBack {
		opts.Overrides = append(opts.Overrides, takeBackValues())
	}
	s, err := newSession(opts)
	if err != nil {
		return &Result{}, err
	}
	defer s.close()

	var (
		plan *render.Result
		bc   *bootstrapCluster
		src  *publishedSource
		sa   *standalone.Creating
	)
	if !opts.Standalone {
		if err := standalone.RefuseCreated(opts.StateDir.Standalone(), opts.Env.Name); err != nil {
			return &Result{}, err
		}
	}
	if opts.Standalone {
		sa = newCreating(s)
		defer sa.Close()
		if done, err := sa.Start(); err != nil || done {
			return s.result, err
		}
	}
	return s.run(ctx, []phase{
		{"validate", func(ctx context.Context) (err error) {
			if src, err = planSource(ctx, s); err != nil {
				return err
			}
			plan, err = validateBootstrap(ctx, s, src)
			return err
		}},
		{"bootstrap cluster", func(ctx context.Context) (err error) {
			bc, err = ensureBootstrapCluster(ctx, s, plan)
			return err
		}},
		{"flux", func(ctx context.Context) error {
			return installFlux(ctx, s, bc)
		}},
		{"source", func(ctx context.Context) (err error) {
			src, err = publishSource(ctx, s, bc, plan.Settings, src)
			return err
		}},
		{"environment", func(ctx context.Context) error {
			if src.pivotStarted {
				s.out.Log("the pivot has started: the environment stays as it was applied")
				return nil
			}
			return applyRelease(ctx, s, bc.cluster, plan, src)
		}},
		{"units", func(ctx context.Context) error {
			return followUnits(ctx, s, bc, plan.Settings)
		}},
		{"finish", func(ctx context.Context) error {
			if sa != nil {
				return keepStandalone(ctx, s, bc, plan, sa)
			}
			return finish(ctx, s, bc, plan.Settings)
		}},
	})
}

// Apply is day 2: it re-applies the environment to its self-managed management cluster (values,
// secrets, source), has the release take the new values and follows the units until the change
// is rolled out, machines included.
func Apply(ctx context.Context, opts ApplyOptions) (*Result, error) {
	s, err := newSession(opts.settings())
	if err != nil {
		return &Result{}, err
	}
	defer s.close()

	var (
		plan  *render.Result
		mc    *bootstrapCluster // the management cluster: the cluster whose units are followed
		src   *publishedSource
		state managementstate.State
	)
	return s.run(ctx, []phase{
		{"management cluster", func(ctx context.Context) (err error) {
			// Its state says how its release renders: self-managed (its own definitions since the
			// pivot) or adopted (none).
			mc, state, err = connectManagement(ctx, s)
			return err
		}},
		{"validate", func(ctx context.Context) (err error) {
			if src, err = planSource(ctx, s); err != nil {
				return err
			}
			plan, err = validateManagement(ctx, s, src, state)
			return err
		}},
		{"source", func(ctx context.Context) (err error) {
			src, err = publishSource(ctx, s, mc, plan.Settings, src)
			return err
		}},
		{"environment", func(ctx context.Context) error {
			if err := applyRelease(ctx, s, mc.cluster, plan, src); err != nil {
				return err
			}
			return reconcileRelease(ctx, s, mc.cluster)
		}},
		{"units", func(ctx context.Context) error {
			return followUnits(ctx, s, mc, plan.Settings)
		}},
		{"machines", func(ctx context.Context) error {
			if state.Adopted {
				s.out.Log("the management cluster is adopted: its machines are not Cluster API's")
				return nil
			}
			// The nodes are read from the cluster itself, through the kubeconfig Cluster API
			// wrote (the management cluster when it is self-managed).
			name := plan.Settings.Cluster.Name
			nodes, err := kube.ClusterAPICluster(ctx, mc.cluster.Client, names.Namespace, name)
			if err != nil {
				return fmt.Errorf("connect to cluster %s to read its nodes: %w", name, err)
			}
			v, err := machines.WaitSettled(ctx, mc.cluster.Client, nodes.Client, machines.Settling{
				Namespace: names.Namespace, Name: name, Timeout: 30 * time.Minute, Interval: pollInterval, Progress: s.out.Waiting,
			})
			if err != nil {
				return err
			}
			s.out.Log("cluster %s has its %d machines ready", name, len(v.Machines))
			// New machines have new names: cleanup must know them even if the cluster is gone.
			if plan.Settings.Cluster.OnDocker() {
				if err := records.RecordContainers(ctx, s.opts.StateDir.Environment(s.opts.Env.Name).ContainersRecord(), mc.cluster.Client); err != nil {
					s.out.Log("could not record the containers of %s for cleanup: %v", plan.Settings.Cluster.Name, err)
				}
			}
			return nil
		}},
	})
}
