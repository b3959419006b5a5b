package handoff_test

import (
	"slices"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/handoff"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/units"
)

// A graph a → b → c, d → {a, c}: which units are waiting for nothing any more.
func graph() *units.Graph {
	u := func(name string, deps ...string) *units.Unit {
		return &units.Unit{Name: name, Enabled: true, Object: name, DependsOn: deps, Kind: units.KindKustomization}
	}
	return &units.Graph{
		Units: map[string]*units.Unit{"a": u("a"), "b": u("b", "a"), "c": u("c", "b"), "d": u("d", "a", "c")},
		Order: []string{"a", "b", "c", "d"},
	}
}

func status(ready metav1.ConditionStatus, reason string) kustomizev1.KustomizationStatus {
	return kustomizev1.KustomizationStatus{
		ObservedGeneration: 1,
		Conditions: []metav1.Condition{{
			Type: meta.ReadyCondition, Status: ready, Reason: reason, Message: reason,
			LastTransitionTime: metav1.Now(),
		}},
	}
}

func TestUnblocked(t *testing.T) {
	ready := status(metav1.ConditionTrue, meta.ReconciliationSucceededReason)
	waiting := status(metav1.ConditionFalse, meta.DependencyNotReadyReason)
	working := status(metav1.ConditionUnknown, meta.ProgressingReason)
	for _, c := range []struct {
		name     string
		statuses map[string]kustomizev1.KustomizationStatus
		want     []string
	}{
		{"b's dependency turned ready", map[string]kustomizev1.KustomizationStatus{"a": ready, "b": waiting, "c": waiting, "d": waiting}, []string{"b"}},
		{"b already started", map[string]kustomizev1.KustomizationStatus{"a": ready, "b": working, "c": waiting, "d": waiting}, nil},
		{"d needs c too", map[string]kustomizev1.KustomizationStatus{"a": ready, "b": ready, "c": working, "d": waiting}, nil},
		{"c and then d", map[string]kustomizev1.KustomizationStatus{"a": ready, "b": ready, "c": ready, "d": waiting}, []string{"d"}},
		{"a unit with no dependency waits for nothing", map[string]kustomizev1.KustomizationStatus{"a": waiting}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := readiness.Units{Graph: graph(), Kustomizations: map[string]*kustomizev1.Kustomization{}}
			for name, st := range c.statuses {
				u.Kustomizations[name] = &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}, Status: st}
			}
			if got := handoff.Unblocked(u); !slices.Equal(got, c.want) {
				t.Errorf("Unblocked = %v, want %v", got, c.want)
			}
		})
	}
	// A dependency needed only applied: met once Flux has applied its objects.
	g := graph()
	g.Units["b"].AppliedDeps = []string{"a"}
	applied := working
	applied.Inventory = &kustomizev1.ResourceInventory{}
	for _, c := range []struct {
		a    kustomizev1.KustomizationStatus
		want []string
	}{{working, nil}, {applied, []string{"b"}}} {
		u := readiness.Units{Graph: g, Kustomizations: map[string]*kustomizev1.Kustomization{
			"a": {ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 1}, Status: c.a},
			"b": {ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 1}, Status: waiting},
		}}
		if got := handoff.Unblocked(u); !slices.Equal(got, c.want) {
			t.Errorf("b needs a applied, a inventory %v: Unblocked = %v, want %v", c.a.Inventory, got, c.want)
		}
	}
	if got := handoff.Unblocked(readiness.Units{}); got != nil {
		t.Errorf("Unblocked without a graph = %v, want none", got)
	}
}

// The request is Flux's own (the annotation `flux reconcile` sets), made once per unit and gap.
func TestRequestAsksFluxOncePerUnblockedUnit(t *testing.T) {
	c := testenv.Start(t, "handoff")
	ctx := t.Context()
	const ns = "cluster-init"
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		ks := &kustomizev1.Kustomization{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kustomizev1.KustomizationSpec{
				Interval: metav1.Duration{Duration: time.Hour}, Prune: true, Path: "./" + name,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "OCIRepository", Name: "src"},
			},
		}
		if err := c.Client.Create(ctx, ks); err != nil {
			t.Fatal(err)
		}
		ks.Status = status(metav1.ConditionFalse, meta.DependencyNotReadyReason)
		if name == "a" {
			ks.Status = status(metav1.ConditionTrue, meta.ReconciliationSucceededReason)
		}
		if err := c.Client.Status().Update(ctx, ks); err != nil {
			t.Fatal(err)
		}
	}
	g := graph()
	delete(g.Units, "d")
	g.Order = g.Order[:3]
	read := func() readiness.Units {
		t.Helper()
		u, err := readiness.ReadUnits(ctx, c.Client, ns)
		if err != nil {
			t.Fatal(err)
		}
		u.Graph = g
		return u
	}
	requested := func(name string) string { return requestedAt(t, c.Client, ns, name) }

	r := handoff.NewRequester(c.Client)
	asked, err := r.Request(ctx, read())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, []string{"b"}) {
		t.Fatalf("asked %v, want [b]", asked)
	}
	first := requested("b")
	if first == "" {
		t.Fatal("b carries no reconcile request")
	}
	if requested("c") != "" {
		t.Error("c was asked to reconcile although b is not ready")
	}
	// Flux has not answered yet: asking again at once would only make it start over.
	if asked, err = r.Request(ctx, read()); err != nil || len(asked) != 0 {
		t.Errorf("second look: asked %v (%v), want nothing", asked, err)
	}
	if requested("b") != first {
		t.Error("the request of b was renewed within the gap")
	}
}

// requestedAt is the reconcile request a unit's Kustomization carries ("" for none).
func requestedAt(t *testing.T, c client.Client, namespace, name string) string {
	t.Helper()
	ks := &kustomizev1.Kustomization{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: name}, ks); err != nil {
		t.Fatal(err)
	}
	return ks.Annotations[meta.ReconcileRequestAnnotation]
}
