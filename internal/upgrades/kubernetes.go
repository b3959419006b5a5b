// Package upgrades holds the rules of a Kubernetes upgrade, one definition for every place that
// checks a step before anything changes: the CLI's validate and upgrade plan, and the tests of the
// charts' and the admission policies' copies of them.
package upgrades

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/semver"
)

// KubeletSkew is how many minors a kubelet may be older than its API server (Kubernetes' version
// skew policy since v1.28).
const KubeletSkew = 3

// minor returns the minor of a version such as v1.37.0.
func minor(v string) (int, error) {
	// semver accepts v1.37 for v1.37.0: a Kubernetes version names its patch.
	if core, _, _ := strings.Cut(v, "+"); !semver.IsValid(v) || semver.Canonical(core) != core {
		return 0, fmt.Errorf("%q is not a version such as v1.37.0", v)
	}
	if semver.Major(v) != "v1" {
		return 0, fmt.Errorf("%q is not a Kubernetes v1 version", v)
	}
	mm := strings.TrimPrefix(semver.MajorMinor(v), "v1.")
	n, err := strconv.Atoi(mm)
	if err != nil {
		return 0, fmt.Errorf("%q is not a version such as v1.37.0", v)
	}
	return n, nil
}

// Step checks the step of a cluster's control plane from the version it runs to the one asked
// for: no downgrade (Kubernetes does not support one: etcd's storage and the API's stored versions
// only go forward), and one minor at a time (kubeadm and Cluster API's control planes upgrade from
// the previous minor only). A patch release may be skipped.
func Step(running, asked string) error {
	from, err := minor(running)
	if err != nil {
		return fmt.Errorf("the running version: %w", err)
	}
	to, err := minor(asked)
	if err != nil {
		return err
	}
	switch {
	case semver.Compare(asked, running) < 0:
		return fmt.Errorf("%s is older than %s, which the cluster runs: a downgrade is not supported; expected %s or a later patch or the next minor", asked, running, running)
	case to > from+1:
		return fmt.Errorf("%s skips v1.%d: one minor at a time, expected a v1.%d release first (the cluster runs %s)", asked, from+1, from+1, running)
	}
	return nil
}

// Workers checks the workers' version against the control plane's: never ahead (a kubelet newer
// than its API server is not supported), and at most KubeletSkew minors behind.
func Workers(controlPlane, workers string) error {
	cp, err := minor(controlPlane)
	if err != nil {
		return fmt.Errorf("the control plane's version: %w", err)
	}
	w, err := minor(workers)
	if err != nil {
		return err
	}
	switch {
	case semver.Compare(workers, controlPlane) > 0:
		return fmt.Errorf("workers at %s would be ahead of the control plane at %s: expected %s or older; upgrade the control plane first", workers, controlPlane, controlPlane)
	case cp-w > KubeletSkew:
		return fmt.Errorf("workers at %s would be %d minors behind the control plane at %s: expected v1.%d or later (kubelets may be %d minors older than their API server)", workers, cp-w, controlPlane, cp-KubeletSkew, KubeletSkew)
	}
	return nil
}
