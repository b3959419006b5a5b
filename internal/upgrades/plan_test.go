package upgrades_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/upgrades"
)

// The plan reads each cluster's running versions and the one asked for (the checkout's for the
// management cluster, the committed HelmRelease's or the platform's default for a workload
// cluster), and applies the rules; components compare images.
func TestThePlanSaysWhatEachClusterAndComponentWouldDo(t *testing.T) {
	c := testenv.Start(t, "management")
	ctx := t.Context()
	create := func(o *unstructured.Unstructured) {
		t.Helper()
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	for _, ns := range []string{"cluster-init", "team-a"} {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	cluster := func(ns, name, controlPlane, workers string) {
		create(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec":     map[string]any{"controlPlaneRef": map[string]any{"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": name + "-control-plane"}},
		}})
		objs := versioned(name, controlPlane)
		objs[0].SetName(name + "-control-plane")
		objs[1].SetName(name + "-workers")
		objs[1].SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": name})
		_ = unstructured.SetNestedField(objs[1].Object, workers, "spec", "template", "spec", "version")
		for _, o := range objs {
			o.SetNamespace(ns)
			create(o)
		}
	}
	release := func(ns, name, version string) {
		values := map[string]any{"cluster": map[string]any{"name": name}}
		if version != "" {
			values["cluster"].(map[string]any)["kubernetes_version"] = version
		}
		create(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec": map[string]any{"interval": "10m", "chart": map[string]any{"spec": map[string]any{"chart": "./charts/cluster-init",
				"sourceRef": map[string]any{"kind": "GitRepository", "name": "cluster-init"}}}, "values": values},
		}})
	}
	cluster("cluster-init", "management", "v1.36.3", "v1.36.3")
	cluster("team-a", "up", "v1.37.0", "v1.37.0")
	release("team-a", "up", "v1.37.0")
	cluster("team-a", "down", "v1.37.0", "v1.37.0")
	release("team-a", "down", "v1.36.3")
	cluster("team-a", "skip", "v1.36.3", "v1.36.3")
	release("team-a", "skip", "v1.38.0")
	cluster("team-a", "behind", "v1.37.0", "v1.36.3")
	release("team-a", "behind", "")
	if err := c.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workload-cluster-platform"},
		Data: map[string]string{"values.yaml": "cluster:\n  kubernetes_version: v1.37.0\n"}}); err != nil {
		t.Fatal(err)
	}

	got, err := upgrades.Clusters(ctx, c.Client, upgrades.ManagementCluster{Namespace: "cluster-init", Name: "management", Asked: "v1.37.0"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ asked, action, by string }{
		"cluster-init/management": {"v1.37.0", upgrades.Upgrade, "the checkout's values"},
		"team-a/up":               {"v1.37.0", upgrades.UpToDate, "HelmRelease team-a/up"},
		"team-a/down":             {"v1.36.3", upgrades.Refused, "HelmRelease team-a/down"},
		"team-a/skip":             {"v1.38.0", upgrades.Refused, "HelmRelease team-a/skip"},
		"team-a/behind":           {"v1.37.0", upgrades.Rolling, "the platform's default (the management cluster's version)"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d clusters, want %d: %+v", len(got), len(want), got)
	}
	for _, cl := range got {
		w := want[cl.Namespace+"/"+cl.Name]
		if cl.Asked != w.asked || cl.Action != w.action || cl.AskedBy != w.by {
			t.Errorf("%s/%s: asked %s by %q, %s (%s); want %s by %q, %s", cl.Namespace, cl.Name, cl.Asked, cl.AskedBy, cl.Action, cl.Reason, w.asked, w.by, w.action)
		}
		if cl.Action == upgrades.Refused && cl.Reason != upgrades.Step(cl.ControlPlane, cl.Asked).Error() {
			t.Errorf("%s/%s: refused with %q, want the rule's words", cl.Namespace, cl.Name, cl.Reason)
		}
	}

	deploy := func(name, image string) {
		t.Helper()
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: name},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: image}}},
				},
			},
		}
		if err := c.Client.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	deploy("capi-controller-manager", "registry.example/cluster-api-controller:v1.13.2")
	deploy("capi-kubeadm-control-plane-controller-manager", "registry.example:5000/kubeadm-control-plane-controller:v1.14.0")
	deploy("old-provider", "registry.example/old-provider-controller:v0.4.0")
	deploy("gone-provider", "registry.example/gone-provider-controller:v1.0.0")
	// Units whose Kustomizations (named otherwise than the units) applied CustomResourceDefinitions:
	// one the checkout no longer has, one it moves to another unit, one it keeps.
	applied := func(kustomization string, ids ...string) {
		t.Helper()
		ks := &kustomizev1.Kustomization{
			ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: kustomization},
			Spec: kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: "./kustomize-components/x", Prune: true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "cluster-init"}},
		}
		if err := c.Client.Create(ctx, ks); err != nil {
			t.Fatal(err)
		}
		ks.Status.Inventory = &kustomizev1.ResourceInventory{}
		for _, id := range ids {
			ks.Status.Inventory.Entries = append(ks.Status.Inventory.Entries, kustomizev1.ResourceRef{ID: id, Version: "v1"})
		}
		if err := c.Client.Status().Update(ctx, ks); err != nil {
			t.Fatal(err)
		}
	}
	applied("unit-gone", "cluster-init_gone-provider_apps_Deployment", "_gadgets.gone.example_apiextensions.k8s.io_CustomResourceDefinition")
	applied("unit-mover", "_sprockets.mover.example_apiextensions.k8s.io_CustomResourceDefinition")
	applied("unit-capi", "_clusters.cluster.x-k8s.io_apiextensions.k8s.io_CustomResourceDefinition")
	// A provider whose objects were stored in v1alpha1 before v1beta1 became the storage version.
	crd := storedTwice(t, c.Client)
	checkout := upgrades.Checkout{
		Deployments: []upgrades.WantedDeployment{
			{Unit: "capi", Namespace: "cluster-init", Name: "capi-controller-manager", Images: []string{"registry.example/cluster-api-controller:v1.14.0"}},
			{Unit: "capd", Namespace: "cluster-init", Name: "capd-controller-manager", Images: []string{"registry.example/capd-manager:v1.14.0"}},
			{Unit: "cabpk", Namespace: "cluster-init", Name: "capi-kubeadm-control-plane-controller-manager", Images: []string{"registry.example:5000/kubeadm-control-plane-controller:v1.13.4"}},
			{Unit: "old", Namespace: "cluster-init", Name: "old-provider", Images: []string{"registry.example/old-provider-controller:v0.5.0"}},
			{Unit: "gone", Namespace: "cluster-init", Name: "gone-provider", Images: []string{"registry.example/gone-provider-controller:v1.1.0"}},
		},
		Units: map[string]client.ObjectKey{
			"gone": {Namespace: "cluster-init", Name: "unit-gone"}, "mover": {Namespace: "cluster-init", Name: "unit-mover"},
			"capi": {Namespace: "cluster-init", Name: "unit-capi"}, "capd": {Namespace: "cluster-init", Name: "unit-capd"},
		},
		CRDs: []upgrades.WantedCRD{
			{Unit: "capi", Name: "clusters.cluster.x-k8s.io", Versions: []string{"v1beta1", "v1beta2"}},
			{Unit: "old", Name: crd, Versions: []string{"v1beta1"}},
			{Unit: "capi", Name: "sprockets.mover.example", Versions: []string{"v1"}},
		},
	}
	comps, err := upgrades.Components(ctx, c.Client, checkout)
	if err != nil {
		t.Fatal(err)
	}
	wantComps := map[string]struct{ action, reason string }{
		// A unit none of whose controllers changes is refused on a row of its own.
		"mover":                   {upgrades.Refused, "the checkout moves CustomResourceDefinition sprockets.mover.example to unit capi"},
		"capd-controller-manager": {upgrades.NotInstalled, ""},
		"capi-controller-manager": {upgrades.Upgrade, ""},
		"capi-kubeadm-control-plane-controller-manager": {upgrades.Refused,
			"a downgrade is not supported: kubeadm-control-plane-controller runs v1.14.0, the checkout asks for v1.13.4"},
		"old-provider":  {upgrades.Refused, "CustomResourceDefinition " + crd + " still stores objects in v1alpha1, which the checkout's definition drops"},
		"gone-provider": {upgrades.Refused, "the checkout no longer has CustomResourceDefinition gadgets.gone.example, which Flux would delete"},
	}
	if len(comps) != len(wantComps) {
		t.Fatalf("%d components, want %d: %+v", len(comps), len(wantComps), comps)
	}
	for _, comp := range comps {
		key := strings.TrimPrefix(comp.Deployment, "cluster-init/")
		if comp.Deployment == "" {
			key = comp.Unit
		}
		w := wantComps[key]
		if comp.Action != w.action || !strings.HasPrefix(comp.Reason, w.reason) || (w.reason == "") != (comp.Reason == "") {
			t.Errorf("component %s: %s (%s), want %s (%s…)", comp.Deployment, comp.Action, comp.Reason, w.action, w.reason)
		}
	}
	for _, comp := range comps {
		if comp.Unit == "capi" && comp.Running != "registry.example/cluster-api-controller:v1.13.2" {
			t.Errorf("component %s runs %q", comp.Deployment, comp.Running)
		}
	}

	// Once the stored objects are migrated (storedVersions trimmed), the same step is allowed.
	trimStoredVersions(t, c.Client, crd, "v1beta1")
	comps, err = upgrades.Components(ctx, c.Client, checkout)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(comps, func(c upgrades.Component) bool { return c.Deployment == "cluster-init/old-provider" })
	if i < 0 || comps[i].Action != upgrades.Upgrade {
		t.Errorf("old-provider after the migration: %+v, want %s", comps, upgrades.Upgrade)
	}
}

// storedTwice creates a CustomResourceDefinition whose objects were stored in v1alpha1, then
// makes v1beta1 its storage version: the API server then lists both in status.storedVersions.
func storedTwice(t *testing.T, c client.Client) string {
	t.Helper()
	ctx := t.Context()
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.old.example"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "old.example", Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true, Schema: schema}},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	widget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "old.example/v1alpha1", "kind": "Widget",
		"metadata": map[string]any{"namespace": "cluster-init", "name": "w"}}}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Create(ctx, widget) == nil, nil
	}); err != nil {
		t.Fatalf("create a Widget: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions[0].Storage = false
	crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1beta1", Served: true, Storage: true, Schema: schema})
	if err := c.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1alpha1", "v1beta1"}) {
		t.Fatalf("storedVersions %v, want v1alpha1 and v1beta1", crd.Status.StoredVersions)
	}
	return crd.Name
}

// trimStoredVersions does what a CRD migrator does once every object is rewritten.
func trimStoredVersions(t *testing.T, c client.Client, name string, versions ...string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	crd.Status.StoredVersions = versions
	if err := c.Status().Update(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
}
