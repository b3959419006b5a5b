package cleanup

import (
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"cluster-init.dev/cluster-init/internal/testenv"
)

// Another kind cluster called "management" (its nodes carry the same label as CAPD's machines)
// is not this environment's: only the containers its clusters define are removed.
func TestOnlyTheEnvironmentsContainersAreRemoved(t *testing.T) {
	all := []Container{
		{"1", "management-control-plane-x9fsm", "management"},
		{"2", "management-workers-gqjkw-nzdpf", "management"},
		{"3", "management-lb", "management"},
		{"4", "management-control-plane", "management"}, // a kind cluster named management
		{"5", "management-worker", "management"},
		{"6", "wl1-md-abc", "wl1"},
		{"7", "other-control-plane", "other"},
	}
	owned := Owned{"management-control-plane-x9fsm": true, "management-workers-gqjkw-nzdpf": true, "management-lb": true, "wl1-md-abc": true, "other-control-plane": true}
	remove, foreign := choose(all, []string{"wl1", "management"}, owned)
	ids := func(cs []Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	if got := ids(remove); len(got) != 4 || got[0] != "1" || got[1] != "2" || got[2] != "3" || got[3] != "6" {
		t.Errorf("removed %v, want 1 2 3 6", got)
	}
	if got := ids(foreign); len(got) != 2 || got[0] != "4" || got[1] != "5" {
		t.Errorf("left alone %v, want 4 5 (7 belongs to a cluster not cleaned)", got)
	}
	if _, foreign := choose(all, []string{"management"}, nil); len(foreign) != 5 {
		t.Errorf("with nothing known, %d containers are not left alone", 5-len(foreign))
	}
}

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
	if err := RecordContainers(ctx, record, c); err != nil {
		t.Fatal(err)
	}
	if err := mergeRecord(record, Owned{"management-workers-old": true}); err != nil {
		t.Fatal(err)
	}
	owned, err := readRecord(record)
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
