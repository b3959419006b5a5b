package upgrades_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/testenv"
	"cluster-init.dev/cluster-init/internal/upgrades"
)

// versioned are the objects whose Kubernetes version the policy holds: a control plane and the
// workers, each at version.
// versionSteps are the steps every copy of the rules is held to: allowed ones, downgrades, skipped
// minors, with and without RKE2's build suffix.
var versionSteps = []struct{ running, asked string }{
	{"v1.36.3", "v1.37.0"}, {"v1.37.0", "v1.37.2"}, {"v1.36.1", "v1.36.3"}, {"v1.37.0", "v1.37.0"},
	{"v1.35.0", "v1.37.0"}, {"v1.37.2", "v1.37.0"}, {"v1.37.0", "v1.36.3"}, {"v1.36.3", "v1.38.0"},
	{"v1.37.0+rke2r1", "v1.38.1+rke2r1"}, {"v1.37.0+rke2r1", "v1.39.0+rke2r1"},
}

func versioned(name, version string) []*unstructured.Unstructured {
	kcp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
		"metadata": map[string]any{"namespace": "default", "name": name},
		"spec": map[string]any{"replicas": int64(1), "version": version, "machineTemplate": map[string]any{"spec": map[string]any{
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": name}}}},
	}}
	md := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
		"metadata": map[string]any{"namespace": "default", "name": name},
		"spec": map[string]any{"clusterName": "wl", "replicas": int64(1),
			"selector": map[string]any{"matchLabels": map[string]any{"pool": name}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"pool": name}}, "spec": map[string]any{
				"clusterName": "wl", "version": version,
				"bootstrap":         map[string]any{"dataSecretName": "data"},
				"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": name}}}}}}
	return []*unstructured.Unstructured{kcp, md}
}

func withVersion(o *unstructured.Unstructured, version string) *unstructured.Unstructured {
	o = o.DeepCopy()
	path := []string{"spec", "version"}
	if o.GetKind() == "MachineDeployment" {
		path = []string{"spec", "template", "spec", "version"}
	}
	_ = unstructured.SetNestedField(o.Object, version, path...)
	return o
}

// The API server holds every version change of a control plane or of workers to the rules of
// internal/upgrades: the policy the capi unit installs is their copy, and this test keeps the two
// the same on every step, whatever makes the change.
func TestTheAPIServerHoldsAVersionChangeToTheRules(t *testing.T) {
	root := testenv.Checkout(t)
	res, err := render.Render(t.Context(), root, "", render.Options{Env: testenv.Environment(t, root, "kubeadm-capd"), Context: render.ContextBootstrap})
	if err != nil {
		t.Fatal(err)
	}
	var policy []*unstructured.Unstructured
	for _, o := range res.Objects {
		if o.Unit == "capi" && strings.HasPrefix(o.Object.GetKind(), "ValidatingAdmissionPolicy") {
			policy = append(policy, o.Object)
		}
	}
	if len(policy) != 2 {
		t.Fatalf("the capi unit installs %d admission objects, want the policy and its binding", len(policy))
	}
	c := testenv.Start(t, "management")
	ctx := t.Context()
	if _, err := apply.New(c).Apply(ctx, policy); err != nil {
		t.Fatal(err)
	}
	update := func(o *unstructured.Unstructured) error {
		cur := o.DeepCopy()
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
			t.Fatal(err)
		}
		o = o.DeepCopy()
		o.SetResourceVersion(cur.GetResourceVersion())
		return c.Client.Update(ctx, o, client.DryRunAll)
	}

	for i, s := range versionSteps {
		objs := versioned(fmt.Sprintf("step-%d", i), s.running)
		for _, o := range objs {
			if err := c.Client.Create(ctx, o.DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}
		if i == 0 {
			// The API server takes a new policy up within seconds: until it refuses a skip.
			if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return update(withVersion(objs[0], "v1.39.0")) != nil, nil
			}); err != nil {
				t.Fatal("the admission policy never took effect")
			}
		}
		rule := upgrades.Step(s.running, s.asked)
		for _, o := range objs {
			err := update(withVersion(o, s.asked))
			switch {
			case rule == nil && err != nil:
				t.Errorf("%s %s -> %s: refused by the API server, allowed by the rules: %v", o.GetKind(), s.running, s.asked, err)
			case rule != nil && err == nil:
				t.Errorf("%s %s -> %s: admitted by the API server, refused by the rules: %v", o.GetKind(), s.running, s.asked, rule)
			case rule != nil:
				for _, part := range []string{"downgrade", "one minor at a time"} {
					if strings.Contains(rule.Error(), part) != strings.Contains(err.Error(), part) {
						t.Errorf("%s %s -> %s: the API server says %q, the rules %q", o.GetKind(), s.running, s.asked, err, rule)
					}
				}
			}
		}
	}
	// A change of anything but the version passes, and so does a version that is no semver
	// (Cluster API's own validation answers for it).
	objs := versioned("other", "v1.37.0")
	for _, o := range objs {
		if err := c.Client.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		changed := o.DeepCopy()
		_ = unstructured.SetNestedField(changed.Object, int64(3), "spec", "replicas")
		if err := update(changed); err != nil {
			t.Errorf("%s: replicas 1 -> 3 refused: %v", o.GetKind(), err)
		}
	}
}
