package kindcluster

import (
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/envmarker"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// A kind cluster is cluster-init's to delete when its marker names the environment, or, without a
// marker, when this state directory recorded its creation for the environment and that creation
// never finished. A cluster of the same name that cluster-init did not create is not.
func TestAKindClusterIsOwnedByItsMarkerOrAnInterruptedCreation(t *testing.T) {
	ctx := t.Context()
	c := testenv.Start(t, "kind")
	m := New(t.TempDir(), func(string) {})
	const name, env = "cluster-init-bootstrap", "kubeadm-capd"

	if err := m.Owns(ctx, c, name, env); err == nil || !strings.Contains(err.Error(), "was not created by cluster-init") {
		t.Errorf("no marker, no record: %v", err)
	}
	if err := m.writeRecord(name, record{Environment: "rke2-capd"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Owns(ctx, c, name, env); err == nil {
		t.Error("no marker, a record of another environment's creation: owned")
	}
	if err := m.writeRecord(name, record{Environment: env, Complete: true}); err != nil {
		t.Fatal(err)
	}
	if err := m.Owns(ctx, c, name, env); err == nil {
		t.Error("no marker, a record of a creation that finished (its marker since removed by someone): owned")
	}
	if err := m.writeRecord(name, record{Environment: env}); err != nil {
		t.Fatal(err)
	}
	if err := m.Owns(ctx, c, name, env); err != nil {
		t.Errorf("no marker, its creation for %s interrupted: %v", env, err)
	}

	if err := envmarker.Write(ctx, c.Client, "rke2-capd"); err != nil {
		t.Fatal(err)
	}
	if err := m.Owns(ctx, c, name, env); err == nil || !strings.Contains(err.Error(), `bootstraps environment "rke2-capd"`) {
		t.Errorf("marked for another environment: %v", err)
	}
	other := testenv.Start(t, "kind-marked")
	if err := envmarker.Write(ctx, other.Client, env); err != nil {
		t.Fatal(err)
	}
	if err := New(t.TempDir(), func(string) {}).Owns(ctx, other, name, env); err != nil {
		t.Errorf("marked for %s, no record here: %v", env, err)
	}
}
