package main

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/diff"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/termtext/termtexttest"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/upgrades"
)

// A tenant writes into its directory's Kustomization and its Application's status (through the
// controllers that report on them): status shows both escaped.
func TestStatusEscapesWhatTenantsWrite(t *testing.T) {
	hostile := termtexttest.Hostile()
	c := testenv.Start(t, "mgmt")
	ctx := t.Context()
	const tenant = "tenant-a"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant, Labels: map[string]string{names.TenantLabel: "true"}}}
	if err := c.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: names.TenantKustomization},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Minute}, Path: "clusters/a", Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: tenant}}}
	if err := c.Client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	ks.Status.ObservedGeneration = ks.Generation
	ks.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ReconciliationFailed", Message: hostile, LastTransitionTime: metav1.Now()}}
	if err := c.Client.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}
	app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "app"},
		Spec: appsv1alpha1.ApplicationSpec{SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: tenant}, Path: "apps/app",
			Placement: appsv1alpha1.Placement{Clusters: []string{"c1"}}}}
	if err := c.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	app.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Failed", Message: hostile, LastTransitionTime: metav1.Now()}}
	app.Status.Placements = []appsv1alpha1.PlacementStatus{{Cluster: "c1", State: appsv1alpha1.PlacementState("Failed"), Message: hostile}}
	if err := c.Client.Status().Update(ctx, app); err != nil {
		t.Fatal(err)
	}

	out, err := run(t, "status", "kubeadm-capd", "--kubeconfig", kubeconfigFile(t, c))
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	termtexttest.Check(t, "status", out)
}

// The error a command ends with may quote what an API server answered, which may quote a
// tenant's value: it is printed escaped, its lines under the first. Which of its newlines are the
// data's the printer cannot tell: the data's lines stay inside the error, indented.
func TestTheFinalErrorIsEscaped(t *testing.T) {
	refusal := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Message: termtexttest.Hostile()}}
	err := errors.Join(fmt.Errorf("read the units of the management cluster: %w", refusal), errors.New("read the applications of the management cluster: timeout"))
	var out bytes.Buffer
	printError(&out, err)
	termtexttest.CheckBlock(t, "the final error", out.String())
}

// diff and upgrade plan quote the cluster's objects and values.
func TestTablesEscapeWhatTheClusterHolds(t *testing.T) {
	hostile := termtexttest.Hostile()
	var d bytes.Buffer
	writeDiff(&d, "env, management cluster (https://x)", diff.Report{Changes: []diff.Change{{Owner: "tenant " + hostile, Action: diff.Changed,
		Object: "ConfigMap tenant-a/" + hostile, Fields: []string{"data.x: " + hostile + " -> b"}}}, NotApplied: []string{hostile}}, []string{hostile})
	termtexttest.Check(t, "diff", d.String())

	var p bytes.Buffer
	writePlan(&p, "env, management cluster (https://x)", upgrades.Plan{
		Clusters:   []upgrades.Cluster{{Namespace: "tenant-a", Name: "c1", ControlPlane: "v1.33.1", Asked: "v1.34.0", AskedBy: hostile, Action: "refused", Reason: hostile}},
		Components: []upgrades.Component{{Unit: "capi", Deployment: "capi-system/capi-controller-manager", Running: hostile, Checkout: "x", Action: "upgrade", Reason: hostile}}})
	termtexttest.Check(t, "upgrade plan", p.String())
}
