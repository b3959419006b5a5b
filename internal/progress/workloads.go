package progress

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/revisions"
	"cluster-init.dev/cluster-init/internal/termtext"
)

// Tenant is what a look at a tenant's namespace finds.
type Tenant struct {
	Namespace string
	// Directory is the state of the Kustomization that applies the tenant's directory.
	Directory string
	// Revision is the commit of the tenant's directory applied, and what its source fetched.
	Revision revisions.Revision
	// Refused is why the platform's gate did not hand the directory's last commit on (a file past
	// a bound, internal/tenantsources); "" when it did.
	Refused string
	// Shard is the tenants' shard that reconciles it; ShardRestarts what of its controllers
	// restarted (a file that took all of a controller's memory stops its shard only).
	Shard         string
	ShardRestarts []string
	Clusters      []WorkloadCluster
}

// WorkloadCluster is one workload cluster: its release, its Cluster API cluster and its units.
type WorkloadCluster struct {
	Name     string
	Release  string
	Machines machines.View
	Units    readiness.Units
}

// ObserveWorkloadClusters looks at every tenant of the management cluster.
func ObserveWorkloadClusters(ctx context.Context, c client.Reader) ([]Tenant, error) {
	namespaces := &corev1.NamespaceList{}
	if err := c.List(ctx, namespaces, client.MatchingLabels{names.TenantLabel: "true"}); err != nil {
		return nil, fmt.Errorf("list the tenants' namespaces: %w", err)
	}
	rd := revisions.NewReader(c)
	out := make([]Tenant, len(namespaces.Items))
	// The tenants side by side: on a loaded management cluster each read waits, and a look
	// must stay quick with many tenants and clusters.
	g, ctx := errgroup.WithContext(ctx)
	for i := range namespaces.Items {
		g.Go(func() (err error) {
			out[i], err = observeTenant(ctx, c, rd, namespaces.Items[i].Name)
			return err
		})
	}
	var restarts map[string][]string
	g.Go(func() error {
		restarts = shardRestarts(ctx, c)
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].ShardRestarts = restarts[out[i].Shard]
	}
	return out, nil
}

// shardRestarts says, by shard, which of the shards' controllers restarted and why the last
// time, or cannot be scheduled. A look that may not read the pods of Flux's namespace says
// nothing of them.
func shardRestarts(ctx context.Context, c client.Reader) map[string][]string {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(names.FluxNamespace), client.HasLabels{names.ShardLabel}); err != nil {
		return nil
	}
	out := map[string][]string{}
	for _, p := range pods.Items {
		controller := strings.TrimSuffix(p.Labels["app"], "-shard")
		shard := p.Labels[names.ShardLabel]
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				out[shard] = append(out[shard], fmt.Sprintf("%s not scheduled: %s", controller, machines.FirstLine(c.Message)))
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount == 0 {
				continue
			}
			note := fmt.Sprintf("%s restarted %d times", controller, cs.RestartCount)
			if last := cs.LastTerminationState.Terminated; last != nil {
				note += fmt.Sprintf(", last %s (%s ago)", last.Reason, time.Since(last.FinishedAt.Time).Round(time.Second))
			}
			out[shard] = append(out[shard], note)
		}
	}
	return out
}

