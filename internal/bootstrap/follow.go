package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/environment"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/render"
)

// pollInterval is how often the units are observed.
const pollInterval = 3 * time.Second

// releaseGrace is how long the cluster-init release may take to render its units before the run
// concludes that it cannot.
const releaseGrace = 10 * time.Minute

// pivotUnit is the unit of the pivot Job.
const pivotUnit = "pivot"

// followUnits follows every unit until all are ready (the pivot included), a unit fails, or the
// run times out; then it concludes what blocks and writes the diagnostics bundle.
func (f *flow) followUnits(ctx context.Context) error {
	clusterName := nestedString(f.values, "cluster", "name")
	src := progress.Source{Cluster: f.bootstrap, Namespace: environment.Namespace, Release: render.ReleaseName,
		ClusterName: clusterName, ClusterUnit: "cluster"}
	tracker := progress.NewTracker(time.Now())
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	start := time.Now()
	for {
		obs, err := src.Observe(ctx)
		if err != nil && ctx.Err() == nil {
			// The API server of a busy bootstrap cluster can fail a request: try again.
			f.out.Log("observing the units: %v (retrying)", err)
		}
		if err == nil {
			snap := tracker.Update(obs, time.Now())
			f.result.Units = snap
			f.out.Units(snap)
			if snap.Graph != nil && unitsDone(snap) {
				f.out.Log("every unit is ready")
				return nil
			}
			// The pivot's record is the truth about the pivot: once it is complete, the bootstrap
			// cluster's units (frozen since its suspend step) do not matter any more.
			if f.kind != nil && slices.Contains(snapshotNames(snap), pivotUnit) && f.pivotComplete(ctx) == nil {
				f.out.Log("the pivot is complete")
				return nil
			}
			if failed := anyFailed(snap); failed || (snap.Graph == nil && time.Since(start) > releaseGrace) {
				return f.conclude(ctx, snap, errors.New("a unit failed"))
			}
		}
		select {
		case <-ctx.Done():
			return f.conclude(ctx, f.result.Units, ctx.Err())
		case <-tick.C:
		}
	}
}

func snapshotNames(s progress.Snapshot) []string {
	names := make([]string, len(s.Units))
	for i, u := range s.Units {
		names[i] = u.Name
	}
	return names
}

func unitsDone(s progress.Snapshot) bool {
	for _, u := range s.Units {
		if !u.Done() {
			return false
		}
	}
	return len(s.Units) > 0
}

func anyFailed(s progress.Snapshot) bool {
	for _, u := range s.Units {
		if u.State == progress.Failed {
			return true
		}
	}
	return false
}

// conclude names what blocks, writes the diagnostics bundle and returns the error to report.
func (f *flow) conclude(ctx context.Context, s progress.Snapshot, cause error) error {
	var text string
	if s.Graph == nil {
		text = "the cluster-init release did not render its units: " + s.Release
	} else {
		c := progress.Conclude(s)
		f.result.Conclusion = &c
		text = c.String()
	}
	clusters := []*kube.Cluster{f.bootstrap}
	if m, err := f.managementCluster(ctx); err == nil {
		clusters = append(clusters, m)
	}
	f.result.Diagnostics = f.collectDiagnostics(ctx, text, clusters...)
	msg := fmt.Sprintf("the bootstrap is stuck: %s", text)
	if f.result.Diagnostics != "" {
		msg += "\ndiagnostics (no secret values in it): " + f.result.Diagnostics
	}
	return fmt.Errorf("%s: %w", msg, cause)
}

// managementCluster connects to the new cluster through the kubeconfig Secret Cluster API wrote.
func (f *flow) managementCluster(ctx context.Context) (*kube.Cluster, error) {
	if f.bootstrap == nil {
		return nil, errors.New("no bootstrap cluster")
	}
	name := nestedString(f.values, "cluster", "name") + "-kubeconfig"
	s := &corev1.Secret{}
	if err := f.bootstrap.Client.Get(ctx, client.ObjectKey{Namespace: environment.Namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("kubeconfig Secret %s: %w", name, err)
	}
	return kube.FromKubeconfig("management", s.Data["value"])
}
