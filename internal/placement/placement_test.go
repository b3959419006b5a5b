package placement_test

import (
	"context"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/go-logr/logr/funcr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/placement"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/revisions"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/values"
)

type world struct {
	t   testing.TB
	ctx context.Context
	c   client.Client
	r   *placement.Reconciler
}

func (w *world) reconcile() appsv1alpha1.ApplicationStatus {
	w.t.Helper()
	if _, err := w.r.Reconcile(w.ctx, reconcile.Request{NamespacedName: hello}); err != nil {
		w.t.Fatal(err)
	}
	return w.status()
}

func (w *world) status() appsv1alpha1.ApplicationStatus {
	w.t.Helper()
	app := &appsv1alpha1.Application{}
	if err := w.c.Get(w.ctx, hello, app); err != nil {
		w.t.Fatal(err)
	}
	return app.Status
}

// controllerFieldOwner is the field manager of what the placement controller applies.
const controllerFieldOwner = "cluster-init-placement"

// hello is the application of the tests.
var hello = client.ObjectKey{Namespace: "cluster-init", Name: "hello"}

// on is the name of hello's Flux object on a cluster.
func on(ns, cluster string) string {
	return placement.ObjectName(hello, client.ObjectKey{Namespace: ns, Name: cluster})
}

// cluster is a Cluster of the test, labelled env=<env>.
type cluster struct{ ns, name, env string }

// clusters creates the Clusters, and their namespaces.
func (w *world) clusters(cs []cluster) {
	w.t.Helper()
	for _, c := range cs {
		if err := w.c.Create(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}); client.IgnoreAlreadyExists(err) != nil {
			w.t.Fatal(err)
		}
		cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name, Labels: map[string]string{"env": c.env}},
			Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: c.name}}}
		if err := w.c.Create(w.ctx, cl); err != nil {
			w.t.Fatal(err)
		}
	}
}

// create creates the application hello, of the platform, with the placement p.
func (w *world) create(p map[string]any) {
	w.t.Helper()
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.cluster-init.dev/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"namespace": "cluster-init", "name": "hello"},
		"spec": map[string]any{
			"sourceRef": map[string]any{"kind": "GitRepository", "name": "cluster-init"},
			"path":      "./clusters/management/apps/hello/manifests",
			"placement": p,
		},
	}}
	if err := w.c.Create(w.ctx, app); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) app() *unstructured.Unstructured {
	w.t.Helper()
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(appsv1alpha1.GroupVersion.WithKind(appsv1alpha1.ApplicationKind))
	if err := w.c.Get(w.ctx, hello, app); err != nil {
		w.t.Fatal(err)
	}
	return app
}

func (w *world) place(p map[string]any) {
	w.t.Helper()
	app := w.app()
	if err := unstructured.SetNestedField(app.Object, p, "spec", "placement"); err != nil {
		w.t.Fatal(err)
	}
	if err := w.c.Update(w.ctx, app); err != nil {
		w.t.Fatal(err)
	}
}

// flux plays kustomize-controller for one Kustomization: Ready (or failed) for its generation.
func (w *world) flux(ns, cluster string, status metav1.ConditionStatus, reason, msg string) {
	w.t.Helper()
	k := &kustomizev1.Kustomization{}
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: ns, Name: on(ns, cluster)}, k); err != nil {
		w.t.Fatal(err)
	}
	// As kustomize-controller: the condition carries the generation it handled; the status's
	// observedGeneration moves on success only.
	if status == metav1.ConditionTrue {
		k.Status.ObservedGeneration = k.Generation
	}
	apimeta.SetStatusCondition(&k.Status.Conditions, metav1.Condition{Type: meta.ReadyCondition, Status: status, Reason: reason, Message: msg, ObservedGeneration: k.Generation})
	if err := w.c.Status().Update(w.ctx, k); err != nil {
		w.t.Fatal(err)
	}
}

// exists says whether hello's Kustomization on a cluster exists.
func (w *world) exists(ns, cluster string) bool {
	w.t.Helper()
	err := w.c.Get(w.ctx, client.ObjectKey{Namespace: ns, Name: on(ns, cluster)}, &kustomizev1.Kustomization{})
	if err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatal(err)
	}
	return err == nil
}

func ready(st appsv1alpha1.ApplicationStatus) *metav1.Condition {
	return apimeta.FindStatusCondition(st.Conditions, meta.ReadyCondition)
}

func states(st appsv1alpha1.ApplicationStatus) string {
	var out []string
	for _, p := range st.Placements {
		out = append(out, p.Cluster+"="+string(p.State))
	}
	return strings.Join(out, " ")
}

