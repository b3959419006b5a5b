package cleanup

import (
	"fmt"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
)

// Units are deleted dependents first: nothing is deleted while a unit still depends on it.
func TestUnitsAreDeletedDependentsFirst(t *testing.T) {
	deps := map[string][]string{
		"cluster-init":      {},
		"environment":       {},
		"cert-manager":      {},
		"capi":              {"cert-manager"},
		"cabpk":             {"capi"},
		"capd":              {"capi"},
		"workload-clusters": {"capi", "cabpk", "capd"},
	}
	got := fmt.Sprint(dependentsFirst(deps))
	want := "[[cluster-init environment workload-clusters] [cabpk capd] [capi] [cert-manager]]"
	if got != want {
		t.Errorf("batches %s, want %s", got, want)
	}
	// A cycle still ends.
	if got := fmt.Sprint(dependentsFirst(map[string][]string{"a": {"b"}, "b": {"a"}, "c": {"a"}})); got != "[[c] [a b]]" {
		t.Errorf("with a cycle: %s", got)
	}
}

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
