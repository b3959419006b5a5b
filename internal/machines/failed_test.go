package machines_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// A machine whose provider marked it failed for good is found, with the provider's reason; one
// that is only not ready yet is not. A health check that selects it replaces it, as Cluster API
// decides: not before the cluster's infrastructure is ready, not a worker before the control
// plane is initialized, not the last control plane machine after, not a machine without a node
// when the check's node startup timeout is off, and not past the share of unhealthy machines the
// check allows.
func TestAMachineItsProviderGaveUpOnIsFound(t *testing.T) {
	c := testenv.Start(t, "test").Client
	ctx := t.Context()

	openStackMachine := func(name string, status map[string]any) { openStackMachineOf(t, c, name, status) }
	machineOn := func(name string, controlPlane bool) { machineOnOpenStack(t, c, name, controlPlane) }
	failed := func() []machines.Failure {
		t.Helper()
		got, err := machines.Failed(ctx, c, ns, "wl")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "wl-cp"}}}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	gaveUp := map[string]any{"failureReason": "UpdateError", "failureMessage": "instance state ERROR is unexpected", "ready": false}
	openStackMachine("wl-md-doomed", gaveUp)
	machineOn("wl-md-doomed", false)
	openStackMachine("wl-cp-doomed", gaveUp)
	machineOn("wl-cp-doomed", true)
	openStackMachine("wl-md-booting", map[string]any{"instanceState": "BUILD", "ready": false})
	machineOn("wl-md-booting", false)

	got := failed()
	if len(got) != 2 || got[0].Machine != "wl-cp-doomed" || got[1].Machine != "wl-md-doomed" {
		t.Fatalf("failed machines: %+v, want wl-cp-doomed and wl-md-doomed", got)
	}
	if f := got[1]; f.Infrastructure != "OpenStackMachine/wl-md-doomed" || f.Reason != "UpdateError" || f.Message != "instance state ERROR is unexpected" || f.RemediatedBy != "" || f.Object == nil {
		t.Errorf("the worker's failure: %+v", f)
	}
	want := "machine wl-md-doomed failed: OpenStackMachine/wl-md-doomed UpdateError: instance state ERROR is unexpected"
	if s := got[1].String(); s != want {
		t.Errorf("said as %q, want %q", s, want)
	}

	// A wait for the machines to settle ends with the failure, not at its timeout.
	_, err := machines.WaitSettled(ctx, c, c, machines.Settling{Namespace: ns, Name: "wl", Timeout: time.Minute, Interval: 100 * time.Millisecond})
	if !errors.Is(err, machines.ErrMachineFailed) || !strings.Contains(err.Error(), "machine wl-md-doomed failed") {
		t.Errorf("waiting for the machines to settle: %v, want ErrMachineFailed naming wl-md-doomed", err)
	}

	remediatedBy := func() []string {
		var out []string
		for _, f := range failed() {
			out = append(out, f.Machine+"="+f.RemediatedBy)
		}
		return out
	}
	mhc := func(name string, selector map[string]string, nodeStartup *int32) {
		m := &clusterv1.MachineHealthCheck{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.MachineHealthCheckSpec{ClusterName: "wl", Selector: metav1.LabelSelector{MatchLabels: selector},
				Checks: clusterv1.MachineHealthCheckChecks{NodeStartupTimeoutSeconds: nodeStartup}}}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	mhc("wl-other", map[string]string{"pool": "other"}, nil)
	mhc("wl-nostartup", map[string]string{"pool": "md"}, ptr.To(int32(0)))
	if got := remediatedBy(); !slices.Equal(got, []string{"wl-cp-doomed=", "wl-md-doomed="}) {
		t.Errorf("with health checks of other machines or without a node startup timeout: %v", got)
	}

	mhc("wl-md", map[string]string{"pool": "md"}, nil)
	mhc("wl-cp", map[string]string{clusterv1.MachineControlPlaneLabel: ""}, nil)
	if got := remediatedBy(); !slices.Equal(got, []string{"wl-cp-doomed=", "wl-md-doomed="}) {
		t.Errorf("before the cluster's infrastructure is ready: %v", got)
	}
	setConditions := func(conds ...string) {
		cl.Status.Conditions = nil
		for _, cond := range conds {
			cl.Status.Conditions = append(cl.Status.Conditions, metav1.Condition{Type: cond, Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Now()})
		}
		if err := c.Status().Update(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	setConditions(clusterv1.ClusterInfrastructureReadyCondition)
	if got := remediatedBy(); !slices.Equal(got, []string{"wl-cp-doomed=wl-cp", "wl-md-doomed="}) {
		t.Errorf("before the control plane is initialized: %v, want the control plane machine's replaced, not the worker's", got)
	}
	setConditions(clusterv1.ClusterInfrastructureReadyCondition, clusterv1.ClusterControlPlaneInitializedCondition)
	if got := remediatedBy(); !slices.Equal(got, []string{"wl-cp-doomed=", "wl-md-doomed=wl-md"}) {
		t.Errorf("with the control plane initialized: %v, want the worker's replaced, not the last control plane machine", got)
	}
	openStackMachine("wl-cp-running", map[string]any{"instanceState": "ACTIVE", "ready": true})
	machineOn("wl-cp-running", true)
	if got := remediatedBy(); !slices.Equal(got, []string{"wl-cp-doomed=wl-cp", "wl-md-doomed=wl-md"}) {
		t.Errorf("with a second control plane machine: %v", got)
	}

	// The chart's workers' check stops past 40% of them unhealthy: one of two is past it.
	check := &clusterv1.MachineHealthCheck{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wl-md"}, check); err != nil {
		t.Fatal(err)
	}
	check.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo = ptr.To(intstr.FromString("40%"))
	if err := c.Update(ctx, check); err != nil {
		t.Fatal(err)
	}
	if got := remediatedBy(); !slices.Equal(got, []string{"wl-cp-doomed=wl-cp", "wl-md-doomed="}) {
		t.Errorf("with half the workers failed and a check that stops past 40%%: %v", got)
	}
	// The conclusion names the check that gave up, and why.
	for _, f := range failed() {
		if f.Machine == "wl-md-doomed" && !strings.Contains(f.String(), "(health check wl-md replaces none: 1 of the 2 machines it looks at failed, more than it allows") {
			t.Errorf("the worker's failure, its check past its limit, said as %q", f.String())
		}
	}
}

// CAPO sets no failure fields on an OpenStackMachine whose server is in ERROR: it stops
// reconciling the OpenStackServer, and the machine waits for it. That server's state is the mark.
func TestAnOpenStackServerInErrorIsAFailedMachine(t *testing.T) {
	c := testenv.Start(t, "test").Client
	ctx := t.Context()
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wl"},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "wl-cp"}}}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"wl-md-errored", "wl-md-building"} {
		openStackMachineOf(t, c, name, nil)
		machineOnOpenStack(t, c, name, false)
		srv := testenv.OpenStackServer(ns, name)
		if err := c.Create(ctx, srv); err != nil {
			t.Fatal(err)
		}
		state := map[string]string{"wl-md-errored": "ERROR", "wl-md-building": "BUILD"}[name]
		srv.Object["status"] = map[string]any{"instanceState": state, "ready": false, "conditions": []any{map[string]any{
			"type": "InstanceReady", "status": "False", "severity": "Error", "reason": "InstanceStateError",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
		if err := c.Status().Update(ctx, srv); err != nil {
			t.Fatal(err)
		}
	}
	got, err := machines.Failed(ctx, c, ns, "wl")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Machine != "wl-md-errored" || got[0].Reason != "InstanceStateError" || !strings.Contains(got[0].Message, "is in ERROR") {
		t.Errorf("failed machines: %+v, want wl-md-errored alone, its server in ERROR", got)
	}
}

// openStackMachineOf creates an OpenStackMachine the vendored CRD admits, with status if given.
func openStackMachineOf(t *testing.T, c client.Client, name string, status map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackMachine",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"flavor": "m1.large", "image": map[string]any{"filter": map[string]any{"name": "kindest-node"}}}}}
	if err := c.Create(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	if status != nil {
		u.Object["status"] = status
		if err := c.Status().Update(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
}

// machineOnOpenStack creates a Machine of cluster wl on the OpenStackMachine of its name: a
// worker of pool md, or of the control plane.
func machineOnOpenStack(t *testing.T, c client.Client, name string, controlPlane bool) {
	t.Helper()
	labels := map[string]string{clusterv1.ClusterNameLabel: "wl", "pool": "md"}
	if controlPlane {
		labels = map[string]string{clusterv1.ClusterNameLabel: "wl", clusterv1.MachineControlPlaneLabel: ""}
	}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: clusterv1.MachineSpec{ClusterName: "wl", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "OpenStackMachine", Name: name}}}
	if err := c.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}
