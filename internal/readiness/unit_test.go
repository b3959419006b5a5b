package readiness_test

import (
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/units"
)

func kustomization(gen, observed int64, suspend bool, conds ...metav1.Condition) *kustomizev1.Kustomization {
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "u", Generation: gen}}
	ks.Spec.Suspend = suspend
	ks.Status.ObservedGeneration = observed
	ks.Status.Conditions = conds
	return ks
}

func cond(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: reason + " message"}
}

// The one rule for a unit, as Flux reports it.
func TestOfUnit(t *testing.T) {
	for _, c := range []struct {
		name string
		ks   *kustomizev1.Kustomization
		want readiness.State
		done bool
	}{
		{"not created", nil, readiness.Pending, false},
		{"never reconciled", kustomization(1, 0, false), readiness.Reconciling, false},
		{"ready", kustomization(2, 2, false, cond("Ready", "True", "ReconciliationSucceeded")), readiness.Ready, true},
		{"ready for an older generation", kustomization(3, 2, false, cond("Ready", "True", "ReconciliationSucceeded")), readiness.Reconciling, false},
		{"waiting for a dependency", kustomization(1, 1, false, cond("Ready", "False", "DependencyNotReady")), readiness.Pending, false},
		{"health check failing (Flux retries)", kustomization(1, 1, false, cond("Ready", "False", "HealthCheckFailed")), readiness.Reconciling, false},
		{"progressing", kustomization(1, 1, false, cond("Ready", "Unknown", "Progressing")), readiness.Reconciling, false},
		{"stalled", kustomization(1, 1, false, cond("Ready", "False", "BuildFailed"), cond("Stalled", "True", "BuildFailed")), readiness.Failed, false},
		{"suspended once ready", kustomization(1, 1, true, cond("Ready", "True", "ReconciliationSucceeded")), readiness.Suspended, true},
		{"suspended before ready", kustomization(1, 1, true, cond("Ready", "False", "HealthCheckFailed")), readiness.Suspended, false},
	} {
		s := readiness.OfUnit(c.ks)
		if s.State != c.want || s.Done() != c.done {
			t.Errorf("%s: %s (done %t), want %s (done %t)", c.name, s.State, s.Done(), c.want, c.done)
		}
	}
}

func TestUnitsDone(t *testing.T) {
	g := &units.Graph{Order: []string{"a", "b"}, Units: map[string]*units.Unit{
		"a": {Name: "a", Enabled: true}, "b": {Name: "b", Enabled: true, DependsOn: []string{"a"}}, "c": {Name: "c"},
	}}
	u := readiness.Units{Graph: g, Kustomizations: map[string]*kustomizev1.Kustomization{
		"a": kustomization(1, 1, false, cond("Ready", "True", "ReconciliationSucceeded")),
		"b": kustomization(1, 1, false, cond("Ready", "False", "HealthCheckFailed")),
	}}
	if done, why := u.Done(); done || !strings.Contains(why, "unit b is reconciling: HealthCheckFailed") {
		t.Errorf("done %t: %s", done, why)
	}
	u.Kustomizations["b"] = kustomization(1, 1, false, cond("Ready", "True", "ReconciliationSucceeded"))
	if done, why := u.Done(); !done {
		t.Errorf("not done: %s", why)
	}
	if done, why := u.Done("c"); done || !strings.Contains(why, "unit c is not enabled") {
		t.Errorf("a disabled unit wanted: %t %s", done, why)
	}
	if done, _ := (readiness.Units{}).Done(); done {
		t.Error("no graph is done")
	}
}

// A unit is in its health check only while kustomize-controller says it runs one: after an
// interrupted check, the Healthy condition it left behind stays while the unit is applied again,
// and a hand-off asked then would interrupt the next check before its first look.
func TestInHealthCheck(t *testing.T) {
	msg := func(c metav1.Condition, m string) metav1.Condition { c.Message = m; return c }
	healthy := msg(cond("Healthy", "Unknown", "Progressing"), "Running health checks for revision main@sha1:0 with a timeout of 5m0s")
	for _, c := range []struct {
		name string
		ks   *kustomizev1.Kustomization
		want bool
	}{
		{"checking", kustomization(1, 1, false, msg(cond("Reconciling", "True", "Progressing"), healthy.Message), healthy), true},
		{"applying again after an interrupted check", kustomization(1, 1, false, msg(cond("Reconciling", "True", "Progressing"), "Reconciliation in progress"), healthy), false},
		{"applying, never checked", kustomization(1, 1, false, msg(cond("Reconciling", "True", "Progressing"), "Reconciliation in progress")), false},
		{"passed", kustomization(1, 1, false, cond("Healthy", "True", "Succeeded")), false},
		{"suspended while checking", kustomization(1, 1, true, msg(cond("Reconciling", "True", "Progressing"), healthy.Message), healthy), false},
	} {
		if got, _ := readiness.InHealthCheck(c.ks); got != c.want {
			t.Errorf("%s: in health check %t, want %t", c.name, got, c.want)
		}
	}
}
