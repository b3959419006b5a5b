package kindcluster_test

import (
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/testenv"
)

func TestMarkerRefusesAnotherEnvironment(t *testing.T) {
	c := testenv.Start(t, "bootstrap")
	if err := kindcluster.CheckMarker(t.Context(), c, "kubeadm-capd"); err != nil {
		t.Fatalf("an unmarked cluster given explicitly is accepted: %v", err)
	}
	if err := kindcluster.WriteMarker(t.Context(), c, "kubeadm-capd"); err != nil {
		t.Fatal(err)
	}
	if err := kindcluster.WriteMarker(t.Context(), c, "kubeadm-capd"); err != nil {
		t.Fatalf("marking twice: %v", err)
	}
	if err := kindcluster.CheckMarker(t.Context(), c, "kubeadm-capd"); err != nil {
		t.Errorf("same environment: %v", err)
	}
	err := kindcluster.CheckMarker(t.Context(), c, "rke2-capd")
	if err == nil || !strings.Contains(err.Error(), `bootstraps environment "kubeadm-capd", not "rke2-capd"`) {
		t.Errorf("another environment: %v", err)
	}
}
