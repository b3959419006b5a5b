package progress_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// A tenant with several workload clusters: each is found with its own units (its release's graph
// and Kustomizations, read with one list of the namespace) and its own Cluster, in name order;
// a HelmRelease the tenant's directory did not apply (a cluster's definitions) is none.
func TestStatusFindsEachWorkloadClusterWithItsUnits(t *testing.T) {
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	c := testenv.Start(t, "management")
	ctx := t.Context()
	const tenant = "team-a"
	ns := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: {%s: \"true\"}}\n", tenant, names.TenantLabel)), &ns.Object); err != nil {
		t.Fatal(err)
	}
	objs := []*unstructured.Unstructured{ns}
	clusters := []string{"s2", "s1", "s3"}
	for _, name := range clusters {
		res, err := render.Render(ctx, root, "", render.Options{Env: env, Context: render.ContextWorkload, Release: name, Namespace: tenant})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			if o.Unit == "" && o.Origin == render.UmbrellaChart && (o.Object.GetKind() == "Kustomization" || o.Object.GetName() == names.UnitsConfigMapOf(name)) {
				objs = append(objs, o.Object)
			}
		}
		hr := &unstructured.Unstructured{}
		text := fmt.Sprintf("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: %s, namespace: %s, labels: {kustomize.toolkit.fluxcd.io/name: %s}}\n"+
			"spec: {interval: 10m, chart: {spec: {chart: ./charts/cluster-init, sourceRef: {kind: GitRepository, name: cluster-init, namespace: cluster-init}}}}\n", name, tenant, names.TenantKustomization)
		if err := yaml.Unmarshal([]byte(text), &hr.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, hr)
	}
	// A release of a cluster's definitions, which the tenant's directory does not apply.
	definitions := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: s1-cluster, namespace: "+tenant+"}\n"+
		"spec: {interval: 10m, chart: {spec: {chart: ./charts/capi-cluster, sourceRef: {kind: GitRepository, name: cluster-init, namespace: cluster-init}}}}\n"), &definitions.Object); err != nil {
		t.Fatal(err)
	}
	objs = append(objs, definitions)
	cluster := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte("apiVersion: cluster.x-k8s.io/v1beta2\nkind: Cluster\nmetadata: {name: s3, namespace: "+tenant+"}\nspec: {paused: true}\n"), &cluster.Object); err != nil {
		t.Fatal(err)
	}
	objs = append(objs, cluster)
	if _, err := apply.New(c).Apply(ctx, objs); err != nil {
		t.Fatal(err)
	}

	tenants, err := progress.ObserveWorkloadClusters(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	if len(tenants) != 1 || tenants[0].Namespace != tenant || len(tenants[0].Clusters) != 3 {
		t.Fatalf("tenants: %+v", tenants)
	}
	for i, want := range []string{"s1", "s2", "s3"} {
		wc := tenants[0].Clusters[i]
		if wc.Name != want || wc.Units.Graph == nil {
			t.Errorf("cluster %d: %s with graph %v, want %s with its release's", i, wc.Name, wc.Units.Graph != nil, want)
			continue
		}
		u, ok := wc.Units.Graph.Units["cluster"]
		if !ok || !strings.HasPrefix(u.Object, want+"-") || wc.Units.Kustomizations["cluster"] == nil || wc.Units.Kustomizations["cluster"].Name != u.Object {
			t.Errorf("%s: its cluster unit is not its own Kustomization: %+v", want, wc.Units.Kustomizations["cluster"])
		}
		if wc.Machines.Found != (want == "s3") {
			t.Errorf("%s: Cluster found %v", want, wc.Machines.Found)
		}
	}
	var out strings.Builder
	progress.WriteWorkloadClusters(&out, tenants)
	if !strings.Contains(out.String(), "s3: Pending, 0/0 machines ready") || strings.Contains(out.String(), "s1-cluster:") {
		t.Errorf("status of the workload clusters:\n%s", out.String())
	}
}
