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

// A unit is its Kustomization, under the one rule of a Flux object; one not created yet waits for
// the release that creates it.
func TestOfUnit(t *testing.T) {
	if s := readiness.OfUnit(nil); s.State != readiness.Pending || !strings.Contains(s.Message, "cluster-init release") {
		t.Errorf("not created: %+v", s)
	}
	failing := cond("Ready", "False", "HealthCheckFailed")
	failing.ObservedGeneration = 1
	ks := kustomization(1, 0, false, failing)
	if s := readiness.OfUnit(ks); s != readiness.Of(ks) || !s.Failing {
		t.Errorf("OfUnit %+v, Of %+v", s, readiness.Of(ks))
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