// An application placed by name, moved make-before-break, placed on two clusters with one
// failing, on a cluster that does not exist, by selector, and deleted: the Kustomizations Flux
// runs and the summed status at each step.
func TestPlacementMovesMakeBeforeBreakAndSumsTheStatus(t *testing.T) {
	kc := testenv.Start(t, "management")
	w := &world{t: t, ctx: t.Context(), c: kc.Client, r: &placement.Reconciler{Client: kc.Client, Rules: placement.Rules{
		Management: client.ObjectKey{Namespace: "cluster-init", Name: "management"}, OnManagement: true, SelectorNamespaces: []string{"workload-clusters"}}}}
	w.clusters([]cluster{{"cluster-init", "management", "platform"}, {"workload-clusters", "wl1", "dev"}})
	w.create(map[string]any{"clusters": []any{"workload-clusters/wl1"}})

	// On wl1: its Kustomization, in wl1's namespace, through wl1's kubeconfig, from the app's source.
	st := w.reconcile()
	k := &kustomizev1.Kustomization{}
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: "workload-clusters", Name: on("workload-clusters", "wl1")}, k); err != nil {
		t.Fatal(err)
	}
	if k.Spec.KubeConfig == nil || k.Spec.KubeConfig.SecretRef.Name != "wl1-kubeconfig" || k.Spec.SourceRef.Namespace != "cluster-init" || !k.Spec.Prune || !k.Spec.Wait ||
		k.Spec.PostBuild == nil || k.Spec.PostBuild.Substitute["CLUSTER_NAME"] != "wl1" {
		t.Errorf("Kustomization of wl1: %+v", k.Spec)
	}
	if c := ready(st); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "workload-clusters/wl1 progressing") {
		t.Errorf("before Flux applied it: %+v", c)
	}
	w.flux("workload-clusters", "wl1", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	if st = w.reconcile(); ready(st).Status != metav1.ConditionTrue {
		t.Errorf("running on wl1 but not Ready: %+v", ready(st))
	}
	// The commit it runs there, by the cluster its status names (its source fetched none here).
	if err := w.c.Get(w.ctx, client.ObjectKeyFromObject(k), k); err != nil {
		t.Fatal(err)
	}
	k.Status.LastAppliedRevision = "main@sha1:0123456789"
	if err := w.c.Status().Update(w.ctx, k); err != nil {
		t.Fatal(err)
	}
	app := w.app()
	typed := &appsv1alpha1.Application{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(app.Object, typed); err != nil {
		t.Fatal(err)
	}
	revs, err := placement.Revisions(w.ctx, w.c, revisions.NewReader(w.c), typed)
	if err != nil || len(revs) != 1 || revs[st.Placements[0].Cluster].String() != "main@0123456" {
		t.Errorf("revisions: %v %v (placements %+v)", revs, err, st.Placements)
	}

	// Moved to the management cluster: there first, then gone from wl1.
	w.place(map[string]any{"clusters": []any{"management"}})
	st = w.reconcile()
	if !w.exists("cluster-init", "management") || !w.exists("workload-clusters", "wl1") {
		t.Fatal("the move did not make before it broke")
	}
	if got := states(st); got != "cluster-init/management=Progressing workload-clusters/wl1=Removing" {
		t.Errorf("during the move: %s", got)
	}
	if ready(st).Status != metav1.ConditionFalse {
		t.Error("Ready while the new placement is not")
	}
	w.flux("cluster-init", "management", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	st = w.reconcile()
	if w.exists("workload-clusters", "wl1") {
		t.Error("wl1 keeps the application once the management cluster runs it")
	}
	if ready(st).Status != metav1.ConditionTrue {
		t.Errorf("the cluster leaving the placement counts in the sum: %+v", ready(st))
	}
	if st = w.reconcile(); states(st) != "cluster-init/management=Ready" {
		t.Errorf("after the move: %s", states(st))
	}

	// On both, failing on wl1 only: not Ready, and the message names wl1.
	w.place(map[string]any{"clusters": []any{"management", "workload-clusters/wl1"}})
	w.reconcile()
	w.flux("workload-clusters", "wl1", metav1.ConditionFalse, "HealthCheckFailed", "Deployment/hello/hello not ready")
	st = w.reconcile()
	if c := ready(st); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "ready on 1 of 2 clusters; not on: workload-clusters/wl1 failed (HealthCheckFailed: Deployment/hello/hello not ready)") {
		t.Errorf("failing on wl1: %+v", c)
	}
	// A new spec, which Flux has not tried yet: neither the failure on wl1 nor the success on the
	// management cluster was of it.
	app = w.app()
	if err := unstructured.SetNestedField(app.Object, "2m", "spec", "interval"); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Update(w.ctx, app); err != nil {
		t.Fatal(err)
	}
	if st = w.reconcile(); states(st) != "cluster-init/management=Progressing workload-clusters/wl1=Progressing" {
		t.Errorf("conditions of an older generation: %s %+v", states(st), ready(st))
	}
	w.flux("cluster-init", "management", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	w.flux("workload-clusters", "wl1", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	if st = w.reconcile(); ready(st).Status != metav1.ConditionTrue || ready(st).Message != "ready on 2 clusters" {
		t.Errorf("on both: %+v", ready(st))
	}

	// A cluster that does not exist: named, not waited on by the others, and wl1 (which left) is
	// removed since every cluster that exists runs it.
	w.place(map[string]any{"clusters": []any{"management", "nope"}})
	st = w.reconcile()
	if c := ready(st); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "cluster-init/nope missing (no Cluster nope in cluster-init") {
		t.Errorf("a missing cluster: %+v", c)
	}
	if !w.exists("cluster-init", "management") || w.exists("workload-clusters", "wl1") {
		t.Error("the missing cluster changed what runs elsewhere")
	}
	// Only a missing cluster: the application stays where it runs rather than nowhere.
	w.place(map[string]any{"clusters": []any{"nope"}})
	w.reconcile()
	if !w.exists("cluster-init", "management") {
		t.Error("a placement on a missing cluster only left no instance")
	}

	// By selector: the clusters labelled env=dev, that is wl1.
	w.place(map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"env": "dev"}}})
	w.reconcile()
	if !w.exists("workload-clusters", "wl1") {
		t.Error("the selector did not place it on wl1")
	}

	// A selector that matches nothing: said, not Ready.
	w.place(map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"env": "prod"}}})
	if c := ready(w.reconcile()); c.Status != metav1.ConditionFalse || c.Reason != "NoCluster" {
		t.Errorf("a placement on no cluster: %+v", c)
	}

	// A Helm chart instead of manifests: a HelmRelease on wl1, through its kubeconfig, with the
	// cluster's name in its values; the Kustomization of the manifests goes once it is Ready.
	w.place(map[string]any{"clusters": []any{"workload-clusters/wl1"}})
	w.reconcile()
	w.flux("workload-clusters", "wl1", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	app2 := w.app()
	unstructured.RemoveNestedField(app2.Object, "spec", "path")
	if err := unstructured.SetNestedField(app2.Object, map[string]any{"path": "./charts/hello", "values": map[string]any{"replicas": int64(2)}}, "spec", "chart"); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Update(w.ctx, app2); err != nil {
		t.Fatal(err)
	}
	st = w.reconcile()
	hr := &helmv2.HelmRelease{}
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: "workload-clusters", Name: on("workload-clusters", "wl1")}, hr); err != nil {
		t.Fatal(err)
	}
	if hr.Spec.KubeConfig == nil || hr.Spec.KubeConfig.SecretRef.Name != "wl1-kubeconfig" || hr.Spec.Chart.Spec.Chart != "./charts/hello" ||
		!strings.Contains(string(hr.Spec.Values.Raw), `"cluster":{"name":"wl1","namespace":"workload-clusters"}`) || !strings.Contains(string(hr.Spec.Values.Raw), `"replicas":2`) {
		t.Errorf("HelmRelease of wl1: %+v values %s", hr.Spec, hr.Spec.Values.Raw)
	}
	if !w.exists("workload-clusters", "wl1") || states(st) != "workload-clusters/wl1=Progressing workload-clusters/wl1=Removing" {
		t.Errorf("manifests -> chart did not make before it broke: %s", states(st))
	}
	// The install failed: helm-controller retries it, and the placement says it failed.
	apimeta.SetStatusCondition(&hr.Status.Conditions, metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: helmv2.InstallFailedReason, Message: "image not found", ObservedGeneration: hr.Generation})
	if err := w.c.Status().Update(w.ctx, hr); err != nil {
		t.Fatal(err)
	}
	if st = w.reconcile(); states(st) != "workload-clusters/wl1=Failed workload-clusters/wl1=Removing" || !strings.Contains(ready(st).Message, "failed (InstallFailed: image not found)") {
		t.Errorf("the chart failing on wl1: %s %+v", states(st), ready(st))
	}
	if err := w.c.Get(w.ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
		t.Fatal(err)
	}
	hr.Status.ObservedGeneration = hr.Generation
	apimeta.SetStatusCondition(&hr.Status.Conditions, metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: "InstallSucceeded", Message: "installed", ObservedGeneration: hr.Generation})
	if err := w.c.Status().Update(w.ctx, hr); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	if w.exists("workload-clusters", "wl1") {
		t.Error("the Kustomization of the manifests stays once the chart runs")
	}
	if st = w.reconcile(); ready(st).Status != metav1.ConditionTrue || states(st) != "workload-clusters/wl1=Ready" {
		t.Errorf("the chart on wl1: %s %+v", states(st), ready(st))
	}

	// Deleted: every Flux object goes, then the application.
	if err := w.c.Delete(w.ctx, w.app()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, _ = w.r.Reconcile(w.ctx, reconcile.Request{NamespacedName: hello})
	}
	if w.exists("workload-clusters", "wl1") || w.exists("cluster-init", "management") {
		t.Error("Kustomizations left after the application was deleted")
	}
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: "workload-clusters", Name: on("workload-clusters", "wl1")}, &helmv2.HelmRelease{}); !apierrors.IsNotFound(err) {
		t.Errorf("the HelmRelease is left after the application was deleted: %v", err)
	}
	if err := w.c.Get(w.ctx, hello, &appsv1alpha1.Application{}); !apierrors.IsNotFound(err) {
		t.Errorf("the application is still there: %v", err)
	}
}

