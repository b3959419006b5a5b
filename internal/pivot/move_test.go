package pivot

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// After clusterctl move, CAPO v0.13.0 never reconciles an OpenStackServer again unless the
// object changes: the pivot changes it, and only the ones of the moved namespace.
func TestTheMovedOpenStackServersAreWoken(t *testing.T) {
	c := testenv.Start(t, "management").Client
	ctx := context.Background()
	server := func(namespace, name string) *unstructured.Unstructured {
		o := testenv.OpenStackServer(namespace, name)
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create OpenStackServer %s/%s: %v", namespace, name, err)
		}
		return o
	}
	for _, ns := range []string{"cluster-init", "elsewhere"} {
		if err := c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}); err != nil {
			t.Fatal(err)
		}
	}
	moved := []*unstructured.Unstructured{server("cluster-init", "management-control-plane-a"), server("cluster-init", "management-workers-b")}
	other := server("elsewhere", "other")
	now := time.Date(2026, 11, 27, 7, 15, 41, 0, time.UTC)
	if woken, err := wakeAfterMove(ctx, c, "cluster-init", now); err != nil || woken != 2 {
		t.Fatalf("woken %d, %v; expected the 2 moved", woken, err)
	}
	for _, o := range append(moved, other) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		want := "2026-11-27T07:15:41Z"
		if o == other {
			want = ""
		}
		if a := got.GetAnnotations()[names.MovedAtAnnotation]; a != want {
			t.Errorf("%s/%s: %s=%q, expected %q", o.GetNamespace(), o.GetName(), names.MovedAtAnnotation, a, want)
		}
		if o != other && got.GetResourceVersion() == o.GetResourceVersion() {
			t.Errorf("%s was not changed: its controller is not woken", o.GetName())
		}
	}
}

// A moved server that has reported its instance since is not woken again.
func TestAServerThatReportedItsInstanceIsLeftAlone(t *testing.T) {
	c := testenv.Start(t, "management").Client
	ctx := context.Background()
	if err := c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "cluster-init"}}}); err != nil {
		t.Fatal(err)
	}
	o := testenv.OpenStackServer("cluster-init", "management-workers-b")
	if err := c.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	o.Object["status"] = map[string]any{"instanceID": "b4a50e2d-29b6-494e-be9d-a2cff5330338", "ready": true}
	if err := c.Status().Update(ctx, o); err != nil {
		t.Fatal(err)
	}
	if woken, err := wakeAfterMove(ctx, c, "cluster-init", time.Now()); err != nil || woken != 0 {
		t.Errorf("woken %d, %v; expected none", woken, err)
	}
}
