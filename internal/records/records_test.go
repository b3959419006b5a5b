package records_test

import (
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"cluster-init.dev/cluster-init/internal/records"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// The containers are named as CAPD names them, from the clusters' Machines, and recorded so that
// a later cleanup knows them without the clusters.
func TestOwnedContainersFromTheClustersAndTheRecord(t *testing.T) {
	c := testenv.Start(t, "management").Client
	ctx := t.Context()
	for _, name := range []string{"management", "wl1"} {
		cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: name}}}
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	machine := func(cluster, name, providerID string) {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: clusterv1.MachineSpec{ClusterName: cluster, ProviderID: providerID,
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: new(string)},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: name}}}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	machine("management", "management-control-plane-x9fsm", "docker:////management-control-plane-x9fsm")
	machine("wl1", "md-0-abc", "") // not provisioned yet: named after its cluster and Machine

	record := filepath.Join(t.TempDir(), "env", "containers.json")
	if err := records.RecordContainers(ctx, record, c); err != nil {
		t.Fatal(err)
	}
	if err := records.MergeContainers(record, records.Owned{"management-workers-old": true}); err != nil {
		t.Fatal(err)
	}
	owned, err := records.ReadContainers(record)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"management-lb", "wl1-lb", "management-control-plane-x9fsm", "wl1-md-0-abc", "management-workers-old"} {
		if !owned[want] {
			t.Errorf("%s is not owned: %v", want, owned)
		}
	}
	if len(owned) != 5 {
		t.Errorf("owned %v", owned)
	}
}
