// Package machines is the one view of a Cluster API cluster's machines that cluster-init takes
// (the Cluster's conditions, every Machine with its role, phase, provider ID and node, and how many
// machines its control plane and MachineDeployments ask for), and the waits on it: a cluster
// settled or at rest, a machine its provider gave up on. While a machine waits for its node, its
// provider is asked to look again (lookagain.go). The progress view shows it, the pivot and day 2
// wait on it, the finish step verifies with it. Deleting clusters is internal/clusterdeletion's.
package machines

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Machine is one machine of the cluster.
type Machine struct {
	Name         string
	ControlPlane bool
	Phase        string
	ProviderID   string
	Node         string
	// Version is the Kubernetes version the machine is made for.
	Version string
	// Ready: Running, with its node, and Cluster API reports it Ready (the node healthy).
	Ready bool
	// Message is why it is not ready, when Cluster API says.
	Message string
	// Unhealthy is why a health check found the machine unhealthy (its HealthCheckSucceeded
	// condition), since UnhealthySince; "" while it is healthy or no check looks at it.
	Unhealthy      string
	UnhealthySince time.Time
	// Remediation is what its owner does about it (its OwnerRemediated condition): waiting to
	// replace it, or why it does not yet.
	Remediation string
	// CertificatesExpire is when the certificates of a control plane machine expire, as
	// KubeadmControlPlane reads them (zero when not known).
	CertificatesExpire time.Time
}

// HealthCheck is one MachineHealthCheck of the cluster, as its controller last saw it.
type HealthCheck struct {
	Name string
	// Expected and Healthy are the machines it looks at, and those it finds healthy.
	Expected, Healthy int
	// GaveUp is why it replaces no machine now (its RemediationAllowed condition is false:
	// more of them are unhealthy than it allows, the fault is likely not theirs); "" when it may.
	GaveUp string
}

// View is a cluster and its machines at one moment.
type View struct {
	Namespace, Name string
	// Found is false while the Cluster object does not exist.
	Found     bool
	Phase     string
	Available bool
	// NotTrue are the Cluster's conditions that are not true yet, formatted.
	NotTrue  []string
	Machines []Machine
	// Wanted is how many machines the control plane and the MachineDeployments ask for.
	Wanted int
	// Unknown, if set, says why Wanted is not known yet (the control plane does not exist yet).
	Unknown string
	// HealthChecks are the cluster's MachineHealthChecks.
	HealthChecks []HealthCheck
}

// Read looks at the cluster namespace/name.
func Read(ctx context.Context, c client.Reader, namespace, name string) (View, error) {
	cl := &clusterv1.Cluster{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cl)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return View{Namespace: namespace, Name: name}, nil
	}
	if err != nil {
		return View{Namespace: namespace, Name: name}, fmt.Errorf("read Cluster %s: %w", name, err)
	}
	parts := clusterParts{controlPlanes: map[string]*unstructured.Unstructured{}}
	if ref := cl.Spec.ControlPlaneRef; ref.IsDefined() {
		cp, err := external.GetObjectFromContractVersionedRef(ctx, c, ref, namespace)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return View{Namespace: namespace, Name: name}, fmt.Errorf("control plane of %s: %w", name, err)
		default:
			parts.controlPlanes[controlPlaneKey(ref.APIGroup, ref.Kind, ref.Name)] = cp
		}
	}
	ofCluster := client.MatchingLabels{clusterv1.ClusterNameLabel: name}
	if err := c.List(ctx, &parts.deployments, client.InNamespace(namespace), ofCluster); err != nil {
		return View{Namespace: namespace, Name: name}, fmt.Errorf("list the MachineDeployments of %s: %w", name, err)
	}
	if err := c.List(ctx, &parts.machines, client.InNamespace(namespace), ofCluster); err != nil {
		return View{Namespace: namespace, Name: name}, fmt.Errorf("list the Machines of %s: %w", name, err)
	}
	if err := c.List(ctx, &parts.checks, client.InNamespace(namespace), ofCluster); err != nil && !apimeta.IsNoMatchError(err) {
		return View{Namespace: namespace, Name: name}, fmt.Errorf("list the MachineHealthChecks of %s: %w", name, err)
	}
	return parts.view(cl), nil
}

