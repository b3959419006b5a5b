package machines_test

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/testenv"
)

const ns = "default"

func machine(t *testing.T, c client.Client, name string, controlPlane bool) *clusterv1.Machine {
	t.Helper()
	labels := map[string]string{clusterv1.ClusterNameLabel: "wl"}
	if controlPlane {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: clusterv1.MachineSpec{ClusterName: "wl",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: name}}}
	if err := c.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

func setMachine(t *testing.T, c client.Client, m *clusterv1.Machine, phase, node string, ready metav1.ConditionStatus) {
	t.Helper()
	m.Spec.ProviderID = "docker:////" + m.Name
	if err := c.Update(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	m.Status.Phase = phase
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineReadyCondition, Status: ready, Reason: "R", Message: "* NodeHealthy: Node not ready", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

// The machine view on a real API server: how many machines the control plane and the
// MachineDeployments ask for, and a cluster is settled only when each of them has a node that
// Cluster API reports ready.
func TestTheMachinesOfACluster(t *testing.T) {
	c := testenv.Start(t, "test").Client
	ctx := t.Context()

	v, err := machines.Read(ctx, c, ns, "wl")
	if err != nil || v.Found {
		t.Fatalf("no cluster: %+v %v", v, err)
	}
	if ok, why := v.Settled(); ok || !strings.Contains(why[0], "does not exist") {
		t.Errorf("settled without a cluster: %v", why)
	}

	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "wl-cp"}}}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	v, err = machines.Read(ctx, c, ns, "wl")
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := v.Settled(); ok || !strings.Contains(strings.Join(why, ";"), "KubeadmControlPlane wl-cp does not exist yet") {
		t.Errorf("control plane missing: %v", why)
	}

	kcp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
		"metadata": map[string]any{"namespace": ns, "name": "wl-cp"},
		"spec": map[string]any{"replicas": int64(1), "version": "v1.37.0", "machineTemplate": map[string]any{"spec": map[string]any{
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "wl-cp"}}}},
	}}
	if err := c.Create(ctx, kcp); err != nil {
		t.Fatal(err)
	}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl-md", Labels: map[string]string{clusterv1.ClusterNameLabel: "wl"}},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: "wl", Replicas: ptr.To[int32](2),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "md"}},
			Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": "md"}}, Spec: clusterv1.MachineSpec{ClusterName: "wl",
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachineTemplate", Name: "wl-md"}}}}}
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	cp := machine(t, c, "wl-cp-0", true)
	w0 := machine(t, c, "wl-md-0", false)
	setMachine(t, c, cp, "Running", "wl-cp-0", metav1.ConditionTrue)
	// Running with a node, but the node is not ready yet: not settled.
	setMachine(t, c, w0, "Running", "wl-md-0", metav1.ConditionFalse)

	v, err = machines.Read(ctx, c, ns, "wl")
	if err != nil {
		t.Fatal(err)
	}
	if v.Wanted != 3 || len(v.Machines) != 2 {
		t.Fatalf("wanted %d, machines %d", v.Wanted, len(v.Machines))
	}
	ok, why := v.Settled()
	if ok || !strings.Contains(strings.Join(why, ";"), "Machine wl-md-0 (worker): Running, node wl-md-0; NodeHealthy: Node not ready") ||
		!strings.Contains(strings.Join(why, ";"), "3 machines wanted, 2 there") {
		t.Errorf("settled %t: %v", ok, why)
	}

	w1 := machine(t, c, "wl-md-1", false)
	setMachine(t, c, w0, "Running", "wl-md-0", metav1.ConditionTrue)
	setMachine(t, c, w1, "Running", "wl-md-1", metav1.ConditionTrue)
	v, err = machines.Read(ctx, c, ns, "wl")
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := v.Settled(); !ok {
		t.Errorf("not settled: %v", why)
	}

	// Cluster API calls every machine ready; the cluster's own API has the last word: a node
	// missing or not Ready keeps its machine pending (the same API server plays both here).
	node := func(name string, status corev1.ConditionStatus) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "KubeletNotReady", Message: "container runtime network not ready"}}
		if err := c.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	node("wl-cp-0", corev1.ConditionTrue)
	node("wl-md-0", corev1.ConditionTrue)
	node("wl-md-1", corev1.ConditionFalse)
	withNodes := v
	withNodes.Machines = append([]machines.Machine{}, v.Machines...)
	if err := withNodes.CheckNodes(ctx, c); err != nil {
		t.Fatal(err)
	}
	if ok, why := withNodes.Settled(); ok || len(why) != 1 || !strings.Contains(why[0], "node wl-md-1 Ready=False: container runtime network not ready") {
		t.Errorf("settled %t with a node not Ready: %v", ok, why)
	}
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "wl-md-0"}}); err != nil {
		t.Fatal(err)
	}
	withNodes.Machines = append([]machines.Machine{}, v.Machines...)
	if err := withNodes.CheckNodes(ctx, c); err != nil {
		t.Fatal(err)
	}
	if ok, why := withNodes.Settled(); ok || len(why) != 2 || !strings.Contains(strings.Join(why, ";"), "node wl-md-0: ") {
		t.Errorf("settled %t with a node missing: %v", ok, why)
	}
	if ids := v.ProviderIDs(); len(ids) != 3 || ids["wl-md-1"] != "docker:////wl-md-1" {
		t.Errorf("provider IDs %v", ids)
	}
	if lines := v.Lines(); len(lines) != 4 || !strings.HasPrefix(lines[1], "Machine wl-cp-0 (control plane): Running") {
		t.Errorf("lines %q", lines)
	}

	// The whole namespace at once sees each cluster as Read does, and no cluster's machines,
	// MachineDeployments or control plane in another's view.
	other := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl2"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "wl2-cp"}}}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	all, err := machines.ReadNamespace(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || !reflect.DeepEqual(all["wl"], v) {
		t.Errorf("the namespace's view of wl differs from Read's:\n%+v\n%+v", all["wl"], v)
	}
	alone, err := machines.Read(ctx, c, ns, "wl2")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(all["wl2"], alone) || alone.Unknown != "KubeadmControlPlane wl2-cp does not exist yet" || len(alone.Machines) != 0 || alone.Wanted != 0 {
		t.Errorf("wl2 alone %+v, in the namespace %+v", alone, all["wl2"])
	}
}

