package handoff_test

import (
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/handoff"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/units"
)

// inHealthCheck is the status kustomize-controller writes while a reconciliation that started
// applying at applying waits in the health check it started at checking.
func inHealthCheck(applying, checking time.Time) kustomizev1.KustomizationStatus {
	msg := "Running health checks for revision main@sha1:0 with a timeout of 5m0s"
	return kustomizev1.KustomizationStatus{
		ObservedGeneration: 1,
		Conditions: []metav1.Condition{
			{Type: meta.ReadyCondition, Status: metav1.ConditionUnknown, Reason: meta.ProgressingReason, Message: "Reconciliation in progress", LastTransitionTime: metav1.NewTime(applying)},
			{Type: meta.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: meta.ProgressingReason, Message: msg, LastTransitionTime: metav1.NewTime(checking)},
			{Type: meta.HealthyCondition, Status: metav1.ConditionUnknown, Reason: meta.ProgressingReason, Message: msg, LastTransitionTime: metav1.NewTime(checking)},
		},
	}
}

// A unit in its health check is asked to reconcile once the objects the check waits for are ready
// by Flux's rules (kstatus, the unit's CEL expressions), and not before.
func TestHealthChecksAskFluxOnceTheObjectsAreReady(t *testing.T) {
	c := testenv.Start(t, "health")
	ctx := t.Context()
	const ns = "cluster-init"
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}},
			},
		},
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mgmt"},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "mgmt"},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerCluster", Name: "mgmt"},
		},
	}
	// A Job is ready for Flux once complete, not once started (kstatus's own rule).
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pivot"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "pivot", Image: "pivot"}},
		}}},
	}
	for _, o := range []client.Object{deploy, cluster, job} {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	src := kustomizev1.CrossNamespaceSourceReference{Kind: "OCIRepository", Name: "src"}
	// "apps" waits for everything it applied (the Deployment, and a ConfigMap that is ready once it
	// exists); "cluster" checks the Cluster with an expression of its own.
	apps := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "apps"},
		Spec:       kustomizev1.KustomizationSpec{Interval: metav1.Duration{Duration: time.Hour}, Path: "./apps", SourceRef: src, Wait: true},
	}
	clusterUnit := &kustomizev1.Kustomization{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster"},
		Spec: kustomizev1.KustomizationSpec{
			Interval: metav1.Duration{Duration: time.Hour}, Path: "./cluster", SourceRef: src,
			HealthChecks: []meta.NamespacedObjectKindReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "mgmt", Namespace: ns}},
			HealthCheckExprs: []kustomize.CustomHealthCheck{{
				APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster",
				HealthCheckExpressions: kustomize.HealthCheckExpressions{
					Current: "status.conditions.exists(c, c.type == 'ControlPlaneInitialized' && c.status == 'True')",
				},
			}},
		},
	}
	started := time.Now().Add(-time.Minute)
	for _, ks := range []*kustomizev1.Kustomization{apps, clusterUnit} {
		if err := c.Client.Create(ctx, ks); err != nil {
			t.Fatal(err)
		}
		ks.Status = inHealthCheck(started, started)
		if ks.Name == "apps" {
			ks.Status.Inventory = &kustomizev1.ResourceInventory{Entries: []kustomizev1.ResourceRef{
				{ID: ns + "_web_apps_Deployment", Version: "v1"},
				{ID: ns + "_settings__ConfigMap", Version: "v1"},
				{ID: ns + "_pivot_batch_Job", Version: "v1"},
			}}
		}
		if err := c.Client.Status().Update(ctx, ks); err != nil {
			t.Fatal(err)
		}
	}
	g := &units.Graph{
		Units: map[string]*units.Unit{
			"apps":    {Name: "apps", Enabled: true, Object: "apps", Kind: units.KindKustomization},
			"cluster": {Name: "cluster", Enabled: true, Object: "cluster", Kind: units.KindKustomization},
		},
		Order: []string{"apps", "cluster"},
	}
	follow := func(h *handoff.HealthChecks) { followUnits(t, c, ns, g, h) }
	requested := func(name string) string { return requestedAt(t, c.Client, ns, name) }
	waitRequested := func(name string) { waitRequested(t, c, ns, name, 10*time.Second) }

	h := handoff.NewHealthChecks(ctx, c)
	defer h.Stop()
	follow(h)
	time.Sleep(3 * time.Second)
	for _, name := range []string{"apps", "cluster"} {
		if requested(name) != "" {
			t.Fatalf("unit %s was asked to reconcile while its objects are not ready", name)
		}
	}

	// The Deployment turns available: only its unit is asked.
	deploy.Status = appsv1.DeploymentStatus{
		ObservedGeneration: deploy.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	if err := c.Client.Status().Update(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	jobStart := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &jobStart, Active: 1}
	if err := c.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if requested("apps") != "" {
		t.Fatal("unit apps was asked to reconcile while its Job runs")
	}
	done := metav1.Now()
	job.Status = batchv1.JobStatus{
		StartTime: &jobStart, CompletionTime: &done, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: done},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: done},
		},
	}
	if err := c.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	waitRequested("apps")
	if requested("cluster") != "" {
		t.Fatal("unit cluster was asked to reconcile while its Cluster has no initialized control plane")
	}

	// The control plane is initialized: the unit's own expression says so.
	cluster.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.Now()}}
	if err := c.Client.Status().Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	waitRequested("cluster")

	// A unit not in a health check (here: ready) is never asked.
	ready := &kustomizev1.Kustomization{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "apps"}, ready); err != nil {
		t.Fatal(err)
	}
	delete(ready.Annotations, meta.ReconcileRequestAnnotation)
	if err := c.Client.Update(ctx, ready); err != nil {
		t.Fatal(err)
	}
	ready.Status = status(metav1.ConditionTrue, meta.ReconciliationSucceededReason)
	if err := c.Client.Status().Update(ctx, ready); err != nil {
		t.Fatal(err)
	}
	follow(h)
	time.Sleep(2 * time.Second)
	if requested("apps") != "" {
		t.Error("a ready unit was asked to reconcile")
	}
}