// ReadNamespace looks at every cluster of the namespace, by name, with one list of each kind
// whatever their number: a look at a management cluster with a hundred clusters costs what one
// with a single cluster does, where a Read of each would cost five requests per cluster.
func ReadNamespace(ctx context.Context, c client.Reader, namespace string) (map[string]View, error) {
	clusters := &clusterv1.ClusterList{}
	if err := c.List(ctx, clusters, client.InNamespace(namespace)); err != nil {
		if apimeta.IsNoMatchError(err) {
			return map[string]View{}, nil
		}
		return nil, fmt.Errorf("list the Clusters of %s: %w", namespace, err)
	}
	parts := clusterParts{controlPlanes: map[string]*unstructured.Unstructured{}}
	if len(clusters.Items) > 0 {
		if err := c.List(ctx, &parts.deployments, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("list the MachineDeployments of %s: %w", namespace, err)
		}
		if err := c.List(ctx, &parts.machines, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("list the Machines of %s: %w", namespace, err)
		}
		if err := c.List(ctx, &parts.checks, client.InNamespace(namespace)); err != nil && !apimeta.IsNoMatchError(err) {
			return nil, fmt.Errorf("list the MachineHealthChecks of %s: %w", namespace, err)
		}
	}
	// Each kind of control plane once, listed at the API version Cluster API reads it at.
	listed := map[schema.GroupKind]bool{}
	for i := range clusters.Items {
		ref := clusters.Items[i].Spec.ControlPlaneRef
		gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
		if !ref.IsDefined() || listed[gk] {
			continue
		}
		found, err := parts.listControlPlanes(ctx, c, ref, namespace)
		if err != nil {
			return nil, err
		}
		listed[gk] = found
	}
	out := make(map[string]View, len(clusters.Items))
	for i := range clusters.Items {
		out[clusters.Items[i].Name] = parts.view(&clusters.Items[i])
	}
	return out, nil
}

// clusterParts are the objects a cluster's view is made of: its control plane, MachineDeployments
// and Machines, read for one cluster or for a whole namespace.
type clusterParts struct {
	controlPlanes map[string]*unstructured.Unstructured // by controlPlaneKey
	deployments   clusterv1.MachineDeploymentList
	machines      clusterv1.MachineList
	checks        clusterv1.MachineHealthCheckList
}

func controlPlaneKey(group, kind, name string) string { return group + "/" + kind + "/" + name }

// listControlPlanes lists the namespace's control planes of ref's kind, at the API version of the
// contract as Cluster API reads ref; found is false while ref's object does not exist (its
// version is not known from it, another cluster's reference will tell).
func (p *clusterParts) listControlPlanes(ctx context.Context, c client.Reader, ref clusterv1.ContractVersionedObjectReference, namespace string) (bool, error) {
	one, err := external.GetObjectFromContractVersionedRef(ctx, c, ref, namespace)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s %s: %w", ref.Kind, ref.Name, err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(one.GroupVersionKind().GroupVersion().WithKind(ref.Kind + "List"))
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return false, fmt.Errorf("list the %ss of %s: %w", ref.Kind, namespace, err)
	}
	for i := range list.Items {
		p.controlPlanes[controlPlaneKey(ref.APIGroup, ref.Kind, list.Items[i].GetName())] = &list.Items[i]
	}
	return true, nil
}

