package diagnostics

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterTree describes every Cluster API cluster: its conditions, then its machines with their
// phase, provider ID, node and conditions, the way `clusterctl describe cluster` groups them.
func clusterTree(ctx context.Context, c client.Client) string {
	clusters := &clusterv1.ClusterList{}
	if err := c.List(ctx, clusters); err != nil {
		return "no Cluster API clusters: " + err.Error()
	}
	var b strings.Builder
	for _, cl := range clusters.Items {
		fmt.Fprintf(&b, "Cluster %s/%s  phase=%s\n", cl.Namespace, cl.Name, cl.Status.Phase)
		writeConditions(&b, "  ", cl.Status.Conditions)
		machines := &clusterv1.MachineList{}
		if err := c.List(ctx, machines, client.InNamespace(cl.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cl.Name}); err != nil {
			fmt.Fprintf(&b, "  machines: %v\n", err)
			continue
		}
		sort.Slice(machines.Items, func(i, j int) bool { return machines.Items[i].Name < machines.Items[j].Name })
		for _, m := range machines.Items {
			role := "worker"
			if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
				role = "control-plane"
			}
			fmt.Fprintf(&b, "  Machine %s (%s)  phase=%s providerID=%s node=%s\n", m.Name, role, m.Status.Phase, m.Spec.ProviderID, m.Status.NodeRef.Name)
			writeConditions(&b, "    ", m.Status.Conditions)
		}
	}
	if b.Len() == 0 {
		return "no Cluster API clusters\n"
	}
	return b.String()
}

func writeConditions(b *strings.Builder, indent string, conds []metav1.Condition) {
	for _, c := range conds {
		fmt.Fprintf(b, "%s%s=%s %s %s\n", indent, c.Type, c.Status, c.Reason, strings.ReplaceAll(strings.TrimSpace(c.Message), "\n", " / "))
	}
}