// observeTenant reads one tenant's namespace: its directory's Kustomization, its workload
// clusters (HelmReleases), their units and machines, each with one read whatever their number:
// the directory, the releases and the machines side by side, then the units of the releases found.
func observeTenant(ctx context.Context, c client.Reader, rd *revisions.Reader, ns string) (Tenant, error) {
	t := Tenant{Namespace: ns, Directory: "not applied yet"}
	releases := &helmv2.HelmReleaseList{}
	var views map[string]machines.View
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		ks := &kustomizev1.Kustomization{}
		if err := c.Get(gctx, client.ObjectKey{Namespace: ns, Name: names.TenantKustomization}, ks); err == nil {
			t.Directory = describeFlux(ks, ks.Spec.Path)
			t.Revision = rd.Of(gctx, ks)
			t.Shard = ks.Labels[names.ShardLabel]
		}
		return nil
	})
	g.Go(func() error {
		ea := &sourcev1.ExternalArtifact{}
		if err := c.Get(gctx, client.ObjectKey{Namespace: ns, Name: names.TenantCheckedSource}, ea); err == nil {
			if cond := apimeta.FindStatusCondition(ea.Status.Conditions, meta.ReadyCondition); cond != nil && cond.Status == metav1.ConditionFalse {
				t.Refused = cond.Message
			}
		}
		return nil
	})
	g.Go(func() error {
		if err := c.List(gctx, releases, client.InNamespace(ns)); err != nil && !apimeta.IsNoMatchError(err) {
			return fmt.Errorf("list the workload clusters of %s: %w", ns, err)
		}
		return nil
	})
	// Every cluster's machines with one list of each kind: status stays quick with a
	// hundred clusters on a management cluster busy with them.
	g.Go(func() (err error) {
		if views, err = machines.ReadNamespace(gctx, c, ns); err != nil {
			return fmt.Errorf("read the workload clusters of %s: %w", ns, err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return t, err
	}
	// A workload cluster is a HelmRelease the tenant's directory applies; the others are
	// units of a cluster (its definitions).
	var clusters []helmv2.HelmRelease
	var releaseNames []string
	for _, hr := range releases.Items {
		if hr.Labels["kustomize.toolkit.fluxcd.io/name"] == names.TenantKustomization {
			clusters = append(clusters, hr)
			releaseNames = append(releaseNames, hr.Name)
		}
	}
	// The namespace's Kustomizations once, not once per cluster: their lists grow with the
	// clusters, and status must stay quick with many.
	units, err := readiness.ReadReleases(ctx, c, ns, releaseNames)
	if err != nil {
		return t, err
	}
	t.Clusters = make([]WorkloadCluster, len(clusters))
	for i := range clusters {
		hr := &clusters[i]
		view, ok := views[hr.Name]
		if !ok {
			view = machines.View{Namespace: ns, Name: hr.Name}
		}
		t.Clusters[i] = WorkloadCluster{Name: hr.Name, Release: describeFlux(hr, "release"), Units: units[hr.Name], Machines: view}
	}
	sort.Slice(t.Clusters, func(i, j int) bool { return t.Clusters[i].Name < t.Clusters[j].Name })
	return t, nil
}

// WriteWorkloadClusters prints the tenants, their workload clusters, the machines and the units
// of each. Each line is escaped whole (termtext.Line): most of it comes from the tenants'
// objects.
func WriteWorkloadClusters(w io.Writer, tenants []Tenant) {
	if len(tenants) == 0 {
		return
	}
	fmt.Fprintln(w, "\nworkload clusters:")
	for _, t := range tenants {
		line := fmt.Sprintf("  tenant %s: %s", t.Namespace, t.Directory)
		if rev := t.Revision.String(); rev != "" {
			line += " (commit " + rev + ")"
		}
		fmt.Fprintln(w, termtext.Line(line))
		if t.Refused != "" {
			fmt.Fprintf(w, "    ✗ its directory is not applied: %s\n", termtext.Line(t.Refused))
		}
		for _, r := range t.ShardRestarts {
			fmt.Fprintf(w, "    ! its shard %s: %s\n", termtext.Line(t.Shard), termtext.Line(r))
		}
		if len(t.Clusters) == 0 {
			fmt.Fprintln(w, "    no workload cluster")
		}
		for _, c := range t.Clusters {
			fmt.Fprintf(w, "    %s\n", termtext.Line(fmt.Sprintf("%s: %s; %s", c.Name, clusterState(c.Machines, time.Now()), c.Release)))
			for _, trouble := range clusterTroubles(c.Machines, time.Now()) {
				fmt.Fprintf(w, "      ! %s\n", termtext.Line(trouble))
			}
			if c.Units.Graph == nil {
				continue
			}
			var units []string
			for _, u := range c.Units.Graph.Enabled() {
				s := c.Units.Status(u.Name)
				text := fmt.Sprintf("%s %s", symbols[s.State], u.Name)
				if s.State != readiness.Ready && s.Reason != "" {
					text += " (" + s.Reason + ": " + machines.FirstLine(s.Message) + ")"
				}
				units = append(units, text)
			}
			fmt.Fprintf(w, "      units: %s\n", termtext.Line(strings.Join(units, ", ")))
			if ok, pending := c.Machines.Settled(); !ok && c.Machines.Found {
				for _, p := range pending {
					fmt.Fprintf(w, "      %s\n", termtext.Line(p))
				}
			}
		}
	}
}

// WriteCluster prints the state of the cluster a release defines (status shows the management
// cluster's): its machines, the nearest expiry of its control plane's certificates, and what its
// health checks found, each line escaped.
func WriteCluster(w io.Writer, v machines.View, now time.Time) {
	if !v.Found {
		return
	}
	WriteSection(w, fmt.Sprintf("cluster %s: %s", v.Name, clusterState(v, now)), clusterTroubles(v, now))
}

// WriteSection prints a part of status in a line after an empty one, and what is wrong with it
// below, each line escaped; an empty line prints nothing.
func WriteSection(w io.Writer, line string, troubles []string) {
	if line == "" {
		return
	}
	fmt.Fprintf(w, "\n%s\n", termtext.Line(line))
	for _, trouble := range troubles {
		fmt.Fprintf(w, "  ! %s\n", termtext.Line(trouble))
	}
}

// clusterState is a cluster in a line: its phase, its machines ready, whether it is Available,
// and when its control plane's certificates expire first (KubeadmControlPlane rolls a machine
// before they do, as the cluster's values ask).
func clusterState(v machines.View, now time.Time) string {
	if !v.Found {
		return "not created yet"
	}
	ready := 0
	for _, m := range v.Machines {
		if m.Ready {
			ready++
		}
	}
	state := fmt.Sprintf("%s, %d/%d machines ready", v.Phase, ready, v.Wanted)
	if v.Available {
		state += ", Available"
	}
	if at, of := v.CertificatesExpire(); !at.IsZero() {
		state += fmt.Sprintf("; certificates expire %s (in %d days, machine %s)", at.UTC().Format(time.DateOnly), int(at.Sub(now).Hours()/24), of)
	}
	return state
}

// clusterTroubles are the machines a health check found unhealthy (why, since when, what their
// owner does) and the health checks that replace no machine now.
func clusterTroubles(v machines.View, now time.Time) []string {
	var out []string
	for _, m := range v.Machines {
		if m.Unhealthy != "" {
			role := "worker"
			if m.ControlPlane {
				role = "control plane"
			}
			out = append(out, fmt.Sprintf("machine %s (%s, %s): %s", m.Name, role, m.Phase, m.Remediating(now)))
		}
	}
	return append(out, v.GaveUp()...)
}