// view is the cluster cl as its parts show it.
func (p *clusterParts) view(cl *clusterv1.Cluster) View {
	v := View{Namespace: cl.Namespace, Name: cl.Name, Found: true, Phase: cl.Status.Phase}
	if v.Phase == "" {
		v.Phase = "Pending"
	}
	available := apimeta.FindStatusCondition(cl.Status.Conditions, clusterv1.AvailableCondition)
	v.Available = available != nil && available.Status == metav1.ConditionTrue
	for _, cond := range cl.Status.Conditions {
		if cond.Status != metav1.ConditionTrue && !transient(cond.Type) {
			msg := cond.Reason
			if cond.Message != "" {
				msg += ": " + FirstLine(cond.Message)
			}
			v.NotTrue = append(v.NotTrue, fmt.Sprintf("%s=%s (%s)", cond.Type, cond.Status, msg))
		}
	}
	// What the control plane and the MachineDeployments ask for, from their specs (their
	// statuses lag behind a change).
	if ref := cl.Spec.ControlPlaneRef; ref.IsDefined() {
		if cp, ok := p.controlPlanes[controlPlaneKey(ref.APIGroup, ref.Kind, ref.Name)]; ok {
			replicas, _, _ := unstructured.NestedInt64(cp.Object, "spec", "replicas")
			v.Wanted += int(replicas)
		} else {
			v.Unknown = fmt.Sprintf("%s %s does not exist yet", ref.Kind, ref.Name)
		}
	}
	for _, md := range p.deployments.Items {
		if md.Labels[clusterv1.ClusterNameLabel] == cl.Name && md.Spec.Replicas != nil {
			v.Wanted += int(*md.Spec.Replicas)
		}
	}
	for _, m := range p.machines.Items {
		if m.Labels[clusterv1.ClusterNameLabel] != cl.Name {
			continue
		}
		_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
		mv := Machine{Name: m.Name, ControlPlane: cp, Phase: m.Status.Phase, ProviderID: m.Spec.ProviderID, Node: m.Status.NodeRef.Name, Version: m.Spec.Version}
		ready := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition)
		mv.Ready = mv.Phase == string(clusterv1.MachinePhaseRunning) && mv.Node != "" && ready != nil && ready.Status == metav1.ConditionTrue
		if ready != nil && ready.Status != metav1.ConditionTrue && ready.Message != "" {
			// The whole message: what a machine waits for is at the bottom of Cluster API's
			// nested summary (a failed bootstrap command and its stderr, under InfrastructureReady).
			mv.Message = Flatten(ready.Message)
		}
		if hc := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineHealthCheckSucceededCondition); hc != nil && hc.Status == metav1.ConditionFalse {
			mv.Unhealthy, mv.UnhealthySince = conditionText(hc), hc.LastTransitionTime.Time
			if or := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineOwnerRemediatedCondition); or != nil && or.Status == metav1.ConditionFalse {
				mv.Remediation = conditionText(or)
			}
		}
		mv.CertificatesExpire = m.Status.CertificatesExpiryDate.Time
		v.Machines = append(v.Machines, mv)
	}
	sort.Slice(v.Machines, func(i, j int) bool { return v.Machines[i].Name < v.Machines[j].Name })
	for _, mhc := range p.checks.Items {
		if mhc.Spec.ClusterName != cl.Name || !mhc.DeletionTimestamp.IsZero() {
			continue
		}
		hc := HealthCheck{Name: mhc.Name, Expected: int(ptrValue(mhc.Status.ExpectedMachines)), Healthy: int(ptrValue(mhc.Status.CurrentHealthy))}
		if allowed := apimeta.FindStatusCondition(mhc.Status.Conditions, clusterv1.MachineHealthCheckRemediationAllowedCondition); allowed != nil && allowed.Status == metav1.ConditionFalse {
			hc.GaveUp = conditionText(allowed)
		}
		v.HealthChecks = append(v.HealthChecks, hc)
	}
	sort.Slice(v.HealthChecks, func(i, j int) bool { return v.HealthChecks[i].Name < v.HealthChecks[j].Name })
	return v
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// conditionText is a condition's reason and its message on one line.
func conditionText(c *metav1.Condition) string {
	if c.Message == "" {
		return c.Reason
	}
	return c.Reason + ": " + Flatten(c.Message)
}

// transient are the conditions that describe an operation in progress, not a missing capability.
func transient(t string) bool {
	switch t {
	case clusterv1.PausedCondition, clusterv1.ClusterRollingOutCondition, clusterv1.ClusterScalingDownCondition,
		clusterv1.ClusterScalingUpCondition, clusterv1.ClusterRemediatingCondition:
		return true
	}
	return strings.HasSuffix(t, "Deleting")
}

// Settled tells whether the cluster has the machines it asks for, every one ready; if not, it
// lists what it waits for.
func (v View) Settled() (bool, []string) {
	if !v.Found {
		return false, []string{fmt.Sprintf("Cluster %s does not exist", v.Name)}
	}
	var pending []string
	for _, m := range v.Machines {
		if !m.Ready {
			pending = append(pending, m.String())
		}
	}
	switch {
	case v.Unknown != "":
		pending = append(pending, v.Unknown)
	case len(v.Machines) != v.Wanted:
		pending = append(pending, fmt.Sprintf("%d machines wanted, %d there", v.Wanted, len(v.Machines)))
	}
	if len(pending) > 0 {
		pending = append(pending, v.GaveUp()...)
	}
	return len(pending) == 0, pending
}