// A tenant's Clusters, named and labelled as the tenant likes, neither draw the platform's
// applications (a selector sees the namespaces the values name; a name alone is the platform's)
// nor displace them (a tenant's cluster named like the management cluster changes nothing); and
// the management cluster runs them only where the values allow it.
func TestATenantsClustersNeitherDrawNorDisplaceThePlatformsApplications(t *testing.T) {
	kc := testenv.Start(t, "management")
	rules := placement.Rules{Management: client.ObjectKey{Namespace: "cluster-init", Name: "management"}, SelectorNamespaces: []string{"workload-clusters"}}
	w := &world{t: t, ctx: t.Context(), c: kc.Client, r: &placement.Reconciler{Client: kc.Client, Rules: rules}}
	// team-b labels its clusters like the platform's, and names one like the management cluster.
	w.clusters([]cluster{{"cluster-init", "management", "platform"}, {"workload-clusters", "wl1", "dev"},
		{"team-b", "b-one", "dev"}, {"team-b", "management", "platform"}})
	w.create(map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"env": "dev"}}})

	// By selector: wl1, whose namespace the values name; not team-b's b-one, labelled alike.
	st := w.reconcile()
	if got := states(st); got != "workload-clusters/wl1=Progressing" || !w.exists("workload-clusters", "wl1") || w.exists("team-b", "b-one") {
		t.Errorf("a selector drew the application onto team-b's cluster: %s", got)
	}
	// By a name alone: a cluster of the platform's namespace, never a tenant's.
	w.place(map[string]any{"clusters": []any{"b-one"}})
	if c := ready(w.reconcile()); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "no Cluster b-one in cluster-init") || w.exists("team-b", "b-one") {
		t.Errorf("b-one by its name alone: %+v", c)
	}
	// The management cluster, where the values keep applications off it: refused, by name and by
	// selector, and team-b's "management" is not taken for it.
	w.place(map[string]any{"clusters": []any{"management"}})
	if c := ready(w.reconcile()); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "applications.on_management is false") ||
		w.exists("cluster-init", "management") || w.exists("team-b", "management") {
		t.Errorf("on the management cluster, kept off by the values: %+v", c)
	}
	w.place(map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"env": "platform"}}})
	if c := ready(w.reconcile()); c.Status != metav1.ConditionFalse || c.Reason != "NoCluster" || w.exists("cluster-init", "management") || w.exists("team-b", "management") {
		t.Errorf("a selector matching the management cluster, kept off by the values: %+v", c)
	}
	// Allowed: the management cluster by its name, while team-b has a cluster of that name too.
	w.r.Rules.OnManagement = true
	w.place(map[string]any{"clusters": []any{"management"}})
	if st := w.reconcile(); states(st) != "cluster-init/management=Progressing" || !w.exists("cluster-init", "management") || w.exists("team-b", "management") {
		t.Errorf("the management cluster by its name, with team-b's namesake: %s", states(st))
	}
}

