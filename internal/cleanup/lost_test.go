package cleanup

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/restore"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// After a restore, `cleanup --lost` removes the containers of the lost cluster's own machines that
// still run, as the restore recorded them, and nothing else: not a container of the new
// management cluster that has the same name, not a same-named container of another cluster, not
// the load balancer both clusters name after the cluster. A machine of another cloud is named
// (lostservers removes OpenStack servers), and
// nothing is removed before the restore has completed, or where none ran.
func TestOnlyTheLostClustersContainersAreRemoved(t *testing.T) {
	ctx := testContext(t)
	m := testenv.Start(t, "management")
	createNamespace(t, m, names.Namespace)
	create(t, m.Client, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: names.Namespace, Name: clusterName},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: clusterName}}})
	create(t, m.Client, newMachine(clusterName, "mgmt-control-plane-new01", "docker:////mgmt-control-plane-new01", "DockerMachine"))
	host := &docker{containers: []Container{
		{"1", "mgmt-control-plane-old01", clusterName},
		{"2", "mgmt-md-0-old02", clusterName},
		{"3", "mgmt-control-plane-new01", clusterName}, // the new cluster's, named as a lost machine was
		{"4", "mgmt-lb", clusterName},                  // the new cluster's load balancer
		{"5", "mgmt-md-0-old03", "prod"},               // another cluster's container of the same name
	}}

	if _, err := RemoveLost(ctx, m.Client, host, env, logf(t)); err == nil || !strings.Contains(err.Error(), "no restore ran") {
		t.Fatalf("no restore ran: %v", err)
	}
	rec := restore.Record{Backup: "dev/20261202T100000Z-schedule.tar.gz.age", Lost: []restore.Machine{
		{Namespace: names.Namespace, Name: "mgmt-control-plane-old01", Cluster: clusterName, ProviderID: "docker:////mgmt-control-plane-old01"},
		{Namespace: names.Namespace, Name: "md-0-old02", Cluster: clusterName}, // never provisioned: its container has CAPD's name
		{Namespace: names.Namespace, Name: "mgmt-md-0-old03", Cluster: clusterName, ProviderID: "docker:////mgmt-md-0-old03"},
		{Namespace: names.Namespace, Name: "mgmt-control-plane-new01", Cluster: clusterName, ProviderID: "docker:////mgmt-control-plane-new01"},
		{Namespace: names.Namespace, Name: "mgmt-md-0-vm", Cluster: clusterName, ProviderID: "aws:///eu-west-1a/i-0b1c2d3e4f5a6b7c8"}, // neither a container nor an OpenStack server
	}}
	if err := restore.WriteRecord(ctx, m.Client, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := RemoveLost(ctx, m.Client, host, env, logf(t)); err == nil || !strings.Contains(err.Error(), "has not completed") {
		t.Fatalf("a restore under way: %v", err)
	}
	if len(host.removed) != 0 {
		t.Fatalf("refused, and removed %v", host.removed)
	}

	now := metav1.Now()
	rec.Completed = &now
	if err := restore.WriteRecord(ctx, m.Client, rec); err != nil {
		t.Fatal(err)
	}
	got, err := RemoveLost(ctx, m.Client, host, env, logf(t))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(host.removed) != "[mgmt-control-plane-old01 mgmt-md-0-old02]" || fmt.Sprint(got.Removed) != fmt.Sprint(host.removed) {
		t.Errorf("removed %v (reported %v)", host.removed, got.Removed)
	}
	if fmt.Sprint(got.Kept) != "[mgmt-control-plane-new01]" {
		t.Errorf("kept %v", got.Kept)
	}
	if len(got.Elsewhere) != 1 || got.Elsewhere[0].Name != "mgmt-md-0-vm" {
		t.Errorf("at a cloud: %v", got.Elsewhere)
	}

	// Run again, nothing of the lost cluster is left: nothing more goes.
	again, err := RemoveLost(ctx, m.Client, host, env, logf(t))
	if err != nil || len(again.Removed) != 0 || len(host.removed) != 2 {
		t.Errorf("run again: removed %v, host removed %v, %v", again.Removed, host.removed, err)
	}
}