// CheckNodes asks the cluster's own API (nodes reads it) for each machine's node and keeps a
// machine ready only while its node's Ready condition is true: Cluster API's Machine conditions
// follow the node with a delay, and day 2 must not say "done" while a new worker is not Ready.
func (v *View) CheckNodes(ctx context.Context, nodes client.Reader) error {
	for i := range v.Machines {
		m := &v.Machines[i]
		if !m.Ready {
			continue
		}
		n := &corev1.Node{}
		if err := nodes.Get(ctx, client.ObjectKey{Name: m.Node}, n); err != nil {
			m.Ready = false
			m.Message = fmt.Sprintf("node %s: %v", m.Node, err)
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("read node %s of machine %s: %w", m.Node, m.Name, err)
			}
			continue
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status == corev1.ConditionTrue
				if !ready {
					m.Message = fmt.Sprintf("node %s Ready=%s: %s", m.Node, c.Status, FirstLine(c.Message))
				}
			}
		}
		if !ready && m.Message == "" {
			m.Message = fmt.Sprintf("node %s has no Ready condition yet", m.Node)
		}
		m.Ready = ready
	}
	return nil
}

// ProviderIDs maps every machine to its provider ID.
func (v View) ProviderIDs() map[string]string {
	ids := map[string]string{}
	for _, m := range v.Machines {
		ids[m.Name] = m.ProviderID
	}
	return ids
}

func (m Machine) String() string {
	role := "worker"
	if m.ControlPlane {
		role = "control plane"
	}
	s := fmt.Sprintf("Machine %s (%s): %s", m.Name, role, m.Phase)
	if m.Unhealthy != "" {
		// Before the first ';': what a line-oriented view compares to print a machine again.
		s += ", unhealthy"
	}
	if m.Node != "" {
		s += ", node " + m.Node
	}
	if m.Unhealthy != "" {
		s += "; " + m.Remediating(time.Time{})
	}
	if m.Message != "" {
		s += "; " + m.Message
	}
	return s
}

// Remediating says why a health check found the machine unhealthy, since when (and how long
// before now, unless now is zero), and what its owner does about it.
func (m Machine) Remediating(now time.Time) string {
	s := "unhealthy"
	if !m.UnhealthySince.IsZero() {
		s += " since " + m.UnhealthySince.Local().Format(time.TimeOnly)
		if !now.IsZero() {
			s += fmt.Sprintf(" (%s)", now.Sub(m.UnhealthySince).Round(time.Second))
		}
	}
	s += ": " + m.Unhealthy
	if m.Remediation != "" {
		s += "; its replacement: " + m.Remediation
	}
	return s
}

// Lines describes the cluster while it comes up: its phase and the conditions not true yet, then
// every machine, then the health checks that gave up.
func (v View) Lines() []string {
	if !v.Found {
		return nil
	}
	line := fmt.Sprintf("Cluster %s: %s", v.Name, v.Phase)
	if len(v.NotTrue) > 0 {
		line += "; " + strings.Join(v.NotTrue, "; ")
	}
	out := []string{line}
	for _, m := range v.Machines {
		out = append(out, m.String())
	}
	return append(out, v.GaveUp()...)
}

// GaveUp are the health checks that replace no machine now, a line each.
func (v View) GaveUp() []string {
	var out []string
	for _, hc := range v.HealthChecks {
		if hc.GaveUp != "" {
			out = append(out, fmt.Sprintf("MachineHealthCheck %s replaces no machine: %s (%d of %d machines healthy)", hc.Name, hc.GaveUp, hc.Healthy, hc.Expected))
		}
	}
	return out
}

// CertificatesExpire is the nearest expiry of the certificates of the cluster's control plane
// machines, and the machine's name (zero when none is known).
func (v View) CertificatesExpire() (time.Time, string) {
	var at time.Time
	var of string
	for _, m := range v.Machines {
		if !m.CertificatesExpire.IsZero() && (at.IsZero() || m.CertificatesExpire.Before(at)) {
			at, of = m.CertificatesExpire, m.Name
		}
	}
	return at, of
}

// Replaced lists the machines of before whose provider ID is not the same after.
func Replaced(before, after map[string]string) []string {
	var out []string
	for name, id := range before {
		if after[name] != id {
			out = append(out, fmt.Sprintf("%s (%s -> %q)", name, id, after[name]))
		}
	}
	sort.Strings(out)
	return out
}

// flattenedLength bounds a flattened message: a few lines of a terminal.
const flattenedLength = 600

// Flatten puts a Cluster API condition message, nested "* Condition: …" lists, on one line: a
// condition and what it says are joined by a space, the items by "; ", empty items dropped.
func Flatten(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		item := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "* "))
		item = strings.TrimRight(item, ", ")
		if item == "" || item == "STDOUT:" || item == "STDERR:" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(item)
	}
	out := b.String()
	if r := []rune(out); len(r) > flattenedLength {
		out = string(r[:flattenedLength]) + " …"
	}
	return out
}

// FirstLine is the first line of a condition message, for one-line displays.
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return strings.TrimPrefix(s, "* ")
}
