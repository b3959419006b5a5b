package progress

import (
	"fmt"
	"io"

	"github.com/fluxcd/pkg/apis/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/revisions"
	"cluster-init.dev/cluster-init/internal/termtext"
)

// WriteApplications prints each application with its summed state and every cluster it is on;
// each line escaped whole: most of it is the tenants' text.
func WriteApplications(w io.Writer, apps []appsv1alpha1.Application, revs map[string]map[string]revisions.Revision) {
	if len(apps) == 0 {
		return
	}
	fmt.Fprintln(w, "\napplications:")
	for _, a := range apps {
		state := "not placed yet"
		if c := apimeta.FindStatusCondition(a.Status.Conditions, meta.ReadyCondition); c != nil {
			state = c.Message
			if c.Status == metav1.ConditionTrue {
				state = "Ready, " + state
			}
		}
		fmt.Fprintf(w, "  %s\n", termtext.Line(fmt.Sprintf("%s/%s: %s", a.Namespace, a.Name, state)))
		for _, p := range a.Status.Placements {
			line := fmt.Sprintf("    %s: %s", p.Cluster, p.State)
			if p.Message != "" {
				line += " (" + p.Message + ")"
			}
			if rev := revs[a.Namespace+"/"+a.Name][p.Cluster].String(); rev != "" {
				line += ", commit " + rev
			}
			fmt.Fprintln(w, termtext.Line(line))
		}
	}
}
