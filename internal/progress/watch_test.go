package progress_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/termtext/termtexttest"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// The progress view reads, from a real API server, the graph and the Kustomizations the chart
// renders, and the Cluster API objects of the cluster.
func TestObserveReadsTheUnitsTheChartRenders(t *testing.T) {
	res, c := bootstrapRelease(t)
	ctx := t.Context()

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
	// The cluster's lines show under the unit of the two that wait for it (the definitions, the
	// gate that waits for every machine) that works on it now, and under no other.
	details := func(name string) string {
		obs, err := src.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := progress.NewTracker(time.Now()).Update(obs, time.Now()).Unit(name)
		return strings.Join(u.Details, "\n")
	}
	const clusterLine = "Cluster management: Provisioning; ControlPlaneInitialized=False (NotInitialized: Control plane not yet initialized)"
	setReady("cluster", metav1.ConditionUnknown, "Progressing", "Reconciliation in progress")
	setReady("cluster-ready", metav1.ConditionFalse, "DependencyNotReady", "dependency 'cluster-init/cni' is not ready")
	if d := details("cluster"); !strings.Contains(d, clusterLine) {
		t.Errorf("cluster reconciling, its details: %q", d)
	}
	if d := details("cluster-ready"); d != "" {
		t.Errorf("cluster-ready pending, its details: %q", d)
	}
	setReady("cluster", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	setReady("cluster-ready", metav1.ConditionUnknown, "Progressing", "Reconciliation in progress")
	if d := details("cluster-ready"); !strings.Contains(d, clusterLine) {
		t.Errorf("cluster-ready reconciling, its details: %q", d)
	}
	if d := details("cluster"); d != "" {
		t.Errorf("cluster ready, its details: %q", d)
	}
	if !strings.Contains(obs.Release, "release cluster-init: not created yet") {
		t.Errorf("release: %q", obs.Release)
	}
	var cm corev1.ConfigMap
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "cluster-init", Name: "cluster-init-units"}, &cm); err != nil {
		t.Fatal(err)
	}
}

// status says which commit each unit runs: the revision its Kustomization last applied and,
// when its source has fetched another since, that it is behind it.
func TestStatusShowsTheCommitEachUnitRuns(t *testing.T) {
	_, c := bootstrapRelease(t)
	ctx := t.Context()
	const applied, fetched = "latest@sha256:0123456789abcdef", "latest@sha256:fedcba9876543210"
	var source kustomizev1.CrossNamespaceSourceReference
	for _, name := range []string{"cert-manager", "capi"} {
		ks := &kustomizev1.Kustomization{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "cluster-init", Name: name}, ks); err != nil {
			t.Fatal(err)
		}
		source = ks.Spec.SourceRef
		ks.Status.LastAppliedRevision = applied
		ks.Status.ObservedGeneration = ks.Generation
		ks.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded", Message: "Applied revision", LastTransitionTime: metav1.Now()}}
		if err := c.Client.Status().Update(ctx, ks); err != nil {
			t.Fatal(err)
		}
	}
	src := &unstructured.Unstructured{}
	src.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	src.SetKind(source.Kind)
	src.SetNamespace(cmpOr(source.Namespace, "cluster-init"))
	src.SetName(source.Name)
	status := func(revision string) {
		t.Helper()
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
			if err := c.Client.Create(ctx, withSpec(src, source.Kind)); err != nil {
				t.Fatal(err)
			}
		}
		if err := unstructured.SetNestedMap(src.Object, map[string]any{"revision": revision, "path": "p", "url": "http://x/p", "digest": "sha256:00", "lastUpdateTime": "2026-11-26T00:00:00Z"}, "status", "artifact"); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.Status().Update(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	look := func() string { t.Helper(); return statusOf(t, c) }

	status(applied)
	out := look()
	if !regexpMatch(`(?m)^  ✓ cert-manager +ready +\S* +latest@0123456$`, out) || !regexpMatch(`(?m)cabpk +reconciling +none applied yet, latest@0123456 fetched`, out) {
		t.Errorf("the commit applied, as fetched:\n%s", out)
	}
	status(fetched)
	if out := look(); !strings.Contains(out, "latest@0123456, behind latest@fedcba9") {
		t.Errorf("a newer commit fetched:\n%s", out)
	}
}

// statusOf is what `bootstrap status` shows of the cluster's units in a single look.
func statusOf(t *testing.T, c *kube.Cluster) string {
	t.Helper()
	obs, err := progress.Source{Cluster: c, Revisions: true}.Observe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	progress.WriteStatus(&b, "test", progress.NewTracker(time.Now()).Update(obs, time.Now()))
	return b.String()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// withSpec gives a source the spec its CRD requires.
func withSpec(src *unstructured.Unstructured, kind string) *unstructured.Unstructured {
	url := "http://git.invalid/repo.git"
	if kind == "OCIRepository" {
		url = "oci://registry.invalid/repo"
	}
	_ = unstructured.SetNestedMap(src.Object, map[string]any{"url": url, "interval": "1m"}, "spec")
	return src
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// bootstrapRelease starts a cluster holding what the cluster-init release renders for
// kubeadm-capd in the bootstrap context (its namespace, the units' Kustomizations, the graph);
// no controller runs.
func bootstrapRelease(t *testing.T) (*render.Result, *kube.Cluster) {
	t.Helper()
	root := testenv.Checkout(t)
	env := testenv.Environment(t, root, "kubeadm-capd")
	res, err := render.Render(t.Context(), root, "", render.Options{Env: env, Context: render.ContextBootstrap})
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.Start(t, "bootstrap")
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "cluster-init"}}}
	objs := []*unstructured.Unstructured{ns}
	for _, o := range res.Objects {
		if o.Unit == "" && o.Origin == render.UmbrellaChart {
			objs = append(objs, o.Object)
		}
	}
	if _, err := apply.New(c).Apply(t.Context(), objs); err != nil {
		t.Fatal(err)
	}
	return res, c
}