// The Applications committed under clusters/<mgmt>/apps are applied as applications-from-git:
// Applications in the platform's namespace, nothing else (its Kustomization is not cluster-admin).
func TestTheApplicationsDirectoryIsAppliedAsAnAccountThatWritesApplicationsOnly(t *testing.T) {
	root := testenv.Checkout(t)
	git := map[string]any{"type": "git", "url": "http://git.test/cluster-init.git", "ref": map[string]any{"branch": "main"}, "environment": "environment-values/kubeadm-capd"}
	res, err := render.Render(t.Context(), root, "", render.Options{Env: testenv.Environment(t, root, "kubeadm-capd"), Context: render.ContextManagement,
		Source: git, State: []values.Layer{managementstate.State{SelfManaged: true}.Layer()}})
	if err != nil {
		t.Fatal(err)
	}
	kc := testenv.Start(t, "management")
	if err := kc.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-init"}}); err != nil {
		t.Fatal(err)
	}
	var rbac []*unstructured.Unstructured
	for _, o := range res.Objects {
		if o.Unit == "applications" && (o.Object.GroupVersionKind().Group == "rbac.authorization.k8s.io" || o.Object.GetKind() == "ServiceAccount") {
			rbac = append(rbac, o.Object)
		}
	}
	if _, err := apply.New(kc).Apply(t.Context(), rbac); err != nil {
		t.Fatal(err)
	}
	const account = "system:serviceaccount:cluster-init:applications-from-git"
	for _, q := range []struct {
		verb, group, resource, ns string
		allowed                   bool
	}{
		{"create", "apps.cluster-init.dev", "applications", "cluster-init", true},
		{"delete", "apps.cluster-init.dev", "applications", "cluster-init", true},
		{"create", "apps.cluster-init.dev", "applications", "workload-clusters", false},
		{"create", "kustomize.toolkit.fluxcd.io", "kustomizations", "cluster-init", false},
		{"create", "helm.toolkit.fluxcd.io", "helmreleases", "cluster-init", false},
		{"create", "apps", "deployments", "cluster-init", false},
		{"get", "", "secrets", "cluster-init", false},
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", false},
		{"create", "", "namespaces", "", false},
	} {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: account,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:cluster-init"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: q.verb, Group: q.group, Resource: q.resource, Namespace: q.ns}}}
		if err := kc.Client.Create(t.Context(), review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != q.allowed {
			t.Errorf("can applications-from-git %s %s.%s in %q: %t, want %t", q.verb, q.resource, q.group, q.ns, review.Status.Allowed, q.allowed)
		}
	}
}

