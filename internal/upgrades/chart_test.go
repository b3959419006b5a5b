package upgrades_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cluster-init.dev/cluster-init/internal/chart"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/upgrades"
)

// The cluster definitions' chart refuses a step before any object is sent, as helm-controller
// renders it (lookups answered by the cluster): the same steps as the rules, for the control
// plane and for workers left behind it.
func TestTheChartRefusesAStepBeforeAnyObjectIsSent(t *testing.T) {
	root := testenv.Checkout(t)
	c := testenv.Start(t, "management")
	ctx := t.Context()
	dir := filepath.Join(root, "charts", "capi-cluster")

	render := func(ns, asked string) error {
		values := map[string]any{"cluster": map[string]any{"name": "wl", "kubernetes_version": asked}}
		_, err := chart.RenderAgainst(dir, chart.Release{Name: "wl-cluster", Namespace: ns}, values, c.Config)
		return err
	}
	running := func(ns, controlPlane, workers string) {
		t.Helper()
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		objs := versioned("wl", controlPlane)
		objs[0].SetName("wl-control-plane")
		objs[1].SetName("wl-workers")
		_ = unstructured.SetNestedField(objs[1].Object, workers, "spec", "template", "spec", "version")
		for _, o := range objs {
			o.SetNamespace(ns)
			if err := c.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}

	if err := render("new", "v1.37.0"); err != nil {
		t.Errorf("a new cluster: %v", err)
	}
	for i, s := range versionSteps {
		if strings.Contains(s.running, "+") {
			continue // RKE2: its control plane's CRD is not served here; the rules are the same template
		}
		ns := fmt.Sprintf("step-%d", i)
		running(ns, s.running, s.running)
		rule := upgrades.Step(s.running, s.asked)
		err := render(ns, s.asked)
		switch {
		case rule == nil && err != nil:
			t.Errorf("%s -> %s: refused by the chart, allowed by the rules: %v", s.running, s.asked, err)
		case rule != nil && err == nil:
			t.Errorf("%s -> %s: rendered by the chart, refused by the rules: %v", s.running, s.asked, rule)
		case rule != nil:
			for _, part := range []string{"downgrade", "one minor at a time"} {
				if strings.Contains(rule.Error(), part) != strings.Contains(err.Error(), part) {
					t.Errorf("%s -> %s: the chart says %q, the rules %q", s.running, s.asked, err, rule)
				}
			}
			if !strings.Contains(err.Error(), "cluster.kubernetes_version: "+s.asked) {
				t.Errorf("%s -> %s: the refusal does not name the key and the version asked: %v", s.running, s.asked, err)
			}
		}
	}

	// Workers a minor behind a control plane that finished its roll: the next minor would take
	// them two at once.
	running("behind", "v1.37.0", "v1.36.3")
	err := render("behind", "v1.38.0")
	if err == nil || !strings.Contains(err.Error(), "wl-workers runs v1.36.3") {
		t.Errorf("workers at v1.36.3 asked v1.38.0: %v", err)
	}
	if err := render("behind", "v1.37.0"); err != nil {
		t.Errorf("workers at v1.36.3 catching up with their control plane: %v", err)
	}
}
