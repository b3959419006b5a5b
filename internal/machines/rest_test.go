package machines_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// The end of a roll on a real API server: the MachineDeployment's old MachineSet, scaled to
// nothing, is what its controller deletes next, then it is being deleted; only once it is gone is
// the cluster at rest. A MachineDeployment's only MachineSet at zero replicas stays, and another
// cluster's objects are not this one's.
func TestAClusterIsAtRestOnceTheOldMachineSetsAreGone(t *testing.T) {
	c := testenv.Start(t, "test").Client
	ctx := t.Context()

	machineSet := func(name, cluster, deployment string, replicas int32) *clusterv1.MachineSet {
		t.Helper()
		ms := &clusterv1.MachineSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{"test.invalid/hold"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Name: deployment, UID: types.UID("u-" + deployment), Controller: ptr.To(true)}}},
			Spec: clusterv1.MachineSetSpec{ClusterName: cluster, Replicas: ptr.To(replicas),
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"set": name}},
				Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"set": name}},
					Spec: clusterv1.MachineSpec{ClusterName: cluster, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachineTemplate", Name: "t"}}}},
		}
		if err := c.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	removing := func() []string {
		t.Helper()
		out, err := machines.Removing(ctx, c, ns, "wl")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	machineSet("wl-workers-new", "wl", "wl-workers", 1)
	machineSet("other-workers-old", "other", "other-workers", 0)
	machineSet("other-workers-new", "other", "other-workers", 0)
	machineSet("wl-idle", "wl", "wl-idle", 0)
	if got := removing(); len(got) != 0 {
		t.Errorf("at rest, Removing = %v", got)
	}

	old := machineSet("wl-workers-old", "wl", "wl-workers", 0)
	if got := removing(); len(got) != 1 || !strings.Contains(got[0], "MachineSet wl-workers-old of MachineDeployment wl-workers is scaled to nothing") {
		t.Errorf("an old MachineSet at zero: Removing = %v", got)
	}
	if err := c.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	if got := removing(); len(got) != 1 || got[0] != "MachineSet wl-workers-old is being deleted" {
		t.Errorf("an old MachineSet being deleted: Removing = %v", got)
	}

	m := machine(t, c, "wl-workers-new-x", false)
	m.Finalizers = []string{"test.invalid/hold"}
	if err := c.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got := removing(); len(got) != 2 || got[0] != "Machine wl-workers-new-x is being deleted" {
		t.Errorf("a Machine being deleted: Removing = %v", got)
	}

	for _, o := range []client.Object{old, m} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		o.SetFinalizers(nil)
		if err := c.Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if got := removing(); len(got) != 0 {
		t.Errorf("once they are gone, Removing = %v", got)
	}
}