// The names of the Flux objects cannot collide: "a-b" on cluster "c" and "a" on cluster "b-c"
// (the same "<app>-<cluster>"), long names, any namespaces: distinct, valid names that fit a label
// value (Flux labels what it applies with them).
func TestObjectNamesDoNotCollide(t *testing.T) {
	key := func(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
	long := strings.Repeat("x", 40)
	pairs := []struct{ app, cluster client.ObjectKey }{
		{key("cluster-init", "a-b"), key("workload-clusters", "c")},
		{key("cluster-init", "a"), key("workload-clusters", "b-c")},
		{key("team-b", "a-b"), key("workload-clusters", "c")},
		{key("cluster-init", "a-b"), key("team-b", "c")},
		{key("cluster-init", long), key("workload-clusters", strings.Repeat("y", 63))},
		{key("cluster-init", long), key("workload-clusters", strings.Repeat("y", 62))},
	}
	seen := map[string]int{}
	for i, p := range pairs {
		name := placement.ObjectName(p.app, p.cluster)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("%v on %v: %q is not a valid name: %v", p.app, p.cluster, name, errs)
		}
		if j, ok := seen[name]; ok {
			t.Errorf("%v on %v and %v on %v share the name %q", p.app, p.cluster, pairs[j].app, pairs[j].cluster, name)
		}
		seen[name] = i
	}
	if got := placement.ObjectName(key("cluster-init", "hello"), key("workload-clusters", "wl1")); !strings.HasPrefix(got, "hello-wl1-") {
		t.Errorf("the name says what it is: %q", got)
	}
}

// An object of the name an application would use, placed by another application or by no
// application, is not taken over: the placement on that cluster fails and says whose it is, the
// object is unchanged, and the other clusters are placed as usual.
func TestAnApplicationDoesNotTakeOverAnotherOnesObjects(t *testing.T) {
	kc := testenv.Start(t, "management")
	w := &world{t: t, ctx: t.Context(), c: kc.Client, r: &placement.Reconciler{Client: kc.Client, Rules: placement.Rules{
		Management: client.ObjectKey{Namespace: "cluster-init", Name: "management"}, OnManagement: true, SelectorNamespaces: []string{"workload-clusters"}}}}
	w.clusters([]cluster{{"cluster-init", "management", "platform"}, {"workload-clusters", "wl1", "dev"}, {"workload-clusters", "wl2", "dev"}})
	// Another application's object is applied as this controller applies; one no application placed
	// is created by someone else.
	squat := func(cluster string, labels map[string]string) {
		k := &kustomizev1.Kustomization{TypeMeta: metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: metav1.ObjectMeta{Namespace: "workload-clusters", Name: on("workload-clusters", cluster), Labels: labels},
			Spec:       kustomizev1.KustomizationSpec{SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "elsewhere"}, Path: "./other", Interval: metav1.Duration{Duration: time.Hour}}}
		if labels == nil {
			if err := w.c.Create(w.ctx, k); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := w.c.Patch(w.ctx, k, client.Apply, client.FieldOwner(controllerFieldOwner)); err != nil {
			t.Fatal(err)
		}
	}
	squat("wl1", map[string]string{placement.ApplicationLabel: "cluster-init.other", placement.ClusterLabel: "wl1"})
	squat("wl2", nil)
	w.create(map[string]any{"clusters": []any{"workload-clusters/wl1", "workload-clusters/wl2", "management"}})

	st := w.reconcile()
	c := ready(st)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "workload-clusters/wl1 failed (Kustomization workload-clusters/"+on("workload-clusters", "wl1")+" belongs to application cluster-init/other") ||
		!strings.Contains(c.Message, "workload-clusters/wl2 failed (Kustomization workload-clusters/"+on("workload-clusters", "wl2")+" exists and no application placed it") {
		t.Errorf("the squatted clusters: %+v", c)
	}
	for _, cl := range []string{"wl1", "wl2"} {
		k := &kustomizev1.Kustomization{}
		if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: "workload-clusters", Name: on("workload-clusters", cl)}, k); err != nil {
			t.Fatal(err)
		}
		if k.Spec.Path != "./other" || k.Spec.SourceRef.Name != "elsewhere" || k.Labels[placement.ApplicationLabel] == "cluster-init.hello" {
			t.Errorf("the object on %s was taken over: %+v %v", cl, k.Spec, k.Labels)
		}
	}
	if !w.exists("cluster-init", "management") {
		t.Error("a refused cluster stopped the others from being placed")
	}
	// Deleting hello leaves the others' objects alone.
	if err := w.c.Delete(w.ctx, w.app()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, _ = w.r.Reconcile(w.ctx, reconcile.Request{NamespacedName: hello})
	}
	if !w.exists("workload-clusters", "wl1") || !w.exists("workload-clusters", "wl2") || w.exists("cluster-init", "management") {
		t.Error("deleting the application deleted objects that are not its own, or left its own")
	}
}

