package upgrades_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "capi-controller-manager"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "capi"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "capi"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "registry.example/cluster-api-controller:v1.13.2"}}},
			},
		},
	}
	if err := c.Client.Create(ctx, deployment); err != nil {
		t.Fatal(err)
	}
	comps, err := upgrades.Components(ctx, c.Client, []upgrades.WantedDeployment{
		{Unit: "capi", Namespace: "cluster-init", Name: "capi-controller-manager", Images: []string{"registry.example/cluster-api-controller:v1.14.0"}},
		{Unit: "capd", Namespace: "cluster-init", Name: "capd-controller-manager", Images: []string{"registry.example/capd-manager:v1.14.0"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(comps) != 2 || comps[0].Unit != "capd" || comps[0].Action != upgrades.NotInstalled ||
		comps[1].Action != upgrades.Upgrade || comps[1].Running != "registry.example/cluster-api-controller:v1.13.2" {
		t.Errorf("components: %+v", comps)
	}
}
