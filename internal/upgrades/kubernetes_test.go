package upgrades_test

import (
	"strings"
	"testing"

	"cluster-init.dev/cluster-init/internal/upgrades"
)

func TestAKubernetesStepIsOneMinorForward(t *testing.T) {
	for _, tc := range []struct {
		running, asked string
		refused        string // part of the refusal, "" if allowed
	}{
		{"v1.36.3", "v1.37.0", ""},
		{"v1.37.0", "v1.37.0", ""},
		{"v1.37.0", "v1.37.2", ""},
		{"v1.36.1", "v1.36.3", ""},
		{"v1.35.0", "v1.37.0", "skips v1.36: one minor at a time"},
		{"v1.37.2", "v1.37.0", "a downgrade is not supported"},
		{"v1.37.0", "v1.36.3", "a downgrade is not supported"},
		{"v1.37.0", "1.38.0", `"1.38.0" is not a version`},
		{"v1.36.3", "v1.37", `"v1.37" is not a version`},
		{"v1.37.0+rke2r1", "v1.38.1+rke2r1", ""},
		{"v1.37.0", "v2.0.0", "not a Kubernetes v1 version"},
		{"latest", "v1.37.0", "the running version"},
	} {
		err := upgrades.Step(tc.running, tc.asked)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s -> %s refused: %v", tc.running, tc.asked, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s -> %s: %v, want a refusal with %q", tc.running, tc.asked, err, tc.refused)
		}
	}
}

func TestWorkersAreNeverAheadOfTheControlPlane(t *testing.T) {
	for _, tc := range []struct {
		controlPlane, workers string
		refused               string
	}{
		{"v1.37.0", "v1.37.0", ""},
		{"v1.37.0", "v1.36.3", ""},
		{"v1.37.0", "v1.34.0", ""},
		{"v1.37.0", "v1.33.9", "4 minors behind"},
		{"v1.36.3", "v1.37.0", "ahead of the control plane"},
		{"v1.37.0", "v1.37.1", "ahead of the control plane"},
	} {
		err := upgrades.Workers(tc.controlPlane, tc.workers)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("control plane %s, workers %s refused: %v", tc.controlPlane, tc.workers, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("control plane %s, workers %s: %v, want a refusal with %q", tc.controlPlane, tc.workers, err, tc.refused)
		}
	}
}