// A Kustomization of the names used before they carried a hash ("<app>-<cluster>", the cluster
// label "<namespace>.<name>") is replaced make-before-break: kept until the new one is Ready.
func TestObjectsOfTheOlderNamesAreReplacedMakeBeforeBreak(t *testing.T) {
	kc := testenv.Start(t, "management")
	w := &world{t: t, ctx: t.Context(), c: kc.Client, r: &placement.Reconciler{Client: kc.Client, Rules: placement.Rules{
		Management: client.ObjectKey{Namespace: "cluster-init", Name: "management"}, SelectorNamespaces: []string{"workload-clusters"}}}}
	w.clusters([]cluster{{"cluster-init", "management", "platform"}, {"workload-clusters", "wl1", "dev"}})
	// With Flux's finalizer, as kustomize-controller leaves it: its deletion can be seen.
	old := &kustomizev1.Kustomization{TypeMeta: metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "workload-clusters", Name: "hello-wl1", Finalizers: []string{"finalizers.fluxcd.io"},
			Labels: map[string]string{placement.ApplicationLabel: "cluster-init.hello", placement.ClusterLabel: "workload-clusters.wl1"}},
		Spec: kustomizev1.KustomizationSpec{SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "cluster-init", Namespace: "cluster-init"}, Path: "./clusters/management/apps/hello/manifests", Interval: metav1.Duration{Duration: time.Minute},
			KubeConfig: &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "wl1-kubeconfig", Key: "value"}}}}
	// Applied by this controller, as it applied them then.
	if err := w.c.Patch(w.ctx, old, client.Apply, client.FieldOwner(controllerFieldOwner)); err != nil {
		t.Fatal(err)
	}
	w.create(map[string]any{"clusters": []any{"workload-clusters/wl1"}})
	st := w.reconcile()
	if got := states(st); got != "workload-clusters/wl1=Progressing workload-clusters/wl1=Removing" || !w.exists("workload-clusters", "wl1") {
		t.Errorf("the new object beside the old one: %s", got)
	}
	if err := w.c.Get(w.ctx, client.ObjectKeyFromObject(old), &kustomizev1.Kustomization{}); err != nil {
		t.Errorf("the old object went before the new one was Ready: %v", err)
	}
	w.flux("workload-clusters", "wl1", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	w.reconcile()
	// Deleted, and suspended first: Flux does not prune what the new object took over (nor
	// uninstall the release of a chart, which the new object runs now).
	gone := &kustomizev1.Kustomization{}
	if err := w.c.Get(w.ctx, client.ObjectKeyFromObject(old), gone); err != nil || gone.DeletionTimestamp.IsZero() || !gone.Spec.Suspend {
		t.Errorf("the old object once the new one is Ready: deleting %t, suspended %t, %v", !gone.DeletionTimestamp.IsZero(), gone.Spec.Suspend, err)
	}
	gone.Finalizers = nil
	if err := w.c.Update(w.ctx, gone); err != nil {
		t.Fatal(err)
	}
	if st := w.reconcile(); states(st) != "workload-clusters/wl1=Ready" || ready(st).Status != metav1.ConditionTrue {
		t.Errorf("after the replacement: %s %+v", states(st), ready(st))
	}
}

// applyCounter counts the server-side applies sent through it.
type applyCounter struct {
	client.Client
	applies int
}

