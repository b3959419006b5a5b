package progress_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// A tenant whose last commit the platform's gate refused, and whose shard's controller restarted
// out of memory: status says both under the tenant, and of no other tenant.
func TestStatusSaysWhyATenantsDirectoryIsNotApplied(t *testing.T) {
	c := testenv.Start(t, "management")
	ctx := t.Context()
	var objs []*unstructured.Unstructured
	for _, text := range []string{
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a, labels: {" + names.TenantLabel + ": \"true\"}}\n",
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b, labels: {" + names.TenantLabel + ": \"true\"}}\n",
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: flux-system}\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: workload-clusters, namespace: team-a, labels: {" + names.ShardLabel + ": team-a}}\n" +
			"spec: {interval: 10m, path: ./x, prune: true, sourceRef: {kind: ExternalArtifact, name: workload-clusters}}\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: workload-clusters, namespace: team-b, labels: {" + names.ShardLabel + ": team-b}}\n" +
			"spec: {interval: 10m, path: ./x, prune: true, sourceRef: {kind: ExternalArtifact, name: workload-clusters}}\n",
		"apiVersion: source.toolkit.fluxcd.io/v1\nkind: ExternalArtifact\nmetadata: {name: workload-clusters, namespace: team-a}\nspec: {}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: kustomize-controller-team-a-x, namespace: flux-system, labels: {app: kustomize-controller-shard, " + names.ShardLabel + ": team-a}}\n" +
			"spec: {containers: [{name: manager, image: x}]}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: helm-controller-team-a-x, namespace: flux-system, labels: {app: helm-controller-shard, " + names.ShardLabel + ": team-a}}\n" +
			"spec: {containers: [{name: manager, image: x}]}\n",
	} {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(text), &o.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	if _, err := apply.New(c).Apply(ctx, objs); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct{ kind, ns, name, status string }{
		{"ExternalArtifact", "team-a", "workload-clusters", `{"conditions":[{"type":"Ready","status":"False","reason":"ArtifactRefused","message":"revision main@sha1:abc refused: x/bomb.yaml: its YAML aliases expand to more than 100000 values","lastTransitionTime":"2026-11-27T00:00:00Z"}]}`},
		{"Pod", "flux-system", "helm-controller-team-a-x", `{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/2 nodes are available: 2 Insufficient memory."}]}`},
		{"Pod", "flux-system", "kustomize-controller-team-a-x", `{"containerStatuses":[{"name":"manager","image":"x","imageID":"","ready":false,"restartCount":3,"lastState":{"terminated":{"exitCode":137,"reason":"OOMKilled","finishedAt":"2026-11-27T00:00:00Z"}},"state":{"waiting":{"reason":"CrashLoopBackOff"}}}]}`},
	} {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(map[string]string{"ExternalArtifact": "source.toolkit.fluxcd.io/v1", "Pod": "v1"}[st.kind])
		o.SetKind(st.kind)
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: st.ns, Name: st.name}, o); err != nil {
			t.Fatal(err)
		}
		var status map[string]any
		if err := yaml.Unmarshal([]byte(st.status), &status); err != nil {
			t.Fatal(err)
		}
		o.Object["status"] = status
		if err := c.Client.Status().Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tenants, err := progress.ObserveWorkloadClusters(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	progress.WriteWorkloadClusters(&out, tenants)
	text := out.String()
	a, b, _ := strings.Cut(text, "tenant team-b")
	for _, want := range []string{"its directory is not applied: revision main@sha1:abc refused: x/bomb.yaml", "its shard team-a: kustomize-controller restarted 3 times, last OOMKilled", "its shard team-a: helm-controller not scheduled: 0/2 nodes are available: 2 Insufficient memory."} {
		if !strings.Contains(a, want) {
			t.Errorf("team-a's status does not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(b, "not applied") || strings.Contains(b, "restarted") {
		t.Errorf("team-b's status says another tenant's trouble:\n%s", text)
	}
}
