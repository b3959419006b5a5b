// Package machines is the one view of a Cluster API cluster's machines that cluster-init takes:
// the Cluster's conditions, every Machine with its role, phase, provider ID and node, and how many
// machines its control plane and MachineDeployments ask for. The progress view shows it, the
// pivot and day 2 wait on it, the finish step verifies with it.
package machines

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
}

// Read looks at the cluster namespace/name.
func Read(ctx context.Context, c client.Reader, namespace, name string) (View, error) {
	v := View{Namespace: namespace, Name: name}
	cl := &clusterv1.Cluster{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cl)
	if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
		return v, nil
	}
	if err != nil {
		return v, fmt.Errorf("read Cluster %s: %w", name, err)
	}
	v.Found = true
	v.Phase = cl.Status.Phase
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
	if v.Wanted, v.Unknown, err = wanted(ctx, c, cl); err != nil {
		return v, err
	}

	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return v, fmt.Errorf("list the Machines of %s: %w", name, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for _, m := range list.Items {
		_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
		mv := Machine{Name: m.Name, ControlPlane: cp, Phase: m.Status.Phase, ProviderID: m.Spec.ProviderID, Node: m.Status.NodeRef.Name, Version: m.Spec.Version}
		ready := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition)
		mv.Ready = mv.Phase == string(clusterv1.MachinePhaseRunning) && mv.Node != "" && ready != nil && ready.Status == metav1.ConditionTrue
		if ready != nil && ready.Status != metav1.ConditionTrue && ready.Message != "" {
			// The whole message: what a machine waits for is at the bottom of Cluster API's
			// nested summary (a failed bootstrap command and its stderr, under InfrastructureReady).
			mv.Message = Flatten(ready.Message)
		}
		v.Machines = append(v.Machines, mv)
	}
	return v, nil
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

// wanted counts the replicas the control plane and the MachineDeployments of the cluster ask for,
// from their specs (their statuses lag behind a change), or says why it cannot yet.
func wanted(ctx context.Context, c client.Reader, cl *clusterv1.Cluster) (int, string, error) {
	n, unknown := 0, ""
	if ref := cl.Spec.ControlPlaneRef; ref.IsDefined() {
		cp, err := external.GetObjectFromContractVersionedRef(ctx, c, ref, cl.Namespace)
		switch {
		case apierrors.IsNotFound(err):
			unknown = fmt.Sprintf("%s %s does not exist yet", ref.Kind, ref.Name)
		case err != nil:
			return 0, "", fmt.Errorf("control plane of %s: %w", cl.Name, err)
		default:
			replicas, _, _ := unstructured.NestedInt64(cp.Object, "spec", "replicas")
			n += int(replicas)
		}
	}
	mds := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, mds, client.InNamespace(cl.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cl.Name}); err != nil {
		return 0, "", fmt.Errorf("list the MachineDeployments of %s: %w", cl.Name, err)
	}
	for _, md := range mds.Items {
		if md.Spec.Replicas != nil {
			n += int(*md.Spec.Replicas)
		}
	}
	return n, unknown, nil
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
	if m.Node != "" {
		s += ", node " + m.Node
	}
	if m.Message != "" {
		s += "; " + m.Message
	}
	return s
}

// Lines describes the cluster while it comes up: its phase and the conditions not true yet, then
// every machine.
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
	return out
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
