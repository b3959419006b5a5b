package cleanup

import (
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/placement"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// Before the units go, the applications go (while their controller runs), and nothing brings
// them back from git.
func TestApplicationsAreRemovedBeforeTheUnits(t *testing.T) {
	c := testenv.Start(t, "management")
	ctx := t.Context()
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.Namespace}}); err != nil {
		t.Fatal(err)
	}
	fromGit := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: names.ApplicationsKustomization},
		Spec: kustomizev1.KustomizationSpec{Path: "./clusters/management/apps", Interval: metav1.Duration{Duration: 60e9}, Prune: true,
			SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: names.SourceRepository}}}
	if err := c.Client.Create(ctx, fromGit); err != nil {
		t.Fatal(err)
	}
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.cluster-init.dev/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"namespace": names.Namespace, "name": "hello"},
		"spec": map[string]any{"sourceRef": map[string]any{"kind": "GitRepository", "name": "cluster-init"}, "path": "./apps/hello",
			"placement": map[string]any{"clusters": []any{"wl1"}}},
	}}
	if err := c.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	var logged []string
	if err := deleteApplications(ctx, c, func(f string, a ...any) { logged = append(logged, f) }); err != nil {
		t.Fatal(err)
	}
	if left, err := placement.List(ctx, c.Client); err != nil || len(left) != 0 {
		t.Errorf("applications left: %v %v", left, err)
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(fromGit), fromGit); err != nil || !fromGit.Spec.Suspend {
		t.Errorf("the Kustomization of the applications in git is not suspended: %v", err)
	}
	if len(logged) != 1 {
		t.Errorf("logged %v", logged)
	}
}
