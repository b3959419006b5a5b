package tenantshards_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/tenantshards"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// A shard's controllers stay while a namespace of the shard is left (a Terminating one, whose
// Flux objects they finalize) or the platform's Kustomization makes them, and go after.
func TestAShardGoesOnceNoTenantHasIt(t *testing.T) {
	c := testenv.Start(t, "management").Client
	ctx := t.Context()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.FluxNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-init"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{names.TenantLabel: "true", names.ShardLabel: "team-a"}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	deployment := func(shard string) *appsv1.Deployment {
		labels := map[string]string{"app": "kustomize-controller-shard", names.ShardLabel: shard}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: names.FluxNamespace, Name: "kustomize-controller-" + shard, Labels: labels},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "x"}}}}}}
	}
	for _, shard := range []string{"team-a", "team-b", "gone"} {
		if err := c.Create(ctx, deployment(shard)); err != nil {
			t.Fatal(err)
		}
	}
	ks := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: tenantshards.KustomizationOf("team-b")},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: 60e9}, Path: "./kustomize-components/flux-shard", Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "cluster-init"}}}
	if err := c.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	r := &tenantshards.Reconciler{Client: c, Namespace: "cluster-init"}
	exists := func(shard string) bool {
		err := c.Get(ctx, client.ObjectKey{Namespace: names.FluxNamespace, Name: "kustomize-controller-" + shard}, &appsv1.Deployment{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	reconcile := func(shard string) {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: names.FluxNamespace, Name: "kustomize-controller-" + shard}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, shard := range []string{"team-a", "team-b", "gone"} {
		reconcile(shard)
	}
	if !exists("team-a") || !exists("team-b") || exists("gone") {
		t.Errorf("team-a (a namespace) kept %t, team-b (a Kustomization) kept %t, a shard of nothing kept %t", exists("team-a"), exists("team-b"), exists("gone"))
	}
	// The tenant goes: its namespace first (envtest runs no namespace controller: it stays
	// Terminating, as it does while its Flux objects are finalized), then gone.
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "team-a"}, ns); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	reconcile("team-a")
	if !exists("team-a") {
		t.Error("the shard went while its tenant's namespace was Terminating")
	}
	ns.Labels = nil
	ns.ResourceVersion = ""
	if err := c.Get(ctx, client.ObjectKey{Name: "team-a"}, ns); err != nil {
		t.Fatal(err)
	}
	delete(ns.Labels, names.ShardLabel)
	if err := c.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	reconcile("team-a")
	if exists("team-a") {
		t.Error("the shard stayed once no namespace had it")
	}
}

// The chart names a shard's Kustomization as this package does.
func TestTheChartNamesTheShardsKustomizationAlike(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.Checkout(t), "charts/workload-clusters/templates/shards.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `name: {{ printf "flux-shard-%s" $shard | quote }}`) || tenantshards.KustomizationOf("x") != "flux-shard-x" {
		t.Error("the shards' Kustomizations are named otherwise")
	}
}
