package handoff

import (
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A health check is interrupted only when Flux's own next look (every 5 s from the check's start)
// is further away than applying the unit again takes (what its apply took, within bounds).
func TestWorthAskingWeighsTheNextLookAgainstTheReapply(t *testing.T) {
	base := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	unit := func(applyStart, checkStart time.Time) *kustomizev1.Kustomization {
		return &kustomizev1.Kustomization{Status: kustomizev1.KustomizationStatus{Conditions: []metav1.Condition{
			{Type: meta.ReadyCondition, Status: metav1.ConditionUnknown, Reason: meta.ProgressingReason, LastTransitionTime: metav1.NewTime(applyStart)},
			// Reconciling may turn again when the check starts: it says nothing of the apply.
			{Type: meta.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: meta.ProgressingReason, LastTransitionTime: metav1.NewTime(checkStart)},
			{Type: meta.HealthyCondition, Status: metav1.ConditionUnknown, Reason: meta.ProgressingReason, LastTransitionTime: metav1.NewTime(checkStart)},
		}}}
	}
	for _, c := range []struct {
		name       string
		applyStart time.Time
		checkStart time.Time
		now        time.Time
		want       bool
	}{
		{"quick apply, next look 3.4s away", base, base, base.Add(6600 * time.Millisecond), true},
		{"quick apply, next look 0.8s away", base, base, base.Add(9200 * time.Millisecond), false},
		{"3s apply, next look 3s away", base.Add(-3 * time.Second), base, base.Add(7 * time.Second), false},
		{"Flux looking now (within the second after start + 5s)", base, base, base.Add(5500 * time.Millisecond), false},
		{"Flux's look may still run (a look takes up to half a second)", base, base, base.Add(6300 * time.Millisecond), false},
		{"just after the span of a look", base, base, base.Add(6600 * time.Millisecond), true},
		{"2s apply, next look 3.4s away", base.Add(-2 * time.Second), base, base.Add(6600 * time.Millisecond), true},
		{"3s apply, next look 3.4s away: left to Flux", base.Add(-3 * time.Second), base, base.Add(6600 * time.Millisecond), false},
		{"long apply counts as 3s", base.Add(-20 * time.Second), base, base.Add(6600 * time.Millisecond), false},
		{"check older than its reconciliation (restarted after an interruption)", base, base.Add(-time.Second), base.Add(9 * time.Second), true},
		{"check older than a minute", base, base, base.Add(64 * time.Second), true},
	} {
		if got := worthAsking(unit(c.applyStart, c.checkStart), c.now); got != c.want {
			t.Errorf("%s: worthAsking = %t, want %t", c.name, got, c.want)
		}
	}
	if !worthAsking(&kustomizev1.Kustomization{}, base) {
		t.Error("a unit without conditions to place its check: worthAsking = false, want true")
	}
}
