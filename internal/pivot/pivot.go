// Package pivot makes the management cluster self-managed: it moves the cluster's Cluster API
// objects from the bootstrap cluster into the management cluster (clusterctl move) and hands them
// to the management cluster's Flux. It runs in the pivot Job of the bootstrap cluster.
//
// The steps (steps.go, move.go) run under the project's step machine (internal/steps, driven by
// machine.go), which records each one done in the pivot's record (record.go): a Job restarted after any step resumes at the next one, and a
// permanent failure is recorded once and never retried.
package pivot

import (
	"context"
	"fmt"
	"time"

	"cluster-init.dev/cluster-init/internal/kube"
)

// Options configure a pivot.
type Options struct {
	// Bootstrap is the cluster the Job runs in (with a kubeconfig clusterctl can read).
	Bootstrap *kube.Cluster
	Namespace string
	// Cluster is the Cluster API cluster to pivot.
	Cluster string
	// WorkDir holds the kubeconfig files clusterctl reads.
	WorkDir string
	// StepTimeout bounds each wait; Interval is how often a wait looks.
	StepTimeout time.Duration
	Interval    time.Duration
	Log         func(format string, args ...any)
	// AfterStep, if set, runs after each step is recorded done.
	AfterStep func(ctx context.Context, step string) error
}

// Run runs the steps not done yet, then leaves the record of the pivot in the management cluster,
// where it stays, and marks it complete in the bootstrap cluster: the CLI deletes the bootstrap
// cluster only after that.
func Run(ctx context.Context, opts Options) error {
	if opts.StepTimeout == 0 {
		opts.StepTimeout = 20 * time.Minute
	}
	if opts.Interval == 0 {
		opts.Interval = waitInterval
	}
	p := &pivot{Options: opts}
	a := &attempt{stepsOf: p.steps, store: configMapStore{c: opts.Bootstrap.Client, namespace: opts.Namespace},
		log: opts.Log, afterStep: opts.AfterStep, now: time.Now}
	return a.run(ctx, func(ctx context.Context, st State) error {
		mgmt, err := p.connect(ctx)
		if err != nil {
			return err
		}
		if err := writeState(ctx, mgmt.Client, opts.Namespace, st); err != nil {
			return fmt.Errorf("record the pivot in the management cluster: %w", err)
		}
		return nil
	})
}
