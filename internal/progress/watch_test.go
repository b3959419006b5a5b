package progress_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// The progress view reads, from a real API server, the graph and the Kustomizations the chart
// renders, and the Cluster API objects of the cluster.
func TestObserveReadsTheUnitsTheChartRenders(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	res, err := render.Render(t.Context(), root, "", render.Options{Env: env, Context: render.ContextBootstrap})
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.Start(t, "bootstrap")
	ctx := t.Context()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "cluster-init"}}}
	objs := []*unstructured.Unstructured{ns}
	for _, o := range res.Objects {
		if o.Unit == "" && o.Origin == render.UmbrellaChart {
			objs = append(objs, o.Object)
		}
	}
	if _, err := apply.New(c).Apply(ctx, objs); err != nil {
		t.Fatal(err)
	}

	setReady := func(name string, status metav1.ConditionStatus, reason, msg string) {
		ks := &kustomizev1.Kustomization{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "cluster-init", Name: name}, ks); err != nil {
			t.Fatal(err)
		}
		ks.Status.ObservedGeneration = ks.Generation
		ks.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}}
		if err := c.Client.Status().Update(ctx, ks); err != nil {
			t.Fatal(err)
		}
	}
	setReady("cert-manager", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	setReady("capi", metav1.ConditionUnknown, "Progressing", "Reconciliation in progress")
	setReady("cabpk", metav1.ConditionFalse, "DependencyNotReady", "dependency 'cluster-init/capi' is not ready")

	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "management"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "management-control-plane"}}}
	if err := c.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	cl.Status.Phase = "Provisioning"
	cl.Status.Conditions = []metav1.Condition{{Type: "ControlPlaneInitialized", Status: metav1.ConditionFalse, Reason: "NotInitialized", Message: "Control plane not yet initialized", LastTransitionTime: metav1.Now()}}
	if err := c.Client.Status().Update(ctx, cl); err != nil {
		t.Fatal(err)
	}

	src := progress.Source{Cluster: c, ClusterName: "management"}
	obs, err := src.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if obs.Graph == nil || !slices.Equal(obs.Graph.Order, res.Graph.Order) {
		t.Fatalf("graph read from the cluster: %v, rendered: %v", obs.Graph, res.Graph.Order)
	}
	snap := progress.NewTracker(time.Now()).Update(obs, time.Now())
	want := map[string]readiness.State{"cert-manager": readiness.Ready, "capi": readiness.Reconciling, "cabpk": readiness.Pending, "cluster-init": readiness.Reconciling}
	for name, state := range want {
		if u, _ := snap.Unit(name); u.State != state {
			t.Errorf("unit %s: %s, want %s", name, u.State, state)
		}
	}
	if u, _ := snap.Unit("cabpk"); u.Message != "waiting for capi" {
		t.Errorf("cabpk: %q", u.Message)
	}
	// Under the unit that defines the cluster and under the gate that waits for its machines: once
	// the first is ready, the second says what a bootstrap still waits for.
	for _, name := range []string{"cluster", "cluster-ready"} {
		if u, _ := snap.Unit(name); len(u.Details) == 0 || !strings.Contains(u.Details[0], "Cluster management: Provisioning; ControlPlaneInitialized=False (NotInitialized: Control plane not yet initialized)") {
			t.Errorf("%s details: %v", name, u.Details)
		}
	}
	if !strings.Contains(obs.Release, "release cluster-init: not created yet") {
		t.Errorf("release: %q", obs.Release)
	}
	var cm corev1.ConfigMap
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "cluster-init", Name: "cluster-init-units"}, &cm); err != nil {
		t.Fatal(err)
	}
}
