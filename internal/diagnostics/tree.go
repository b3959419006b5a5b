package diagnostics

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/tree"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterTree describes every Cluster API cluster with clusterctl's own discovery (what `clusterctl
// describe cluster --show-conditions all` shows): each object of the tree with its Ready or
// Available condition, then all its conditions.
func clusterTree(ctx context.Context, c client.Client) string {
	clusters := &clusterv1.ClusterList{}
	if err := c.List(ctx, clusters); err != nil {
		return "no Cluster API clusters: " + err.Error()
	}
	var b strings.Builder
	for _, cl := range clusters.Items {
		t, err := tree.Discovery(ctx, c, cl.Namespace, cl.Name, tree.DiscoverOptions{
			ShowOtherConditions: "all", ShowMachineSets: true, ShowTemplates: true, Echo: true})
		if err != nil {
			fmt.Fprintf(&b, "Cluster %s/%s: %v\n", cl.Namespace, cl.Name, err)
			continue
		}
		writeNode(&b, t, t.GetRoot(), "")
	}
	if b.Len() == 0 {
		return "no Cluster API clusters\n"
	}
	return b.String()
}

func writeNode(b *strings.Builder, t *tree.ObjectTree, obj client.Object, indent string) {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	switch {
	case tree.IsVirtualObject(obj):
		kind = tree.GetMetaName(obj)
	case kind == "":
		// Typed objects read by the client carry no kind: their Go type names it.
		t := fmt.Sprintf("%T", obj)
		kind = t[strings.LastIndex(t, ".")+1:]
	}
	line := fmt.Sprintf("%s%s/%s", indent, kind, obj.GetName())
	if ready := tree.GetReadyCondition(obj); ready != nil {
		line += fmt.Sprintf("  Ready=%s %s", ready.Status, ready.Reason)
	} else if available := tree.GetAvailableCondition(obj); available != nil {
		line += fmt.Sprintf("  Available=%s %s", available.Status, available.Reason)
	}
	b.WriteString(line + "\n")
	writeConditions(b, indent+"    ", tree.GetConditions(obj))
	children := t.GetObjectsByParent(obj.GetUID())
	sort.SliceStable(children, func(i, j int) bool {
		if zi, zj := tree.GetZOrder(children[i]), tree.GetZOrder(children[j]); zi != zj {
			return zi > zj
		}
		return children[i].GetName() < children[j].GetName()
	})
	for _, child := range children {
		writeNode(b, t, child, indent+"  ")
	}
}

func writeConditions(b *strings.Builder, indent string, conds []metav1.Condition) {
	for _, c := range conds {
		fmt.Fprintf(b, "%s%s=%s %s %s\n", indent, c.Type, c.Status, c.Reason, strings.ReplaceAll(strings.TrimSpace(c.Message), "\n", " / "))
	}
}
