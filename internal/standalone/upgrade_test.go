package standalone

import (
	"strings"
	"testing"
)

// A standalone upgrade is refused from the state alone, before any cluster is created, unless it
// is a step the rules allow on a cluster it can derive the new machines of.
func TestAStandaloneUpgradeIsCheckedFromTheState(t *testing.T) {
	state := func(bootstrap, infra, version string, pending *Operation) *State {
		return &State{Cluster: "sa", Bootstrap: bootstrap, Infrastructure: infra, KubernetesVersion: version, Pending: pending}
	}
	for _, tc := range []struct {
		st      *State
		asked   string
		refused string
	}{
		{state("kubeadm", "capd", "v1.36.3", nil), "v1.37.0", ""},
		{state("kubeadm", "capd", "v1.36.3", nil), "v1.36.1", "a downgrade is not supported"},
		{state("kubeadm", "capd", "v1.36.3", nil), "v1.38.0", "one minor at a time"},
		{state("kubeadm", "capd", "v1.36.3", nil), "v1.37", "not a version"},
		{state("kubeadm", "capd", "v1.37.0", nil), "v1.37.0", "already runs"},
		{state("rke2", "capd", "v1.36.3", nil), "v1.37.0", "kubeadm on CAPD"},
		{state("kubeadm", "capo", "v1.36.3", nil), "v1.37.0", "kubeadm on CAPD"},
		// An interrupted upgrade to the same version goes on, whatever its control plane runs.
		{state("kubeadm", "capd", "v1.37.0", &Operation{Command: CommandUpgrade, KubernetesVersion: "v1.37.0"}), "v1.37.0", ""},
	} {
		err := checkUpgrade(tc.st, tc.asked)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s %s -> %s refused: %v", tc.st.Bootstrap, tc.st.KubernetesVersion, tc.asked, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s %s -> %s: %v, want a refusal saying %q", tc.st.Bootstrap, tc.st.KubernetesVersion, tc.asked, err, tc.refused)
		}
	}
}

func TestTheNodeImageOfAVersion(t *testing.T) {
	for image, want := range map[string]string{
		"":                                    "kindest/node:v1.37.0",
		"kindest/node:v1.36.3":                "kindest/node:v1.37.0",
		"registry.example:5000/node:v1.36.3":  "registry.example:5000/node:v1.37.0",
		"registry.example/kind/node:ours-1.0": "",
	} {
		got, err := nodeImageOf(image, "v1.37.0")
		if want == "" {
			if err == nil || !strings.Contains(err.Error(), "names no Kubernetes version") {
				t.Errorf("%q: %q, %v; want a refusal", image, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", image, got, err, want)
		}
	}
	a := templateName("sa-control-plane-0a1b2c3d", map[string]any{"customImage": "kindest/node:v1.37.0"})
	b := templateName("sa-control-plane-0a1b2c3d", map[string]any{"customImage": "kindest/node:v1.38.0"})
	if !strings.HasPrefix(a, "sa-control-plane-") || len(a) != len("sa-control-plane-0a1b2c3d") || a == b {
		t.Errorf("template names %q and %q: want sa-control-plane-<hash of the spec>", a, b)
	}
}
