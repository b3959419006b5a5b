package readiness

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/collector"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/event"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/cel"
	"github.com/fluxcd/pkg/runtime/statusreaders"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"cluster-init.dev/cluster-init/internal/kube"
)

// HealthCheck is what the conditions of a Kustomization say of the health check of the
// reconciliation under way, read only from the fields Flux documents (condition types, statuses,
// reasons and transition times; never a message).
type HealthCheck struct {
	// Running: the reconciliation under way waits in its health check. Flux marks Ready Unknown
	// when a reconciliation starts applying and Healthy Unknown (reason Progressing) when its
	// check starts. A check interrupted by a request leaves Healthy as it was while the next
	// reconciliation applies again; that reconciliation's own check then keeps Healthy's older
	// transition time, so it cannot be told from the apply before it: neither counts as running.
	Running bool
	// Applying is when the reconciliation started (Ready's transition to Unknown: before it
	// fetched, built and applied the unit) and Checking when its check did (Healthy's), both to
	// the second as the cluster records them. Flux moves a condition's transition time when its
	// status, reason or message changes: the check of a new revision (its message names the
	// revision) gets a time of its own, the check that follows an interrupted one of the same
	// revision does not.
	Applying, Checking time.Time
}

// ApplyTook is how long the reconciliation fetched, built and applied the unit before its check
// started.
func (h HealthCheck) ApplyTook() time.Duration { return h.Checking.Sub(h.Applying) }

// HealthCheckOf reads the health check of ks's reconciliation under way.
func HealthCheckOf(ks *kustomizev1.Kustomization) HealthCheck {
	if ks == nil || ks.Spec.Suspend {
		return HealthCheck{}
	}
	healthy := apimeta.FindStatusCondition(ks.Status.Conditions, meta.HealthyCondition)
	ready := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReadyCondition)
	if healthy == nil || ready == nil || ready.Status != metav1.ConditionUnknown ||
		healthy.Status != metav1.ConditionUnknown || healthy.Reason != meta.ProgressingReason {
		return HealthCheck{}
	}
	h := HealthCheck{Applying: ready.LastTransitionTime.Time, Checking: healthy.LastTransitionTime.Time}
	h.Running = !h.Checking.Before(h.Applying)
	return h
}

// HealthChecked lists the objects the health check of ks waits for, as kustomize-controller
// chooses them: with spec.wait every object it applied (its inventory), otherwise
// spec.healthChecks.
func HealthChecked(ks *kustomizev1.Kustomization) (object.ObjMetadataSet, error) {
	var out object.ObjMetadataSet
	if ks.Spec.Wait {
		if ks.Status.Inventory == nil {
			return nil, nil
		}
		for _, e := range ks.Status.Inventory.Entries {
			id, err := object.ParseObjMetadata(e.ID)
			if err != nil {
				return nil, fmt.Errorf("Kustomization %s: inventory entry %q: %w", ks.Name, e.ID, err)
			}
			out = append(out, id)
		}
		return out, nil
	}
	for _, ref := range ks.Spec.HealthChecks {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("Kustomization %s: health check of %s %s: %w", ks.Name, ref.Kind, ref.Name, err)
		}
		out = append(out, object.ObjMetadata{
			Namespace: ref.Namespace, Name: ref.Name,
			GroupKind: schema.GroupKind{Group: gv.Group, Kind: ref.Kind},
		})
	}
	return out, nil
}

// WaitHealthy waits until the health check of ks would pass for ids: the status readers
// kustomize-controller checks with (kstatus, Flux's Job reader, under which a Job is ready once
// complete, and the Kustomization's own CEL expressions), looked at every interval. Objects that
// cannot be read are pending, not an error. waited tells whether a look found one of them not
// ready (a check that finds them ready at its first look needs no help).
func WaitHealthy(ctx context.Context, c *kube.Cluster, ks *kustomizev1.Kustomization, ids object.ObjMetadataSet, interval time.Duration) (waited bool, err error) {
	if len(ids) == 0 {
		return false, nil
	}
	// In kustomize-controller's order (getClientAndPoller).
	readers := []engine.StatusReader{statusreaders.NewCustomJobStatusReader(c.Mapper)}
	if len(ks.Spec.HealthCheckExprs) > 0 {
		reader, err := cel.NewStatusReader(ks.Spec.HealthCheckExprs)
		if err != nil {
			return false, fmt.Errorf("Kustomization %s: health check expressions: %w", ks.Name, err)
		}
		readers = append(readers, reader(c.Mapper))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	poller := polling.NewStatusPoller(c.Client, c.Mapper, polling.Options{CustomStatusReaders: readers})
	coll := collector.NewResourceStatusCollector(ids)
	var healthy, notReady atomic.Bool
	done := coll.ListenWithObserver(poller.Poll(ctx, ids, polling.PollOptions{PollInterval: interval}),
		collector.ObserverFunc(func(rsc *collector.ResourceStatusCollector, e event.Event) {
			// The event's own object only: the collector starts every object Unknown, and the
			// poller reports them one event each.
			if e.Type == event.ResourceUpdateEvent && e.Resource != nil && e.Resource.Status != status.CurrentStatus {
				notReady.Store(true)
			}
			if pending, _ := pendingOf(rsc); len(pending) == 0 {
				healthy.Store(true)
				cancel()
			}
		}))
	res := <-done
	if healthy.Load() {
		return notReady.Load(), nil
	}
	if res.Err != nil && !errors.Is(res.Err, context.Canceled) {
		return notReady.Load(), fmt.Errorf("%s cluster: the objects of Kustomization %s: %w", c.Name, ks.Name, res.Err)
	}
	return notReady.Load(), context.Cause(ctx)
}