func (c *applyCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if patch.Type() == types.ApplyPatchType {
		c.applies++
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// A reconcile with nothing to change sends no apply (a full resync would be one per placement);
// a changed spec is applied, a field set no more is removed, an edit by someone else is undone,
// for manifests and for a chart.
func TestAReconcileWithNothingToChangeAppliesNothing(t *testing.T) {
	kc := testenv.Start(t, "management")
	counter := &applyCounter{Client: kc.Client}
	w := &world{t: t, ctx: t.Context(), c: kc.Client, r: &placement.Reconciler{Client: counter, Rules: placement.Rules{
		Management: client.ObjectKey{Namespace: "cluster-init", Name: "management"}, SelectorNamespaces: []string{"workload-clusters"}}}}
	w.clusters([]cluster{{"cluster-init", "management", "platform"}, {"workload-clusters", "wl1", "dev"}})
	w.create(map[string]any{"clusters": []any{"workload-clusters/wl1"}})
	applies := func(step string, want int) {
		t.Helper()
		counter.applies = 0
		w.reconcile()
		if counter.applies != want {
			t.Errorf("%s: %d applies, want %d", step, counter.applies, want)
		}
	}
	spec := func(mutate func(app *unstructured.Unstructured)) {
		t.Helper()
		app := w.app()
		mutate(app)
		if err := w.c.Update(w.ctx, app); err != nil {
			t.Fatal(err)
		}
	}
	key := client.ObjectKey{Namespace: "workload-clusters", Name: on("workload-clusters", "wl1")}
	kustomization := func() *kustomizev1.Kustomization {
		t.Helper()
		k := &kustomizev1.Kustomization{}
		if err := w.c.Get(w.ctx, key, k); err != nil {
			t.Fatal(err)
		}
		return k
	}

	applies("placed", 1)
	applies("again", 0)
	w.flux("workload-clusters", "wl1", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	applies("Ready", 0)
	if st := w.status(); ready(st).Status != metav1.ConditionTrue {
		t.Errorf("not Ready without an apply: %+v", ready(st))
	}

	spec(func(app *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(app.Object, "hello", "spec", "targetNamespace")
	})
	applies("a target namespace", 1)
	if k := kustomization(); k.Spec.TargetNamespace != "hello" {
		t.Errorf("the target namespace was not applied: %q", k.Spec.TargetNamespace)
	}
	spec(func(app *unstructured.Unstructured) {
		unstructured.RemoveNestedField(app.Object, "spec", "targetNamespace")
	})
	applies("no target namespace", 1)
	if k := kustomization(); k.Spec.TargetNamespace != "" {
		t.Errorf("the target namespace set no more stayed: %q", k.Spec.TargetNamespace)
	}
	applies("again", 0)

	k := kustomization()
	k.Spec.Path = "./elsewhere"
	if err := w.c.Update(w.ctx, k); err != nil {
		t.Fatal(err)
	}
	applies("an edit by someone else", 1)
	if k := kustomization(); k.Spec.Path != "./clusters/management/apps/hello/manifests" {
		t.Errorf("the edit stayed: %q", k.Spec.Path)
	}

	spec(func(app *unstructured.Unstructured) {
		unstructured.RemoveNestedField(app.Object, "spec", "path")
		_ = unstructured.SetNestedField(app.Object, map[string]any{"path": "./charts/hello", "values": map[string]any{"replicas": int64(2), "image": map[string]any{"tag": "1.0"}}}, "spec", "chart")
	})
	applies("a chart", 1)
	applies("the chart again", 0)
}

// The controller as it runs in production (SetupWithManager: a manager's cache, its Flux objects
// indexed by application, the watches): an application is placed by its selector, Ready once Flux
// is, leaves a cluster that no longer matches, and takes its objects when it is deleted.
func TestTheControllerPlacesThroughTheManagersCache(t *testing.T) {
	kc := testenv.Start(t, "management")
	scheme, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	// Its logs dropped (logr.Discard's nil sink would be taken for none, and the global logger
	// used); the controller's name is not checked for uniqueness in the process (-count=2).
	mgr, err := ctrl.NewManager(kc.Config, ctrl.Options{Scheme: scheme, Logger: funcr.New(func(string, string) {}, funcr.Options{}),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	rules := placement.Rules{Management: client.ObjectKey{Namespace: "cluster-init", Name: "management"}, SelectorNamespaces: []string{"workload-clusters"}}
	if err := (&placement.Reconciler{Client: mgr.GetClient(), RequeueAfter: time.Second, Rules: rules}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	w := &world{t: t, ctx: t.Context(), c: kc.Client}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within a minute (status: %s %+v)", what, states(w.status()), ready(w.status()))
			}
		}
	}

	w.clusters([]cluster{{"cluster-init", "management", "platform"}, {"workload-clusters", "wl1", "dev"}, {"workload-clusters", "wl2", "dev"}})
	w.create(map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"env": "dev"}}})
	eventually("placed on wl1 and wl2", func() bool { return w.exists("workload-clusters", "wl1") && w.exists("workload-clusters", "wl2") })
	w.flux("workload-clusters", "wl1", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	w.flux("workload-clusters", "wl2", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	eventually("Ready on both", func() bool { c := ready(w.status()); return c != nil && c.Message == "ready on 2 clusters" })

	// wl2 no longer matches: its Kustomization, found through the index, goes.
	wl2 := &clusterv1.Cluster{}
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: "workload-clusters", Name: "wl2"}, wl2); err != nil {
		t.Fatal(err)
	}
	wl2.Labels["env"] = "prod"
	if err := w.c.Update(w.ctx, wl2); err != nil {
		t.Fatal(err)
	}
	eventually("gone from wl2", func() bool { return !w.exists("workload-clusters", "wl2") && w.exists("workload-clusters", "wl1") })

	if err := w.c.Delete(w.ctx, w.app()); err != nil {
		t.Fatal(err)
	}
	eventually("deleted with its Kustomization", func() bool {
		err := w.c.Get(w.ctx, hello, &appsv1alpha1.Application{})
		return apierrors.IsNotFound(err) && !w.exists("workload-clusters", "wl1")
	})
}

// The API server refuses what the reconciler could not place: a name too long for the label of
// its Flux objects, a path that climbs out of the source, both a path and a chart, no placement.
func TestTheAPIServerRefusesApplicationsThatCannotBePlaced(t *testing.T) {
	kc := testenv.Start(t, "management")
	if err := kc.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-init"}}); err != nil {
		t.Fatal(err)
	}
	placed := appsv1alpha1.Placement{Clusters: []string{"wl1"}}
	src := kustomizev1.CrossNamespaceSourceReference{Kind: "GitRepository", Name: "cluster-init"}
	for _, c := range []struct {
		name, want string
		spec       appsv1alpha1.ApplicationSpec
	}{
		{strings.Repeat("a", 41), "at most 40 characters", appsv1alpha1.ApplicationSpec{SourceRef: src, Path: "./apps", Placement: placed}},
		{"climbs", "no '..'", appsv1alpha1.ApplicationSpec{SourceRef: src, Path: "./apps/../../etc", Placement: placed}},
		{"chart-climbs", "no '..'", appsv1alpha1.ApplicationSpec{SourceRef: src, Chart: &appsv1alpha1.Chart{Path: "../charts/x"}, Placement: placed}},
		{"both", "one of them", appsv1alpha1.ApplicationSpec{SourceRef: src, Path: "./apps", Chart: &appsv1alpha1.Chart{Path: "./chart"}, Placement: placed}},
		{"nowhere", "names clusters, has a selector, or both", appsv1alpha1.ApplicationSpec{SourceRef: src, Path: "./apps"}},
	} {
		app := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: c.name}, Spec: c.spec}
		err := kc.Client.Create(t.Context(), app)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("application %s: got %v, want refused with %q", c.name, err, c.want)
		}
	}
	ok := &appsv1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: strings.Repeat("a", 40)}, Spec: appsv1alpha1.ApplicationSpec{SourceRef: src, Path: "./apps/..x", Placement: placed}}
	if err := kc.Client.Create(t.Context(), ok); err != nil {
		t.Errorf("a valid application was refused: %v", err)
	}
}

