package cleanup

import (
	"fmt"
	"testing"
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
