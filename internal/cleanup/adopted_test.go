package cleanup

import (
	"fmt"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
)

// What a unit deletes with itself is read from Flux's inventory ids; a unit that does not prune
// deletes nothing.
func TestWhatAUnitDeletesWithItself(t *testing.T) {
	k := &kustomizev1.Kustomization{Spec: kustomizev1.KustomizationSpec{Prune: true}, Status: kustomizev1.KustomizationStatus{
		Inventory: &kustomizev1.ResourceInventory{Entries: []kustomizev1.ResourceRef{
			{ID: "_capi-system__Namespace", Version: "v1"},
			{ID: "capi-system_capi-controller-manager_apps_Deployment", Version: "v1"},
			{ID: "_clusters.cluster.x-k8s.io_apiextensions.k8s.io_CustomResourceDefinition", Version: "v1"},
			{ID: "cluster-init_workload-clusters_helm.toolkit.fluxcd.io_HelmRelease", Version: "v2"},
		}}}}
	got := inventoryOf(k)
	if fmt.Sprint(got.namespaces) != "[capi-system]" || fmt.Sprint(got.releases) != "[cluster-init/workload-clusters]" {
		t.Errorf("namespaces %v, releases %v", got.namespaces, got.releases)
	}
	k.Spec.Prune = false
	if got := inventoryOf(k); len(got.namespaces)+len(got.releases) != 0 {
		t.Errorf("a unit that does not prune deletes %v", got)
	}
}