// A release that refuses its values (a commit's, which its chart's version names) keeps its units
// as it rendered them: status says so above them, in one line, with Helm's reason, until it heals.
func TestStatusNamesTheReleaseThatRefusesACommit(t *testing.T) {
	_, c := bootstrapRelease(t)
	ctx := t.Context()
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "cluster-init"}}
	hr.Spec.Interval = metav1.Duration{Duration: time.Minute}
	hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "./charts/cluster-init",
		SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "cluster-init"}}}
	if err := c.Client.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	setStatus := func(ready metav1.ConditionStatus, reason, message string) {
		t.Helper()
		hr.Status.ObservedGeneration = hr.Generation
		hr.Status.LastAttemptedRevision = "0.1.0+4f2a9c1e7b3d"
		hr.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: ready, Reason: reason, Message: message, ObservedGeneration: hr.Generation, LastTransitionTime: metav1.Now()}}
		if err := c.Client.Status().Update(ctx, hr); err != nil {
			t.Fatal(err)
		}
	}
	look := func() string { t.Helper(); return statusOf(t, c) }
	// helm-controller's message, as the e2e saw it (Helm v4 names the value by JSON pointer).
	setStatus(metav1.ConditionFalse, "UpgradeFailed", "Helm upgrade failed for release cluster-init/cluster-init with chart cluster-init@0.1.0+4f2a9c1e7b3d: values don't meet the specifications of the schema(s) in the following chart(s):\ncluster-init:\n- at '/cluster/workers/replicas': minimum: got -1, want 0\n- at '/registry_mirrors/hosts_config/quay.io/0': expected object\n")
	out := look()
	want := "  release cluster-init: UpgradeFailed: Helm upgrade failed for release cluster-init/cluster-init with chart cluster-init@0.1.0+4f2a9c1e7b3d: values don't meet the specifications of the schema(s) in the following chart(s): cluster-init: - at cluster.workers.replicas: minimum: got -1, want 0 - at registry_mirrors.hosts_config[\"quay.io\"][0]: expected object (chart 0.1.0+4f2a9c1e7b3d)\n"
	if lines := strings.SplitN(out, "\n", 3); len(lines) < 2 || lines[1]+"\n" != want {
		t.Errorf("the refusal is not the line above the units:\n%s", out)
	}
	setStatus(metav1.ConditionTrue, "UpgradeSucceeded", "Helm upgrade succeeded")
	if out := look(); strings.Contains(out, "release cluster-init") {
		t.Errorf("a healed release is still shown:\n%s", out)
	}
}

// What a tenant writes into a unit's condition and the release's, read from the API server as
// status and status --watch read it, reaches the screen escaped.
func TestStatusAndWatchEscapeWhatTheClusterHolds(t *testing.T) {
	_, c := bootstrapRelease(t)
	ctx := t.Context()
	hostile := termtexttest.Hostile()
	ks := &kustomizev1.Kustomization{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "cluster-init", Name: "cert-manager"}, ks); err != nil {
		t.Fatal(err)
	}
	ks.Status.ObservedGeneration = ks.Generation
	ks.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ReconciliationFailed", Message: hostile, LastTransitionTime: metav1.Now()}}
	if err := c.Client.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "cluster-init"}}
	hr.Spec.Interval = metav1.Duration{Duration: time.Minute}
	hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "./charts/cluster-init",
		SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "cluster-init"}}}
	if err := c.Client.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	hr.Status.ObservedGeneration = hr.Generation
	hr.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "UpgradeFailed", Message: hostile, ObservedGeneration: hr.Generation, LastTransitionTime: metav1.Now()}}
	if err := c.Client.Status().Update(ctx, hr); err != nil {
		t.Fatal(err)
	}

	termtexttest.Check(t, "status", statusOf(t, c))
	obs, err := progress.Source{Cluster: c, Revisions: true}.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snap := progress.NewTracker(time.Now()).Update(obs, time.Now())
	if u, _ := snap.Unit("cert-manager"); u.Message != hostile {
		t.Fatalf("the API server did not keep the message as written: %q", u.Message)
	}
	for _, f := range []progress.Format{progress.Plain, progress.TTY} {
		var out strings.Builder
		p, err := progress.New(&out, f, func() (int, int) { return 2000, 100 }, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		p.Units(snap)
		p.Close()
		termtexttest.Check(t, "status --watch -o "+string(f), out.String())
	}
}
