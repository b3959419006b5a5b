package readiness_test

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cluster-init.dev/cluster-init/internal/readiness"
)

// reported is what a Flux controller wrote of an object, alike for every kind.
type reported struct {
	suspend              bool
	generation, observed int64
	conditions           []metav1.Condition
}

func (r reported) kustomization() *kustomizev1.Kustomization {
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "u", Generation: r.generation}}
	ks.Spec.Suspend = r.suspend
	ks.Status.ObservedGeneration = r.observed
	ks.Status.Conditions = r.conditions
	return ks
}

func (r reported) helmRelease() *helmv2.HelmRelease {
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "r", Generation: r.generation}}
	hr.Spec.Suspend = r.suspend
	hr.Status.ObservedGeneration = r.observed
	hr.Status.Conditions = r.conditions
	return hr
}

var since = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// at is a condition as Flux writes it: it records the generation it handled.
func at(generation int64, t string, s metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: reason + " message", ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(since)}
}

// The one rule for a Flux object, the same for a Kustomization and a HelmRelease.
func TestOf(t *testing.T) {
	for _, c := range []struct {
		name    string
		r       reported
		want    readiness.State
		failing bool
		done    bool
		reason  string // "": not checked
	}{
		{name: "no conditions", r: reported{generation: 1}, want: readiness.Reconciling},
		// Suspending changes the spec: the generation is past the one that became ready.
		{name: "suspended once ready", r: reported{true, 2, 1, []metav1.Condition{at(1, meta.ReadyCondition, "True", meta.ReconciliationSucceededReason)}},
			want: readiness.Suspended, done: true},
		{name: "suspended before ready", r: reported{true, 2, 0, []metav1.Condition{at(1, meta.ReadyCondition, "False", meta.HealthCheckFailedReason)}},
			want: readiness.Suspended},
		{name: "stalled", r: reported{false, 1, 0, []metav1.Condition{at(1, meta.ReadyCondition, "False", "BuildFailed"), at(1, meta.StalledCondition, "True", "InvalidPath")}},
			want: readiness.Failed, reason: "InvalidPath"},
		{name: "ready", r: reported{false, 2, 2, []metav1.Condition{at(2, meta.ReadyCondition, "True", meta.ReconciliationSucceededReason)}},
			want: readiness.Ready, done: true},
		{name: "ready for an older generation", r: reported{false, 3, 2, []metav1.Condition{at(2, meta.ReadyCondition, "True", meta.ReconciliationSucceededReason)}},
			want: readiness.Reconciling},
		{name: "waiting for a dependency", r: reported{false, 1, 0, []metav1.Condition{at(1, meta.ReadyCondition, "False", meta.DependencyNotReadyReason)}},
			want: readiness.Pending, reason: meta.DependencyNotReadyReason},
		{name: "progressing", r: reported{false, 1, 0, []metav1.Condition{at(1, meta.ReadyCondition, "Unknown", meta.ProgressingReason)}},
			want: readiness.Reconciling},
		{name: "progressing, not ready", r: reported{false, 1, 0, []metav1.Condition{at(1, meta.ReadyCondition, "False", meta.ProgressingReason)}},
			want: readiness.Reconciling},
		// Flux retries a failed attempt: work in progress, failing, never failed by itself.
		{name: "reconciliation failed (Flux retries)", r: reported{false, 2, 1, []metav1.Condition{at(2, meta.ReadyCondition, "False", meta.ReconciliationFailedReason)}},
			want: readiness.Reconciling, failing: true, reason: meta.ReconciliationFailedReason},
		{name: "health check failed (Flux retries)", r: reported{false, 1, 0, []metav1.Condition{at(1, meta.ReadyCondition, "False", meta.HealthCheckFailedReason)}},
			want: readiness.Reconciling, failing: true, reason: meta.HealthCheckFailedReason},
		{name: "health check interrupted by a request", r: reported{false, 1, 0, []metav1.Condition{at(1, meta.ReadyCondition, "False", meta.HealthCheckCanceledReason)}},
			want: readiness.Reconciling, failing: false, reason: meta.HealthCheckCanceledReason},
		{name: "install failed (Flux retries)", r: reported{false, 1, 0, []metav1.Condition{at(1, meta.ReadyCondition, "False", helmv2.InstallFailedReason)}},
			want: readiness.Reconciling, failing: true, reason: helmv2.InstallFailedReason},
		{name: "failed at an older generation", r: reported{false, 3, 1, []metav1.Condition{at(2, meta.ReadyCondition, "False", helmv2.UpgradeFailedReason)}},
			want: readiness.Reconciling, reason: helmv2.UpgradeFailedReason},
	} {
		for kind, s := range map[string]readiness.Status{
			"Kustomization": readiness.Of(c.r.kustomization()),
			"HelmRelease":   readiness.Of(c.r.helmRelease()),
		} {
			if s.State != c.want || s.Failing != c.failing || s.Done() != c.done {
				t.Errorf("%s, %s: %s (failing %t, done %t), want %s (failing %t, done %t)", c.name, kind, s.State, s.Failing, s.Done(), c.want, c.failing, c.done)
			}
			if c.reason != "" && (s.Reason != c.reason || s.Message != c.reason+" message" || !s.Since.Equal(since)) {
				t.Errorf("%s, %s: %q %q since %s, want %q and its message since %s", c.name, kind, s.Reason, s.Message, s.Since, c.reason, since)
			}
		}
	}
}

func TestOfNothingYet(t *testing.T) {
	for kind, s := range map[string]readiness.Status{
		"Kustomization": readiness.Of((*kustomizev1.Kustomization)(nil)),
		"HelmRelease":   readiness.Of((*helmv2.HelmRelease)(nil)),
		"unit":          readiness.OfUnit(nil),
	} {
		if s.State != readiness.Pending || s.Done() || s.Failing {
			t.Errorf("%s not created: %+v", kind, s)
		}
	}
}
