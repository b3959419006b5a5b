package readiness

import (
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// State of a Flux object (a unit is one).
type State string

// The states a Flux object goes through.
const (
	Pending     State = "pending"     // it does not exist yet, or waits for its dependencies
	Reconciling State = "reconciling" // Flux applies it, waits for its health checks, or retries it
	Ready       State = "ready"
	Failed      State = "failed" // stalled (or, seen by a watcher, not ready within its timeout)
	Suspended   State = "suspended"
)

// FluxObject is a Flux object that reports its own status: a Kustomization (a unit, or an
// application placed on a cluster) or a HelmRelease (the cluster-init release, a chart placed on a
// cluster).
type FluxObject interface {
	*kustomizev1.Kustomization | *helmv2.HelmRelease
}

// Status is what a Flux object says of itself.
type Status struct {
	State   State
	Reason  string
	Message string
	// Since is when the object entered its current condition, as the cluster recorded it.
	Since time.Time
	// ReadyWhenSuspended: the object was ready when it was suspended (the pivot suspends units
	// once they have done their work).
	ReadyWhenSuspended bool
	// Failing: the last attempt at the current generation failed (Reason and Message say why)
	// and Flux retries it, so the State stays Reconciling. Whether that is a failure for good is
	// the caller's to say: a bootstrap waits while Flux retries, until the unit's timeout.
	Failing bool
}

// Done tells whether the object needs nothing more: ready, or suspended once ready.
func (s Status) Done() bool {
	return s.State == Ready || s.State == Suspended && s.ReadyWhenSuspended
}

// Of is the status of a Flux object (nil: not created yet) as Flux reports it, through its API
// only (condition types and reasons, generations, spec.suspend): Stalled is a failure; Ready=True
// of the current generation is ready; a dependency not ready keeps it pending; anything else is
// work in progress, Failing when the last attempt at the current generation failed.
func Of[T FluxObject](obj T) Status {
	switch o := any(obj).(type) {
	case *kustomizev1.Kustomization:
		if o != nil {
			return statusOf(o.Spec.Suspend, o.Generation, o.Status.ObservedGeneration, o.Status.Conditions)
		}
	case *helmv2.HelmRelease:
		if o != nil {
			return statusOf(o.Spec.Suspend, o.Generation, o.Status.ObservedGeneration, o.Status.Conditions)
		}
	}
	return Status{State: Pending, Message: "not created yet"}
}

// statusOf is the rule of Of, on what every Flux object reports alike.
func statusOf(suspended bool, generation, observedGeneration int64, conditions []metav1.Condition) Status {
	ready := apimeta.FindStatusCondition(conditions, meta.ReadyCondition)
	if suspended {
		// Suspending changes the spec: the generation moves past the one that became ready.
		s := Status{State: Suspended, Reason: "Suspended", Message: "reconciliation suspended"}
		if ready != nil && ready.Status == metav1.ConditionTrue {
			s.Message, s.ReadyWhenSuspended = "suspended once ready", true
		}
		return s
	}
	if stalled := apimeta.FindStatusCondition(conditions, meta.StalledCondition); stalled != nil && stalled.Status == metav1.ConditionTrue {
		return Status{State: Failed, Reason: stalled.Reason, Message: stalled.Message, Since: stalled.LastTransitionTime.Time}
	}
	if ready == nil {
		return Status{State: Reconciling, Message: "not reconciled yet"}
	}
	s := Status{Reason: ready.Reason, Message: ready.Message, Since: ready.LastTransitionTime.Time}
	switch {
	// Flux moves status.observedGeneration on success only.
	case ready.Status == metav1.ConditionTrue && observedGeneration == generation:
		s.State = Ready
	case ready.Reason == meta.DependencyNotReadyReason:
		s.State = Pending
	default:
		s.State = Reconciling
		// A failure is known by the generation its condition records (a failed build leaves
		// status.observedGeneration behind): one of an older spec says nothing of this one.
		// A health check interrupted by a request (HealthCheckCanceled) is no failure either.
		s.Failing = ready.Status == metav1.ConditionFalse && ready.ObservedGeneration == generation &&
			ready.Reason != meta.ProgressingReason && ready.Reason != meta.HealthCheckCanceledReason
	}
	return s
}