func TestReplaced(t *testing.T) {
	before := map[string]string{"a": "docker:////a", "b": "docker:////b"}
	if r := machines.Replaced(before, map[string]string{"a": "docker:////a", "b": "docker:////b", "c": "x"}); len(r) != 0 {
		t.Errorf("replaced %v", r)
	}
	if r := machines.Replaced(before, map[string]string{"a": "docker:////a2"}); len(r) != 2 {
		t.Errorf("replaced %v", r)
	}
}

// What a machine waits for is at the bottom of Cluster API's nested summary: a failed bootstrap
// command and its stderr (as CAPD reports an RKE2 machine that could not install RKE2).
func TestFlattenKeepsWhatTheMachineWaitsFor(t *testing.T) {
	ready := "* InfrastructureReady:\n  * BootstrapCompleted:\n    * Running boostrap command [ /bin/sh -c systemctl enable rke2-server.service ]\n" +
		"    * ERROR: exited with status: 1, \n    * STDOUT: \n    * STDERR: Failed to enable unit: Unit file rke2-server.service does not exist.\n" +
		"* NodeHealthy: Waiting for Cluster control plane to be initialized"
	want := "InfrastructureReady: BootstrapCompleted: Running boostrap command [ /bin/sh -c systemctl enable rke2-server.service ]; " +
		"ERROR: exited with status: 1; STDERR: Failed to enable unit: Unit file rke2-server.service does not exist.; " +
		"NodeHealthy: Waiting for Cluster control plane to be initialized"
	if got := machines.Flatten(ready); got != want {
		t.Errorf("Flatten:\n got %q\nwant %q", got, want)
	}
	long := machines.Flatten(strings.Repeat("é", 5000))
	if !strings.HasSuffix(long, " …") || !utf8.ValidString(long) || utf8.RuneCountInString(long) > 1000 {
		t.Errorf("a long message is not cut to a few lines, on a character boundary: %d characters", utf8.RuneCountInString(long))
	}
}

