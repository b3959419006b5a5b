package fluxobjects_test

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/fluxobjects"
	"cluster-init.dev/cluster-init/internal/testenv"
)

func kustomization(ns, name string) *kustomizev1.Kustomization {
	return &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Minute}, Path: "./x", Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "src"}}}
}

func release(ns, name string) *helmv2.HelmRelease {
	return &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: helmv2.HelmReleaseSpec{Interval: metav1.Duration{Duration: time.Minute},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: "HelmChart", Name: "chart"}}}
}

// SuspendAll suspends the namespace's Kustomizations and HelmReleases and nothing of another
// namespace; Suspend of a source works, and of an object that is gone is no error.
func TestSuspendAllSuspendsTheNamespaceOnly(t *testing.T) {
	c := testenv.Start(t, "management").Client
	ctx := t.Context()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}},
		kustomization("team-a", "one"), kustomization("team-a", "two"), release("team-a", "r"),
		kustomization("team-b", "one"), release("team-b", "r"),
		&sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "src"},
			Spec: sourcev1.GitRepositorySpec{URL: "https://git.example/x", Interval: metav1.Duration{Duration: time.Minute}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	suspended, err := fluxobjects.SuspendAll(ctx, c, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(suspended.Kustomizations) != 2 || len(suspended.HelmReleases) != 1 {
		t.Fatalf("suspended %d Kustomizations and %d releases, want 2 and 1", len(suspended.Kustomizations), len(suspended.HelmReleases))
	}
	if err := fluxobjects.Suspend(ctx, c, &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "src"}}); err != nil {
		t.Fatal(err)
	}
	if err := fluxobjects.Suspend(ctx, c, kustomization("team-b", "gone")); err != nil {
		t.Fatalf("suspending an object that is gone: %v", err)
	}
	all, err := fluxobjects.List(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range all.Kustomizations {
		if want := o.Namespace == "team-a"; o.Spec.Suspend != want {
			t.Errorf("Kustomization %s/%s suspended %v, want %v", o.Namespace, o.Name, o.Spec.Suspend, want)
		}
	}
	for _, o := range all.HelmReleases {
		if want := o.Namespace == "team-a"; o.Spec.Suspend != want {
			t.Errorf("HelmRelease %s/%s suspended %v, want %v", o.Namespace, o.Name, o.Spec.Suspend, want)
		}
	}
	src := &sourcev1.GitRepository{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "src"}, src); err != nil || !src.Spec.Suspend {
		t.Errorf("GitRepository suspended %v (%v), want true", src.Spec.Suspend, err)
	}
	for _, o := range all.All() {
		if o.GetObjectKind().GroupVersionKind().Kind == "" {
			t.Errorf("%s/%s listed without its kind", o.GetNamespace(), o.GetName())
		}
	}
}

// The request is the annotation `flux reconcile` writes, with the value returned.
func TestRequestReconcileWritesFluxsAnnotation(t *testing.T) {
	c := testenv.Start(t, "management").Client
	ctx := t.Context()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, release("team-a", "r")); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 27, 23, 0, 0, 5, time.UTC)
	value, err := fluxobjects.RequestReconcile(ctx, c, &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "r"}}, at)
	if err != nil {
		t.Fatal(err)
	}
	hr := &helmv2.HelmRelease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "r"}, hr); err != nil {
		t.Fatal(err)
	}
	if got := hr.Annotations[meta.ReconcileRequestAnnotation]; got != value || value != "2026-11-27T23:00:00.000000005Z" {
		t.Errorf("annotation %q, returned %q", got, value)
	}
}
