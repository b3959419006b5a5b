package machines

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Failure is a machine whose infrastructure provider has given up on it: it will not reconcile it
// again (CAPO says "Not reconciling machine in failed state"), so only its replacement, by a
// health check or by hand, makes the cluster go on.
type Failure struct {
	Machine string
	// Infrastructure is the machine's infrastructure object, as Kind/name: the one that failed.
	Infrastructure string
	// Object is that infrastructure object as read, for a provider-specific look at its cloud.
	Object          *unstructured.Unstructured
	Reason, Message string
	// RemediatedBy names the MachineHealthCheck that will replace the machine ("" when none will).
	RemediatedBy string
	// GivenUp, when no check will, says which check would, but replaces no machine while so
	// many of those it looks at have failed (its maxUnhealthy, Cluster API's
	// remediation.triggerIf): then the fault is likely not the machines'.
	GivenUp string
}

func (f Failure) String() string {
	s := fmt.Sprintf("machine %s failed: %s %s: %s", f.Machine, f.Infrastructure, f.Reason, f.Message)
	switch {
	case f.RemediatedBy != "":
		s += " (health check " + f.RemediatedBy + " will replace it)"
	case f.GivenUp != "":
		s += " (" + f.GivenUp + ")"
	}
	return s
}

// Failed returns the machines of the cluster namespace/cluster that their infrastructure
// provider has marked as failed for good, in name order.
//
// The mark is the Cluster API contract's terminal failure, status.failureReason and
// status.failureMessage of the infrastructure machine (or their place under
// status.deprecated.v1beta1 in a provider of the v1beta2 contract): a provider sets it for what
// it will not retry, such as CAPO for a server that its cloud left in ERROR before it ever had a
// node. A transient error is a condition, not this mark, and is not reported here. Where a
// provider marks it on an object of its own instead (CAPO's OpenStackServer in ERROR), that mark
// counts too (providerGaveUp).
func Failed(ctx context.Context, c client.Reader, namespace, cluster string) ([]Failure, error) {
	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list the Machines of %s: %w", cluster, err)
	}
	var out []Failure
	failed := map[string]bool{}
	for i := range list.Items {
		m := &list.Items[i]
		if !m.DeletionTimestamp.IsZero() || !m.Spec.InfrastructureRef.IsDefined() {
			continue
		}
		infra, err := external.GetObjectFromContractVersionedRef(ctx, c, m.Spec.InfrastructureRef, namespace)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the infrastructure of machine %s: %w", m.Name, err)
		}
		reason, message, ok := terminalFailure(infra)
		if !ok {
			if reason, message, ok, err = providerGaveUp(ctx, c, infra); err != nil {
				return nil, fmt.Errorf("read what the provider made for machine %s: %w", m.Name, err)
			}
		}
		if !ok {
			continue
		}
		failed[m.Name] = true
		out = append(out, Failure{Machine: m.Name, Infrastructure: infra.GetKind() + "/" + infra.GetName(), Object: infra, Reason: reason, Message: message})
	}
	if len(out) == 0 {
		return nil, nil
	}
	checks, err := healthChecks(ctx, c, namespace, cluster)
	if err != nil {
		return nil, err
	}
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: cluster}, cl); err != nil {
		return nil, fmt.Errorf("read Cluster %s: %w", cluster, err)
	}
	r := remediation{cluster: cl, machines: list.Items, failed: failed, checks: checks}
	for i := range out {
		for j := range list.Items {
			if list.Items[j].Name == out[i].Machine {
				out[i].RemediatedBy, out[i].GivenUp = r.by(&list.Items[j])
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Machine < out[j].Machine })
	return out, nil
}

// terminalFailure reads the contract's failure fields of an infrastructure machine.
func terminalFailure(infra *unstructured.Unstructured) (reason, message string, failed bool) {
	for _, path := range [][]string{{"status"}, {"status", "deprecated", "v1beta1"}} {
		r, _, _ := unstructured.NestedString(infra.Object, append(path, "failureReason")...)
		m, _, _ := unstructured.NestedString(infra.Object, append(path, "failureMessage")...)
		if r != "" || m != "" {
			return r, m, true
		}
	}
	return "", "", false
}

// OpenStackServer is what CAPO (v0.12 on) makes for an OpenStackMachine, named alike.
var OpenStackServer = schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "OpenStackServer"}

// providerGaveUp reads a provider's own mark of a machine it no longer reconciles, where it sets
// no failure fields: CAPO stops reconciling an OpenStackServer in ERROR (IsServerTerminalError,
// "Not reconciling server in error state"), whether Nova failed it or refused to create it,
// while the OpenStackMachine only waits for the server to be ready.
func providerGaveUp(ctx context.Context, c client.Reader, infra *unstructured.Unstructured) (reason, message string, failed bool, err error) {
	if infra.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: OpenStackServer.Group, Kind: "OpenStackMachine"}) {
		return "", "", false, nil
	}
	srv := &unstructured.Unstructured{}
	srv.SetGroupVersionKind(OpenStackServer)
	if err := c.Get(ctx, client.ObjectKeyFromObject(infra), srv); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			return "", "", false, nil
		}
		return "", "", false, err
	}
	if state, _, _ := unstructured.NestedString(srv.Object, "status", "instanceState"); state != "ERROR" {
		return "", "", false, nil
	}
	reason, message = "InstanceStateError", "OpenStackServer "+srv.GetName()+" is in ERROR, which CAPO does not reconcile"
	if r, _ := InstanceNotReady(srv); r != "" {
		reason = r
	}
	return reason, message, true, nil
}