// The bounds of a hint, read from the conditions alone: one request per reconciliation; none for
// the check that follows an interrupted one (it cannot be placed), none for a unit whose apply
// took longer than a hint may cost; objects ready at every look are asked for only once the check
// has run long enough that Flux's own first look is past.
func TestHealthChecksAskAtMostOncePerReconciliation(t *testing.T) {
	c := testenv.Start(t, "health-bounds")
	ctx := t.Context()
	const ns = "cluster-init"
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// A Service is ready once it exists (kstatus): every check below waits for objects that are
	// ready at once, two of them (a look reports them one at a time).
	for _, name := range []string{"web", "api"} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}
		if err := c.Client.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	src := kustomizev1.CrossNamespaceSourceReference{Kind: "OCIRepository", Name: "src"}
	unit := func(name string) *kustomizev1.Kustomization {
		return &kustomizev1.Kustomization{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kustomizev1.KustomizationSpec{
				Interval: metav1.Duration{Duration: time.Hour}, Path: "./" + name, SourceRef: src,
				HealthChecks: []meta.NamespacedObjectKindReference{
					{APIVersion: "v1", Kind: "Service", Name: "web", Namespace: ns},
					{APIVersion: "v1", Kind: "Service", Name: "api", Namespace: ns},
				},
			},
		}
	}
	now := time.Now().Truncate(time.Second)
	statuses := map[string]kustomizev1.KustomizationStatus{
		// Its check starts right before it is followed (below): asked only once healthSettle has
		// passed.
		"fresh": {},
		// Applied in 1s, checking for a minute: asked at once.
		"waiting": inHealthCheck(now.Add(-61*time.Second), now.Add(-time.Minute)),
		// The apply took 5s: a second apply would cost more than a hint saves.
		"heavy": inHealthCheck(now.Add(-65*time.Second), now.Add(-time.Minute)),
		// Healthy is older than the reconciliation: the check of the reconciliation that follows
		// an interrupted one, or its apply.
		"after-interrupt": inHealthCheck(now.Add(-10*time.Second), now.Add(-time.Minute)),
	}
	g := &units.Graph{Units: map[string]*units.Unit{}}
	for name, st := range statuses {
		ks := unit(name)
		if err := c.Client.Create(ctx, ks); err != nil {
			t.Fatal(err)
		}
		ks.Status = st
		if err := c.Client.Status().Update(ctx, ks); err != nil {
			t.Fatal(err)
		}
		g.Units[name] = &units.Unit{Name: name, Enabled: true, Object: name, Kind: units.KindKustomization}
		g.Order = append(g.Order, name)
	}
	follow := func(h *handoff.HealthChecks) { followUnits(t, c, ns, g, h) }
	requested := func(name string) string { return requestedAt(t, c.Client, ns, name) }
	waitRequested := func(name string, within time.Duration) time.Time { return waitRequested(t, c, ns, name, within) }
	fresh := &kustomizev1.Kustomization{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fresh"}, fresh); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	// The cluster records the check's start to the second: at most a second before started.
	fresh.Status = inHealthCheck(started.Truncate(time.Second), started.Truncate(time.Second))
	if err := c.Client.Status().Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	h := handoff.NewHealthChecks(ctx, c)
	defer h.Stop()
	follow(h)

	asked := waitRequested("fresh", 5*time.Second)
	if early := asked.Sub(started); early < time.Second {
		t.Errorf("unit fresh was asked %s after its check started, before Flux's own first look could pass it", early.Round(100*time.Millisecond))
	}
	waitRequested("waiting", 5*time.Second)
	time.Sleep(3 * time.Second)
	for _, name := range []string{"heavy", "after-interrupt"} {
		if requested(name) != "" {
			t.Errorf("unit %s was asked to reconcile", name)
		}
	}

	// The same reconciliation, looked at again after the request: not asked a second time.
	clear := func(name string) *kustomizev1.Kustomization {
		t.Helper()
		ks := &kustomizev1.Kustomization{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ks); err != nil {
			t.Fatal(err)
		}
		delete(ks.Annotations, meta.ReconcileRequestAnnotation)
		if err := c.Client.Update(ctx, ks); err != nil {
			t.Fatal(err)
		}
		return ks
	}
	clear("waiting")
	follow(h)
	time.Sleep(3 * time.Second)
	if requested("waiting") != "" {
		t.Error("unit waiting was asked twice in one reconciliation")
	}

	// A new reconciliation of it, waiting in its check: asked again.
	ks := clear("waiting")
	later := time.Now().Truncate(time.Second)
	ks.Status = inHealthCheck(later.Add(-4*time.Second), later.Add(-3*time.Second))
	if err := c.Client.Status().Update(ctx, ks); err != nil {
		t.Fatal(err)
	}
	follow(h)
	waitRequested("waiting", 5*time.Second)
}

// followUnits has h look at the units of namespace, with the graph g.
func followUnits(t *testing.T, c *kube.Cluster, namespace string, g *units.Graph, h *handoff.HealthChecks) {
	t.Helper()
	u, err := readiness.ReadUnits(t.Context(), c.Client, namespace)
	if err != nil {
		t.Fatal(err)
	}
	u.Graph = g
	h.Follow(u)
}

// waitRequested waits until unit name is asked to reconcile, and says when it saw it.
func waitRequested(t *testing.T, c *kube.Cluster, namespace, name string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for requestedAt(t, c.Client, namespace, name) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("unit %s was not asked to reconcile within %s", name, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Now()
}
