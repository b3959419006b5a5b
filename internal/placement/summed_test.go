package placement

import (
	"fmt"
	"strings"
	"testing"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
)

// An application not ready on thousands of clusters, or failing with Flux's long errors, keeps a
// Ready condition the API server accepts: the first clusters named, the others counted; a few
// clusters are all named, as before.
func TestTheMessageOfAnApplicationNotReadyOnManyClustersFits(t *testing.T) {
	app := &appsv1alpha1.Application{}
	placements := func(n int, msg string) []appsv1alpha1.PlacementStatus {
		out := []appsv1alpha1.PlacementStatus{{Cluster: "workload-clusters/ready", State: appsv1alpha1.StateReady}}
		for i := range n {
			out = append(out, appsv1alpha1.PlacementStatus{Cluster: fmt.Sprintf("workload-clusters/wl-%05d", i), State: appsv1alpha1.StateProgressing, Message: msg})
		}
		return out
	}

	few := summed(app, placements(2, "not reconciled yet")).Message
	if want := "ready on 1 of 3 clusters; not on: workload-clusters/wl-00000 progressing (not reconciled yet); workload-clusters/wl-00001 progressing (not reconciled yet)"; few != want {
		t.Errorf("two clusters not ready:\n got %s\nwant %s", few, want)
	}

	many := summed(app, placements(10000, "not reconciled yet")).Message
	named := strings.Count(many, " progressing (")
	if len(many) > maxConditionMessage || !strings.HasPrefix(many, "ready on 1 of 10001 clusters; not on: workload-clusters/wl-00000 progressing") ||
		!strings.HasSuffix(many, fmt.Sprintf("; and %d more (status.placements has each)", 10000-named)) || named < 400 {
		t.Errorf("10000 clusters not ready: %d bytes, %d named, ends %q", len(many), named, many[max(0, len(many)-80):])
	}

	long := summed(app, placements(3, strings.Repeat("x", maxConditionMessage))).Message
	if long != "ready on 1 of 4 clusters; not on: 3 clusters (status.placements has each)" {
		t.Errorf("messages longer than a condition's: %.200s", long)
	}
}
