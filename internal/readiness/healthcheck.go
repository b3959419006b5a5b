package readiness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/collector"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/event"
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

// healthCheckMessage begins what kustomize-controller says in the Reconciling condition while it
// waits in a health check ("Running health checks for revision R with a timeout of T").
const healthCheckMessage = "Running health checks for revision "

// InHealthCheck tells whether Flux is waiting in the health check of ks, and since when the
// cluster says it is (the time is second-grained and, after an interrupted check, older than the
// check running now). After an interrupted check the Healthy condition stays as the check left it
// while the next reconciliation applies the unit again: only the Reconciling condition's message
// tells that apply from the check that follows it.
func InHealthCheck(ks *kustomizev1.Kustomization) (bool, time.Time) {
	if ks == nil || ks.Spec.Suspend {
		return false, time.Time{}
	}
	h := apimeta.FindStatusCondition(ks.Status.Conditions, meta.HealthyCondition)
	if h == nil || h.Status != metav1.ConditionUnknown || h.Reason != meta.ProgressingReason {
		return false, time.Time{}
	}
	r := apimeta.FindStatusCondition(ks.Status.Conditions, meta.ReconcilingCondition)
	if r == nil || r.Status != metav1.ConditionTrue || !strings.HasPrefix(r.Message, healthCheckMessage) {
		return false, time.Time{}
	}
	return true, h.LastTransitionTime.Time
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
// cannot be read are pending, not an error.
func WaitHealthy(ctx context.Context, c *kube.Cluster, ks *kustomizev1.Kustomization, ids object.ObjMetadataSet, interval time.Duration) error {
	if len(ids) == 0 {
		return nil
	}
	// In kustomize-controller's order (getClientAndPoller).
	readers := []engine.StatusReader{statusreaders.NewCustomJobStatusReader(c.Mapper)}
	if len(ks.Spec.HealthCheckExprs) > 0 {
		reader, err := cel.NewStatusReader(ks.Spec.HealthCheckExprs)
		if err != nil {
			return fmt.Errorf("Kustomization %s: health check expressions: %w", ks.Name, err)
		}
		readers = append(readers, reader(c.Mapper))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	poller := polling.NewStatusPoller(c.Client, c.Mapper, polling.Options{CustomStatusReaders: readers})
	coll := collector.NewResourceStatusCollector(ids)
	var healthy atomic.Bool
	done := coll.ListenWithObserver(poller.Poll(ctx, ids, polling.PollOptions{PollInterval: interval}),
		collector.ObserverFunc(func(rsc *collector.ResourceStatusCollector, _ event.Event) {
			if pending, _ := pendingOf(rsc); len(pending) == 0 {
				healthy.Store(true)
				cancel()
			}
		}))
	res := <-done
	if healthy.Load() {
		return nil
	}
	if res.Err != nil && !errors.Is(res.Err, context.Canceled) {
		return fmt.Errorf("%s cluster: the objects of Kustomization %s: %w", c.Name, ks.Name, res.Err)
	}
	return context.Cause(ctx)
}
