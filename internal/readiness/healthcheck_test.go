package readiness

import (
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The check under way is read from the conditions' statuses, reasons and times only: whatever
// message Flux writes, and a check that follows an interrupted one cannot be placed.
func TestHealthCheckOfReadsOnlyDocumentedFields(t *testing.T) {
	base := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	cond := func(typ string, st metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: "any words", LastTransitionTime: metav1.NewTime(at)}
	}
	unknown, tru, fals := metav1.ConditionUnknown, metav1.ConditionTrue, metav1.ConditionFalse
	for _, c := range []struct {
		name    string
		conds   []metav1.Condition
		suspend bool
		running bool
		took    time.Duration
	}{
		{"applying, no check yet", []metav1.Condition{cond(meta.ReadyCondition, unknown, meta.ProgressingReason, base)}, false, false, 0},
		{"check started 1s after the apply", []metav1.Condition{
			cond(meta.ReadyCondition, unknown, meta.ProgressingReason, base),
			cond(meta.HealthyCondition, unknown, meta.ProgressingReason, base.Add(time.Second)),
		}, false, true, time.Second},
		{"check started in the apply's second", []metav1.Condition{
			cond(meta.ReadyCondition, unknown, meta.ProgressingReason, base),
			cond(meta.HealthyCondition, unknown, meta.ProgressingReason, base),
		}, false, true, 0},
		{"after an interrupted check: Healthy older than the reconciliation", []metav1.Condition{
			cond(meta.ReadyCondition, unknown, meta.ProgressingReason, base.Add(5*time.Second)),
			cond(meta.HealthyCondition, unknown, meta.ProgressingReason, base),
		}, false, false, 0},
		{"previous check failed, applying again", []metav1.Condition{
			cond(meta.ReadyCondition, unknown, meta.ProgressingReason, base.Add(time.Minute)),
			cond(meta.HealthyCondition, fals, meta.HealthCheckFailedReason, base),
		}, false, false, 0},
		{"ready", []metav1.Condition{
			cond(meta.ReadyCondition, tru, meta.ReconciliationSucceededReason, base.Add(time.Minute)),
			cond(meta.HealthyCondition, tru, meta.SucceededReason, base.Add(time.Minute)),
		}, false, false, 0},
		{"interrupted (Ready False, HealthCheckCanceled)", []metav1.Condition{
			cond(meta.ReadyCondition, fals, meta.HealthCheckCanceledReason, base.Add(3*time.Second)),
			cond(meta.HealthyCondition, unknown, meta.ProgressingReason, base),
		}, false, false, 0},
		{"suspended in its check", []metav1.Condition{
			cond(meta.ReadyCondition, unknown, meta.ProgressingReason, base),
			cond(meta.HealthyCondition, unknown, meta.ProgressingReason, base.Add(time.Second)),
		}, true, false, 0},
	} {
		ks := &kustomizev1.Kustomization{Spec: kustomizev1.KustomizationSpec{Suspend: c.suspend}, Status: kustomizev1.KustomizationStatus{Conditions: c.conds}}
		h := HealthCheckOf(ks)
		if h.Running != c.running {
			t.Errorf("%s: running = %t, want %t", c.name, h.Running, c.running)
		}
		if h.Running && h.ApplyTook() != c.took {
			t.Errorf("%s: apply took %s, want %s", c.name, h.ApplyTook(), c.took)
		}
	}
	if HealthCheckOf(nil).Running {
		t.Error("a unit not created yet is in its check")
	}
}
