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

// A running OpenStack cluster keeps its endpoint: a commit that switches its API load balancer
// on or off is refused naming the key, and one made before with three control plane machines
// and no load balancer goes on as it is; a new one with three needs one.
func TestTheChartKeepsARunningOpenStackClustersEndpoint(t *testing.T) {
	root := testenv.Checkout(t)
	c := testenv.Start(t, "management")
	ctx := t.Context()
	dir := filepath.Join(root, "charts", "capi-cluster")
	render := func(ns string, replicas int64, lb bool) error {
		values := map[string]any{"cluster": map[string]any{"name": "wl", "providers": map[string]any{"infrastructure": "capo"},
			"control_plane": map[string]any{"replicas": replicas, "flavor": "m1.large"}, "workers": map[string]any{"flavor": "m1.large"},
			"capo": map[string]any{"image_name": "img", "external_network_id": "net", "ssh_key_name": "key", "api_server_load_balancer": map[string]any{"enabled": lb}}},
			"credentials": map[string]any{"openstack": map[string]any{"clouds_yaml": "clouds: {}"}}}
		_, err := chart.RenderAgainst(dir, chart.Release{Name: "wl-cluster", Namespace: ns}, values, c.Config)
		return err
	}
	running := func(ns string, lb bool) {
		t.Helper()
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		spec := map[string]any{"identityRef": map[string]any{"name": "wl-cloud-config", "cloudName": "openstack"}}
		if lb {
			spec["apiServerLoadBalancer"] = map[string]any{"enabled": true}
		}
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackCluster",
			"metadata": map[string]any{"name": "wl", "namespace": ns}, "spec": spec}}
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := render("new", 3, false); err == nil || !strings.Contains(err.Error(), "cluster.control_plane.replicas: 3 control plane machines on capo need cluster.capo.api_server_load_balancer.enabled: true") {
		t.Errorf("a new cluster of three control plane machines without a load balancer: %v", err)
	}
	for _, tc := range []struct {
		running, asked bool
		replicas       int64
		refused        string
	}{
		{running: false, asked: false, replicas: 3},
		{running: false, asked: true, replicas: 3, refused: "cluster.capo.api_server_load_balancer.enabled: true, but cluster wl runs with false"},
		{running: true, asked: false, replicas: 1, refused: "cluster.capo.api_server_load_balancer.enabled: false, but cluster wl runs with true"},
		{running: true, asked: true, replicas: 3},
	} {
		ns := fmt.Sprintf("lb-%v-%v-%d", tc.running, tc.asked, tc.replicas)
		running(ns, tc.running)
		err := render(ns, tc.replicas, tc.asked)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("running with a load balancer %v, asked %v, %d control plane machines: refused: %v", tc.running, tc.asked, tc.replicas, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("running with a load balancer %v, asked %v: %v, want %q", tc.running, tc.asked, err, tc.refused)
		}
	}
}