// A tenant's object carrying the labels of an application's placement (its own HelmRelease, in
// its namespace, which the admission policies refuse, as if one check had failed) is not taken for
// one: it is not listed in the application's status, and is neither changed nor deleted, even when
// the application leaves that cluster or goes.
func TestATenantsObjectWithAnApplicationsLabelsIsNotTakenForIt(t *testing.T) {
	kc := testenv.Start(t, "management")
	w := &world{t: t, ctx: t.Context(), c: kc.Client, r: &placement.Reconciler{Client: kc.Client, Rules: placement.Rules{
		Management: client.ObjectKey{Namespace: "cluster-init", Name: "management"}, OnManagement: true, SelectorNamespaces: []string{"workload-clusters"}}}}
	w.clusters([]cluster{{"cluster-init", "management", "platform"}, {"workload-clusters", "wl1", "dev"}})
	forged := &helmv2.HelmRelease{TypeMeta: metav1.TypeMeta{APIVersion: helmv2.GroupVersion.String(), Kind: helmv2.HelmReleaseKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "workload-clusters", Name: "wl-mine",
			Labels: map[string]string{placement.ApplicationLabel: "cluster-init.hello", placement.ClusterLabel: "wl1"}},
		Spec: helmv2.HelmReleaseSpec{Interval: metav1.Duration{Duration: time.Hour}, Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
			Chart: "./charts/cluster-init", SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "cluster-init", Namespace: "cluster-init"}}},
			KubeConfig: &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "wl1-kubeconfig", Key: "value"}}}}
	// As the tenant's Kustomization applies it: server-side, as kustomize-controller.
	if err := w.c.Patch(w.ctx, forged, client.Apply, client.FieldOwner("kustomize-controller")); err != nil {
		t.Fatal(err)
	}
	w.create(map[string]any{"clusters": []any{"management"}})
	w.reconcile()
	w.flux("cluster-init", "management", metav1.ConditionTrue, "ReconciliationSucceeded", "Applied revision")
	for range 3 {
		st := w.reconcile()
		if got := states(st); got != "cluster-init/management=Ready" {
			t.Errorf("the application's placements: %s", got)
		}
	}
	if err := w.c.Delete(w.ctx, w.app()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, _ = w.r.Reconcile(w.ctx, reconcile.Request{NamespacedName: hello})
	}
	kept := &helmv2.HelmRelease{}
	if err := w.c.Get(w.ctx, client.ObjectKeyFromObject(forged), kept); err != nil || !kept.DeletionTimestamp.IsZero() {
		t.Errorf("the tenant's release was deleted with the application: %v", err)
	}
}

// What runs an application on a tenant's cluster is in the tenant's namespace and talks to the
// tenant's cluster: it is reconciled by the tenant's Flux shard (the namespace's label), not by
// the platform's controllers; elsewhere it has no shard.
func TestWhatRunsAnApplicationOnATenantsClusterIsItsShards(t *testing.T) {
	kc := testenv.Start(t, "management")
	w := &world{t: t, ctx: t.Context(), c: kc.Client, r: &placement.Reconciler{Client: kc.Client, Rules: placement.Rules{
		Management: client.ObjectKey{Namespace: "cluster-init", Name: "management"}, OnManagement: true, SelectorNamespaces: []string{"team-a"}}}}
	if err := w.c.Create(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a",
		Labels: map[string]string{names.TenantLabel: "true", names.ShardLabel: "team-a"}}}); err != nil {
		t.Fatal(err)
	}
	w.clusters([]cluster{{"cluster-init", "management", "platform"}, {"team-a", "a-one", "dev"}})
	w.create(map[string]any{"clusters": []any{"team-a/a-one", "management"}})
	w.reconcile()
	for _, c := range []struct{ ns, cluster, shard string }{{"team-a", "a-one", "team-a"}, {"cluster-init", "management", ""}} {
		k := &kustomizev1.Kustomization{}
		if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: c.ns, Name: on(c.ns, c.cluster)}, k); err != nil {
			t.Fatal(err)
		}
		if got := k.Labels[names.ShardLabel]; got != c.shard {
			t.Errorf("the application on %s/%s is in shard %q, want %q", c.ns, c.cluster, got, c.shard)
		}
	}
}
