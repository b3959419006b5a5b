package cleanup

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"cluster-init.dev/cluster-init/internal/testenv"
)

// A Cluster whose provider never reached its cloud has recorded nothing it created, and can go
// without waiting for a finalizer that never goes; once the provider records a network or a
// machine's instance, it cannot.
func TestWhatTheProviderRecordedKeepsTheBootstrapCluster(t *testing.T) {
	c := testenv.Start(t, "bootstrap").Client
	ctx := t.Context()
	cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "management"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "OpenStackCluster", Name: "management"}}}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	osc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackCluster",
		"metadata": map[string]any{"namespace": "default", "name": "management"},
		"spec":     map[string]any{"identityRef": map[string]any{"cloudName": "openstack", "name": "management-cloud-config"}},
	}}
	if err := c.Create(ctx, osc); err != nil {
		t.Fatal(err)
	}
	osc.Object["status"] = map[string]any{"ready": false, "failureDomains": map[string]any{}}
	if err := c.Status().Update(ctx, osc); err != nil {
		t.Fatal(err)
	}
	if left, err := recordedResources(ctx, c, "default", "management"); err != nil || len(left) != 0 {
		t.Fatalf("a provider that created nothing: %v %v", left, err)
	}

	osc.Object["status"] = map[string]any{"ready": false, "network": map[string]any{"id": "2f1c", "name": "k8s-clusterapi-cluster-default-management"}}
	if err := c.Status().Update(ctx, osc); err != nil {
		t.Fatal(err)
	}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "management-control-plane-a", Labels: map[string]string{clusterv1.ClusterNameLabel: "management"}},
		Spec: clusterv1.MachineSpec{ClusterName: "management", ProviderID: "openstack:///9b0e",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: new(string)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "OpenStackMachine", Name: "management-control-plane-a"}}}
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	left, err := recordedResources(ctx, c, "default", "management")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(left, "\n")
	for _, want := range []string{"OpenStackCluster management: status.network", "Machine management-control-plane-a: openstack:///9b0e"} {
		if !strings.Contains(got, want) {
			t.Errorf("recorded resources lack %q:\n%s", want, got)
		}
	}
}
