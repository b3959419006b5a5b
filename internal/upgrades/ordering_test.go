package upgrades_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"cluster-init.dev/cluster-init/internal/testenv"
)

// Workers roll after their control plane because Cluster API holds a MachineSet's new machines
// while the control plane is provisioning or upgrading, and refuses one whose version is ahead of
// it (MachineSet preflight checks: ControlPlaneIsStable, KubernetesVersionSkew,
// KubeadmVersionSkew). One release can then change both at once (docs/upgrades.md); this holds
// the feature gate of the vendored core provider on, and no MachineDeployment may skip the checks.
func TestTheWorkersWaitForTheirControlPlane(t *testing.T) {
	root := testenv.Checkout(t)
	core, err := os.ReadFile(filepath.Join(root, "kustomize-components/capi/upstream/core-cluster-api.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	gates := regexp.MustCompile(`--feature-gates=\S*`).FindAll(core, -1)
	if len(gates) != 1 || !regexp.MustCompile(`[=,]MachineSetPreflightChecks=true(,|$)`).Match(gates[0]) {
		t.Fatalf("the core provider's feature gates are %q: expected MachineSetPreflightChecks=true", gates)
	}
	if regexp.MustCompile(`--machineset-preflight-checks`).Match(core) {
		t.Error("the core provider's arguments choose the preflight checks: expected all of them (the default)")
	}
	chart, err := os.ReadFile(filepath.Join(root, "charts/capi-cluster/templates/machinedeployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`skip-preflight-checks`).Match(chart) {
		t.Error("the workers' MachineDeployment skips Cluster API's preflight checks")
	}
}