// InstanceNotReady is the reason and message of an OpenStackServer's InstanceReady condition
// (CAPO's, in Cluster API's v1beta1 form), when it is not true.
func InstanceNotReady(srv *unstructured.Unstructured) (reason, message string) {
	conds, _, _ := unstructured.NestedSlice(srv.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "InstanceReady" || m["status"] == "True" {
			continue
		}
		reason, _ = m["reason"].(string)
		message, _ = m["message"].(string)
		return reason, message
	}
	return "", ""
}

// Unreplaced are the failures no health check will replace: what ends a wait for the machines.
func Unreplaced(failed []Failure) []Failure {
	var out []Failure
	for _, f := range failed {
		if f.RemediatedBy == "" {
			out = append(out, f)
		}
	}
	return out
}

func healthChecks(ctx context.Context, c client.Reader, namespace, cluster string) ([]clusterv1.MachineHealthCheck, error) {
	list := &clusterv1.MachineHealthCheckList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list the MachineHealthChecks of %s: %w", namespace, err)
	}
	var out []clusterv1.MachineHealthCheck
	for _, mhc := range list.Items {
		if mhc.Spec.ClusterName == cluster && mhc.DeletionTimestamp.IsZero() {
			out = append(out, mhc)
		}
	}
	return out, nil
}

// remediation decides which health check will replace a failed machine, as Cluster API does
// (core/reconcilers/machinehealthcheck, and KubeadmControlPlane for its machines).
type remediation struct {
	cluster  *clusterv1.Cluster
	machines []clusterv1.Machine
	failed   map[string]bool
	checks   []clusterv1.MachineHealthCheck
}

// by names the health check that will replace machine m ("" when none will): one whose selector
// matches the machine, once the cluster's infrastructure is ready and, for a machine that is not
// of the control plane, once the control plane is initialized (before, a health check leaves
// every worker alone); while no more of its machines have failed than it allows (past that, the
// fault is not theirs and it replaces none). A machine without a node is replaced when its node
// does not start in time, unless the check has that timeout switched off (0). The control plane's
// owner never replaces its last machine once the cluster is initialized. givenUp names a check
// that matches but is past what it allows, when no other will.
func (r remediation) by(m *clusterv1.Machine) (name, givenUp string) {
	conds := r.cluster.Status.Conditions
	if !apimeta.IsStatusConditionTrue(conds, clusterv1.ClusterInfrastructureReadyCondition) {
		return "", ""
	}
	initialized := apimeta.IsStatusConditionTrue(conds, clusterv1.ClusterControlPlaneInitializedCondition)
	if _, controlPlane := m.Labels[clusterv1.MachineControlPlaneLabel]; controlPlane {
		if initialized && r.count(func(o *clusterv1.Machine) bool { _, cp := o.Labels[clusterv1.MachineControlPlaneLabel]; return cp }) <= 1 {
			return "", ""
		}
	} else if !initialized {
		return "", ""
	}
	for i := range r.checks {
		mhc := &r.checks[i]
		selector, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
		if err != nil || selector.Empty() || !selector.Matches(labels.Set(m.Labels)) {
			continue // Cluster API refuses an empty selector too: it would select every machine
		}
		if !m.Status.NodeRef.IsDefined() && mhc.Spec.Checks.NodeStartupTimeoutSeconds != nil && *mhc.Spec.Checks.NodeStartupTimeoutSeconds == 0 {
			continue
		}
		selected := r.count(func(o *clusterv1.Machine) bool { return selector.Matches(labels.Set(o.Labels)) })
		unhealthy := r.count(func(o *clusterv1.Machine) bool { return r.failed[o.Name] && selector.Matches(labels.Set(o.Labels)) })
		if allowed(mhc, selected, unhealthy) {
			return mhc.Name, ""
		}
		givenUp = fmt.Sprintf("health check %s replaces none: %d of the %d machines it looks at failed, more than it allows (remediation.triggerIf); the fault is likely not theirs", mhc.Name, unhealthy, selected)
	}
	return "", givenUp
}

func (r remediation) count(match func(*clusterv1.Machine) bool) int {
	n := 0
	for i := range r.machines {
		if match(&r.machines[i]) {
			n++
		}
	}
	return n
}

// allowed is Cluster API's isAllowedRemediation with the failed machines as the unhealthy ones (a
// health check may count more: then it replaces fewer, never more).
func allowed(mhc *clusterv1.MachineHealthCheck, selected, unhealthy int) bool {
	trigger := mhc.Spec.Remediation.TriggerIf
	if trigger.UnhealthyInRange != "" {
		var lo, hi int
		if _, err := fmt.Sscanf(trigger.UnhealthyInRange, "[%d-%d]", &lo, &hi); err != nil {
			return false
		}
		return unhealthy >= lo && unhealthy <= hi
	}
	limit := intstr.FromString("100%")
	if trigger.UnhealthyLessThanOrEqualTo != nil {
		limit = *trigger.UnhealthyLessThanOrEqualTo
	}
	most, err := intstr.GetScaledValueFromIntOrPercent(&limit, selected, false)
	return err == nil && unhealthy <= most
}
