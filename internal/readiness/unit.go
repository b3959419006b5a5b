// Package readiness is the one place that says whether things in a cluster are ready, with one
// rule for each kind of thing: a Flux object (a unit's Kustomization, an application placed on a
// cluster, a HelmRelease: ready, failed, or on its way, as Flux itself reports it) and any other
// object (kstatus). It waits for sets of objects with kstatus's poller and collector, reporting
// what is still pending. The progress view, the pivot, day 2, the placement controller and the
// CLI's own applies all ask here.
package readiness

import (
	"context"
	"fmt"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/units"
)

// OfUnit is the status of a unit from its Kustomization (nil: not created yet): Of, and a unit
// not created yet waits for the release that creates it.
func OfUnit(ks *kustomizev1.Kustomization) Status {
	if ks == nil {
		return Status{State: Pending, Message: "waiting for the cluster-init release to create it"}
	}
	return Of(ks)
}

// Units is one look at a release: the unit graph its chart resolved (nil until it has rendered)
// and the Kustomizations of its units.
type Units struct {
	Graph          *units.Graph
	Kustomizations map[string]*kustomizev1.Kustomization
}

// ReadUnits looks at the cluster-init release in namespace (ReadRelease for another release).
func ReadUnits(ctx context.Context, c client.Reader, namespace string) (Units, error) {
	return ReadRelease(ctx, c, namespace, names.Release)
}

// ReadRelease looks at a release in namespace. A cluster without the CRDs or the graph yet is not
// an error: the graph is nil.
func ReadRelease(ctx context.Context, c client.Reader, namespace, release string) (Units, error) {
	list, err := listKustomizations(ctx, c, namespace)
	if err != nil {
		return Units{}, err
	}
	return releaseUnits(ctx, c, namespace, release, list)
}

// ReadReleases looks at several releases of one namespace (a tenant's workload clusters) with
// one list of its Kustomizations: each release's own, by its graph.
func ReadReleases(ctx context.Context, c client.Reader, namespace string, releases []string) (map[string]Units, error) {
	list, err := listKustomizations(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	// Each release's graph is a read of its own: side by side, a loaded API server's latency is
	// paid about once, not once per cluster.
	found := make([]Units, len(releases))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrentReads)
	for i, r := range releases {
		g.Go(func() error {
			u, err := releaseUnits(gctx, c, namespace, r, list)
			if err != nil {
				return fmt.Errorf("release %s: %w", r, err)
			}
			found[i] = u
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[string]Units, len(releases))
	for i, r := range releases {
		out[r] = found[i]
	}
	return out, nil
}

// concurrentReads bounds the reads of one look that run at once: enough to hide a loaded API
// server's latency, few enough not to add to its load (and within the client's burst).
const concurrentReads = 8

// listKustomizations lists a namespace's Kustomizations; a cluster without their CRD has none.
func listKustomizations(ctx context.Context, c client.Reader, namespace string) (*kustomizev1.KustomizationList, error) {
	list := &kustomizev1.KustomizationList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil && !apimeta.IsNoMatchError(err) {
		return nil, fmt.Errorf("list Kustomizations: %w", err)
	}
	return list, nil
}

// releaseUnits reads a release's graph and picks its units' Kustomizations from list; without a
// graph, every Kustomization of list, by name.
func releaseUnits(ctx context.Context, c client.Reader, namespace, release string, list *kustomizev1.KustomizationList) (Units, error) {
	u := Units{Kustomizations: map[string]*kustomizev1.Kustomization{}}
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: names.UnitsConfigMapOf(release)}, cm)
	switch {
	case err == nil:
		if u.Graph, err = units.FromData(cm.Data); err != nil {
			return u, err
		}
	case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
	default:
		return u, fmt.Errorf("read the unit graph: %w", err)
	}
	// Kustomizations by unit: the graph names each unit's object.
	byObject := map[string]string{}
	if u.Graph != nil {
		for name, unit := range u.Graph.Units {
			byObject[unit.Object] = name
		}
	}
	for i := range list.Items {
		name := list.Items[i].Name
		if unit, ok := byObject[name]; ok {
			name = unit
		}
		u.Kustomizations[name] = &list.Items[i]
	}
	return u, nil
}

// Status is the status of one unit.
func (u Units) Status(name string) Status { return OfUnit(u.Kustomizations[name]) }

// Done tells whether every enabled unit is done, and each of want is an enabled unit; if not, it
// says about which unit and why.
func (u Units) Done(want ...string) (bool, string) {
	if u.Graph == nil {
		return false, "the cluster-init release has not rendered its units yet"
	}
	for _, w := range want {
		if _, ok := u.Graph.Units[w]; !ok || !u.Graph.Units[w].Enabled {
			return false, "unit " + w + " is not enabled yet"
		}
	}
	for _, name := range u.Graph.Order {
		if s := u.Status(name); !s.Done() {
			msg := s.Message
			if s.Reason != "" {
				msg = s.Reason + ": " + msg
			}
			return false, fmt.Sprintf("unit %s is %s: %s", name, s.State, msg)
		}
	}
	return true, ""
}
