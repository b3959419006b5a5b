package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"cluster-init.dev/cluster-init/internal/diagnostics"
	"cluster-init.dev/cluster-init/internal/handoff"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/pivot"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/reconcileerrors"
	"cluster-init.dev/cluster-init/internal/redact"
	"cluster-init.dev/cluster-init/internal/termtext"
	"cluster-init.dev/cluster-init/internal/units"
	"cluster-init.dev/cluster-init/internal/values"
)

// pollInterval is how often the units are observed.
const pollInterval = 3 * time.Second

// releaseGrace is how long the cluster-init release may take to render its units before the run
// concludes that it cannot.
const releaseGrace = 10 * time.Minute

// followUnits follows every unit until all are done (the pivot included), a unit fails, or the
// run times out; then it concludes what blocks and writes the diagnostics bundle.
func followUnits(ctx context.Context, s *session, bc *bootstrapCluster, v values.Settings) error {
	src := progress.Source{Cluster: bc.cluster, ClusterName: v.Cluster.Name}
	tracker := progress.NewTracker(time.Now())
	handoffs := handoff.NewRequester(bc.cluster.Client)
	health := handoff.NewHealthChecks(ctx, bc.cluster)
	defer health.Stop()
	failures := newMachineFailures(bc.cluster.Client, names.Namespace, v.Cluster.Name)
	var management *managementUnits
	if bc.kind != nil {
		management = newManagementUnits(bc.cluster, v.Cluster.Name)
		defer management.stop()
	}
	start := time.Now()
	var stuck error
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		obs, err := src.Observe(ctx)
		if err != nil {
			if ctx.Err() == nil {
				// The API server of a busy bootstrap cluster can fail a request: look again.
				s.out.Log("observing the units: %v (retrying)", err)
			}
			return false, nil
		}
		// A unit whose dependencies just turned ready starts now, not at Flux's next look.
		if _, err := handoffs.Request(ctx, obs.Units); err != nil && ctx.Err() == nil {
			s.out.Log("%v (retrying)", err)
		}
		// A unit whose objects just turned ready finishes its health check now, not at Flux's
		// next look.
		health.Follow(obs.Units)
		// A provider that gave up looking for a machine's node for a while looks again now
		// (machines.AskToLookAgain says why it can give up).
		if asked, err := machines.AskToLookAgain(ctx, bc.cluster.Client, names.Namespace, v.Cluster.Name, time.Now()); err != nil && ctx.Err() == nil {
			s.out.Log("%v (retrying)", err)
		} else {
			for _, m := range asked {
				s.out.Log("machine %s has waited more than %s for its node: asked its infrastructure provider to look again", m, machines.NodeWait)
			}
		}
		if management != nil {
			management.look(ctx, obs.Units)
		}
		snap := tracker.Update(obs, time.Now())
		s.result.Units = snap
		s.out.Units(snap)
		if snap.Graph != nil && snap.Done() {
			s.out.Log("every unit is ready")
			return true, nil
		}
		// A machine its provider gave up on, with no health check to replace it, ends the
		// wait now: nothing will change until the timeout.
		if lines, err := failures.look(ctx, s.out.Log); err != nil && ctx.Err() == nil {
			s.out.Log("%v (retrying)", err)
		} else if len(lines) > 0 {
			s.result.Units = withMachinesFailed(snap, lines)
			stuck = fmt.Errorf("%d machine(s) failed for good and no health check replaces them", len(lines))
			return false, stuck
		}
		// The pivot's record is the truth about the pivot: once it is complete, the bootstrap
		// cluster's units (frozen since its suspend step) do not matter any more; once it failed
		// for good, nothing will change.
		if bc.kind != nil {
			if st, err := pivot.ReadState(ctx, bc.cluster.Client, names.Namespace); err == nil {
				switch {
				case st.Failed != nil:
					s.result.Units = snap.WithFailed(units.RolePivot, "PivotFailed", st.Failed.Reason)
					stuck = st.CheckComplete()
					return false, stuck
				case st.Completed != nil:
					s.out.Log("the pivot is complete")
					return true, nil
				}
			}
		}
		if snap.Failed() || snap.Graph == nil && time.Since(start) > releaseGrace {
			stuck = errors.New("a unit failed")
			return false, stuck
		}
		return false, nil
	})
	switch {
	case err == nil:
		return nil
	case stuck != nil:
		return conclude(ctx, s, bc, v, stuck)
	default:
		return conclude(ctx, s, bc, v, err)
	}
}

// conclude names what blocks, writes the diagnostics bundle and returns the error to report.
func conclude(ctx context.Context, s *session, bc *bootstrapCluster, v values.Settings, cause error) error {
	snap := s.result.Units
	var text string
	if snap.Graph == nil {
		text = "the cluster-init release did not render its units: " + termtext.Line(snap.Release)
	} else {
		c := progress.Conclude(snap)
		explainCluster(ctx, bc.cluster, v.Cluster.Name, snap.Graph, &c)
		s.result.Conclusion = &c
		text = c.String()
	}
	clusters := []*kube.Cluster{bc.cluster}
	if m, err := kube.ClusterAPICluster(ctx, bc.cluster.Client, names.Namespace, v.Cluster.Name); err == nil {
		clusters = append(clusters, m)
	}
	s.result.Diagnostics = collectDiagnostics(ctx, s, text, clusters...)
	// The cause (a failed unit, the run's --timeout) on a line of its own, before the bundle's
	// path: after it, it read as if writing the bundle had failed.
	diagnostics := ""
	if s.result.Diagnostics != "" {
		diagnostics = "\ndiagnostics (no secret values in it): " + s.result.Diagnostics
	}
	return fmt.Errorf("the bootstrap is stuck: %s\n(%w)%s", text, cause, diagnostics)
}

// explainCluster adds to a blocking unit that waits for the cluster what the providers logged for
// the objects its cluster waits for: a provider that cannot reach its cloud says so only in its log.
func explainCluster(ctx context.Context, c *kube.Cluster, name string, g *units.Graph, conclusion *progress.Conclusion) {
	waitsForCluster := map[string]bool{}
	for _, role := range units.ClusterRoles() {
		if u, ok := g.ByRole(role); ok {
			waitsForCluster[u.Name] = true
		}
	}
	for i := range conclusion.Blocking {
		u := &conclusion.Blocking[i]
		if !waitsForCluster[u.Name] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		lines, err := reconcileerrors.OfCluster(ctx, c, names.Namespace, name)
		cancel()
		if err != nil {
			lines = []string{fmt.Sprintf("the providers' logs could not be read: %v", err)}
		}
		u.Details = append(slices.Clip(u.Details), lines...)
	}
}

// collectDiagnostics writes the diagnostics bundle of the clusters reachable now.
func collectDiagnostics(ctx context.Context, s *session, conclusion string, clusters ...*kube.Cluster) string {
	// The run's context may be what expired: collecting gets its own time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	r := s.opts.Redactor
	if r == nil {
		r = redact.New(s.opts.Env.SecretValues(s.opts.Overrides...)...)
	}
	b := diagnostics.New(r)
	b.AddText("conclusion.txt", conclusion)
	for _, c := range clusters {
		if err := b.AddCluster(ctx, c); err != nil {
			b.AddText(c.Name+"/error.txt", err.Error())
		}
	}
	path, err := b.Write(s.opts.StateDir.Diagnostics(), filepath.Base(s.opts.Env.Name))
	if err != nil {
		s.out.Log("could not write the diagnostics bundle: %v", err)
		return ""
	}
	return path
}
