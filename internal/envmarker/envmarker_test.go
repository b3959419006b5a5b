package envmarker_test

import (
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/envmarker"
	"cluster-init.dev/cluster-init/internal/testenv"
)

func TestMarkerRefusesAnotherEnvironment(t *testing.T) {
	c := testenv.Start(t, "bootstrap")
	if err := envmarker.Check(t.Context(), c.Client, "kubeadm-capd"); err != nil {
		t.Fatalf("an unmarked cluster given explicitly is accepted: %v", err)
	}
	if err := envmarker.Write(t.Context(), c.Client, "kubeadm-capd"); err != nil {
		t.Fatal(err)
	}
	if err := envmarker.Write(t.Context(), c.Client, "kubeadm-capd"); err != nil {
		t.Fatalf("marking twice: %v", err)
	}
	if err := envmarker.Check(t.Context(), c.Client, "kubeadm-capd"); err != nil {
		t.Errorf("same environment: %v", err)
	}
	err := envmarker.Check(t.Context(), c.Client, "rke2-capd")
	if err == nil || !strings.Contains(err.Error(), `bootstraps environment "kubeadm-capd", not "rke2-capd"`) {
		t.Errorf("another environment: %v", err)
	}
}
