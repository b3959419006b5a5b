// Package readiness says whether things in a cluster are ready, with one rule for each kind of
// thing: a unit (its Flux Kustomization's conditions, as Flux itself reports them), any other
// object (kstatus), and it waits for sets of objects with kstatus's poller and collector, reporting
// what is still pending. The progress view, the pivot, day 2 and the CLI's own applies all ask here.
package readiness

import (
	"context"
	"fmt"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/units"
)

// State of a unit.
type State string

// The states a unit goes through.
const (
	Pending     State = "pending"     // its Kustomization does not exist yet, or waits for dependencies
	Reconciling State = "reconciling" // Flux applies it or waits for its health checks
	Ready       State = "ready"
	Failed      State = "failed" // stalled (or, seen by a watcher, not ready within its timeout)
	Suspended   State = "suspended"
)

// UnitStatus is what a unit's Kustomization says about it.
type UnitStatus struct {
	State   State
	Reason  string
	Message string
	// Since is when the Kustomization entered its current condition, as the cluster recorded it.
	Since time.Time
	// ReadyWhenSuspended: the unit was ready when it was suspended (the pivot suspends units
	// once they have done their work).
	ReadyWhenSuspended bool
}

// Done tells whether a unit needs nothing more: ready, or suspended once ready.
func (s UnitStatus) Done() bool {
	return s.State == Ready || s.State == Suspended && s.ReadyWhenSuspended
}

// OfUnit is the status of a unit from its Kustomization (nil: not created yet), the way Flux
// reports it: Stalled is a failure, Ready=True of the current generation is ready, a dependency
// not ready keeps it pending, anything else is work in progress.
func OfUnit(ks *kustomizev1.Kustomization) UnitStatus {
	if ks == nil {
		return UnitStatus{State: Pending, Message: "waiting for the cluster-init release to create it"}
	}
	ready := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
	if ks.Spec.Suspend {
		s := UnitStatus{State: Suspended, Reason: "Suspended", Message: "reconciliation suspended"}
		if ready != nil && ready.Status == metav1.ConditionTrue {
			s.Message, s.ReadyWhenSuspended = "suspended once ready", true
		}
		return s
	}
	if stalled := apimeta.FindStatusCondition(ks.Status.Conditions, meta.StalledCondition); stalled != nil && stalled.Status == metav1.ConditionTrue {
		return UnitStatus{State: Failed, Reason: stalled.Reason, Message: stalled.Message, Since: stalled.LastTransitionTime.Time}
	}
	if ready == nil {
		return UnitStatus{State: Reconciling, Message: "not reconciled yet"}
	}
	s := UnitStatus{Reason: ready.Reason, Message: ready.Message, Since: ready.LastTransitionTime.Time}
	switch {
	case ready.Status == metav1.ConditionTrue && ks.Status.ObservedGeneration == ks.Generation:
		s.State = Ready
	case ready.Reason == meta.DependencyNotReadyReason:
		s.State = Pending
	default:
		s.State = Reconciling
	}
	return s
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
	list := &kustomizev1.KustomizationList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil && !apimeta.IsNoMatchError(err) {
		return u, fmt.Errorf("list Kustomizations: %w", err)
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
func (u Units) Status(name string) UnitStatus { return OfUnit(u.Kustomizations[name]) }

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
