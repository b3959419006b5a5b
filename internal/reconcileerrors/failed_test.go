package reconcileerrors

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"cluster-init.dev/cluster-init/internal/testenv"
)

// A server in ERROR: CAPO says so on the OpenStackMachine only, a condition False with severity
// Error and a failure message, and logs no error. Those are read; a condition that only waits is not.
func TestWhatTheInfrastructureReportsFailedIsRead(t *testing.T) {
	c := testenv.Start(t, "bootstrap")
	ctx := context.Background()
	if err := c.Client.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "cluster-init"}}}); err != nil {
		t.Fatal(err)
	}
	m := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackMachine",
		"metadata": map[string]any{"name": "management-workers-x-y", "namespace": "cluster-init"},
		"spec":     map[string]any{"flavor": "m1.large", "image": map[string]any{"filter": map[string]any{"name": "kindest-node-v1.37.0"}}},
	}}
	if err := c.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Object["status"] = map[string]any{
		"failureMessage": "instance state ERROR is unexpected",
		"conditions": []any{
			map[string]any{"type": "InstanceReady", "status": "False", "severity": "Error", "reason": "InstanceStateError", "lastTransitionTime": "2026-11-27T07:50:12Z"},
			map[string]any{"type": "APIServerIngressReady", "status": "False", "severity": "Info", "reason": "Waiting", "lastTransitionTime": "2026-11-27T07:50:12Z"},
		},
	}
	if err := c.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	// CAPO's OpenStackServer of the same name reports its instance in ERROR.
	srv := testenv.OpenStackServer("cluster-init", "management-workers-x-y")
	if err := c.Client.Create(ctx, srv); err != nil {
		t.Fatal(err)
	}
	srv.Object["status"] = map[string]any{"ready": false, "instanceState": "ERROR", "conditions": []any{
		map[string]any{"type": "InstanceReady", "status": "False", "severity": "Error", "reason": "InstanceStateError", "lastTransitionTime": "2026-11-27T07:50:12Z"},
	}}
	if err := c.Client.Status().Update(ctx, srv); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range failedNamed(ctx, c, schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: "OpenStackMachine"}, "cluster-init", "management-workers-x-y") {
		lines = append(lines, f.line)
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"OpenStackMachine management-workers-x-y: InstanceReady is False: InstanceStateError",
		"OpenStackMachine management-workers-x-y: failed: instance state ERROR is unexpected",
		"OpenStackServer management-workers-x-y: InstanceReady is False: InstanceStateError",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "APIServerIngressReady") {
		t.Errorf("a condition that only waits is reported:\n%s", got)
	}
}