// What status shows of a cluster's health, as Cluster API writes it on a real API server: a
// machine a health check found unhealthy (why, since when, what its owner does), a health check
// that replaces no machine (too many unhealthy), and the nearest expiry of the control plane's
// certificates; and a view of the whole namespace shows the same.
func TestTheHealthOfACluster(t *testing.T) {
	c := testenv.Start(t, "test").Client
	ctx := t.Context()
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "wl-cp"}}}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	cp := machine(t, c, "wl-cp-a", true)
	setMachine(t, c, cp, "Running", "wl-cp-a", metav1.ConditionTrue)
	cp2 := machine(t, c, "wl-cp-b", true)
	setMachine(t, c, cp2, "Running", "wl-cp-b", metav1.ConditionTrue)
	soon, later := time.Now().Add(40*24*time.Hour).Truncate(time.Second), time.Now().Add(300*24*time.Hour).Truncate(time.Second)
	for m, at := range map[*clusterv1.Machine]time.Time{cp: later, cp2: soon} {
		m.Status.CertificatesExpiryDate = metav1.NewTime(at)
		if err := c.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	w := machine(t, c, "wl-workers-a", false)
	setMachine(t, c, w, "Running", "wl-workers-a", metav1.ConditionFalse)
	since := metav1.NewTime(time.Now().Add(-3 * time.Minute).Truncate(time.Second))
	w.Status.Conditions = append(w.Status.Conditions,
		metav1.Condition{Type: clusterv1.MachineHealthCheckSucceededCondition, Status: metav1.ConditionFalse, Reason: clusterv1.MachineHealthCheckUnhealthyNodeReason,
			Message: "Health check failed: Condition Ready on Node is reported as Unknown for more than 1m0s", LastTransitionTime: since},
		metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.MachineOwnerRemediatedWaitingForRemediationReason,
			Message: "Waiting for remediation", LastTransitionTime: since})
	if err := c.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	mhc := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl-workers", Labels: map[string]string{clusterv1.ClusterNameLabel: "wl"}},
		Spec: clusterv1.MachineHealthCheckSpec{ClusterName: "wl", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}
	if err := c.Create(ctx, mhc); err != nil {
		t.Fatal(err)
	}
	mhc.Status.ExpectedMachines, mhc.Status.CurrentHealthy = ptr.To[int32](3), ptr.To[int32](1)
	mhc.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineHealthCheckRemediationAllowedCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.MachineHealthCheckTooManyUnhealthyReason, Message: "Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, mhc); err != nil {
		t.Fatal(err)
	}

	one, err := machines.Read(ctx, c, ns, "wl")
	if err != nil {
		t.Fatal(err)
	}
	all, err := machines.ReadNamespace(ctx, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]machines.View{"Read": one, "ReadNamespace": all["wl"]} {
		at, of := v.CertificatesExpire()
		if !at.Equal(soon) || of != "wl-cp-b" {
			t.Errorf("%s: certificates expire %s (%s), want %s (wl-cp-b)", what, at, of, soon)
		}
		var sick *machines.Machine
		for i := range v.Machines {
			if v.Machines[i].Unhealthy != "" {
				sick = &v.Machines[i]
			}
		}
		if sick == nil || sick.Name != "wl-workers-a" || !sick.UnhealthySince.Equal(since.Time) ||
			!strings.Contains(sick.Unhealthy, "UnhealthyNode: Health check failed") || !strings.HasPrefix(sick.Remediation, "WaitingForRemediation") {
			t.Errorf("%s: the unhealthy machine: %+v", what, sick)
		}
		if got := strings.Join(v.Lines(), "\n"); !strings.Contains(got, "Machine wl-workers-a (worker): Running, unhealthy, node wl-workers-a; unhealthy since") ||
			!strings.Contains(got, "unhealthy since "+since.Local().Format(time.TimeOnly)+": UnhealthyNode") || !strings.Contains(got, "its replacement: WaitingForRemediation: Waiting for remediation") {
			t.Errorf("%s: the lines do not say the machine is unhealthy since 3 minutes and waits to be replaced:\n%s", what, got)
		}
		if got := sick.Remediating(since.Add(3 * time.Minute)); sick != nil && !strings.Contains(got, "(3m0s): UnhealthyNode") {
			t.Errorf("%s: its remediation, 3 minutes in: %q", what, got)
		}
		if got := v.GaveUp(); len(got) != 1 || !strings.Contains(got[0], "MachineHealthCheck wl-workers replaces no machine: TooManyUnhealthy") || !strings.Contains(got[0], "(1 of 3 machines healthy)") {
			t.Errorf("%s: the health check that gave up: %v", what, got)
		}
	}
}
