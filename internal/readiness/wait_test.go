package readiness_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/testenv"
)

func toUnstructured(t *testing.T, o runtime.Object, apiVersion, kind string) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u
}

// Waits with kstatus on a real API server (no controller runs): what is there is ready, what no
// controller makes ready times out naming it, a failed Job ends the wait at once.
func TestWait(t *testing.T) {
	c := testenv.Start(t, "test")
	ctx := t.Context()
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "here"}}
	if err := c.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	here := toUnstructured(t, cm, "v1", "ConfigMap")
	if err := readiness.Wait(ctx, c, []*unstructured.Unstructured{here}, time.Minute, nil); err != nil {
		t.Fatalf("a ConfigMap that exists: %v", err)
	}

	missing := here.DeepCopy()
	missing.SetName("missing")
	var reported [][]readiness.NotReady
	start := time.Now()
	err := readiness.Wait(ctx, c, []*unstructured.Unstructured{here, missing}, 5*time.Second, func(p []readiness.NotReady) { reported = append(reported, p) })
	if err == nil || !strings.Contains(err.Error(), "ConfigMap/default/missing") || !strings.Contains(err.Error(), "still not ready after 5s") {
		t.Fatalf("missing object: %v", err)
	}
	if time.Since(start) > 30*time.Second || len(reported) == 0 || len(reported[len(reported)-1]) != 1 {
		t.Errorf("reports: %v", reported)
	}

	job := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fails"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "none"}}}}}}
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
	}
	if err := c.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start = time.Now()
	err = readiness.Wait(ctx2, c, []*unstructured.Unstructured{toUnstructured(t, job, "batch/v1", "Job")}, time.Minute, nil)
	if err == nil || !strings.Contains(err.Error(), "failed: Job/default/fails") || time.Since(start) > 30*time.Second {
		t.Fatalf("failed Job: %v after %s", err, time.Since(start))
	}
}

// A Flux release applied before that cluster's Flux runs (management-cluster-init starts once
// management-flux is applied, not ready) is not ready: Flux's CRDs default its status to
// observedGeneration -1, which kstatus, the rule of Flux's own health checks, reads as in progress.
func TestAReleaseNoControllerHasSeenIsNotReady(t *testing.T) {
	c := testenv.Start(t, "test")
	ctx := t.Context()
	hr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
		"metadata": map[string]any{"namespace": "default", "name": "cluster-init"},
		"spec":     map[string]any{"interval": "30m", "chartRef": map[string]any{"kind": "OCIRepository", "name": "cluster-init"}},
	}}
	if err := c.Client.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	var reported []readiness.NotReady
	err := readiness.Wait(ctx, c, []*unstructured.Unstructured{hr}, 3*time.Second, func(p []readiness.NotReady) { reported = p })
	if err == nil || !strings.Contains(err.Error(), "HelmRelease/default/cluster-init") {
		t.Fatalf("a HelmRelease no controller has reconciled: %v", err)
	}
	if len(reported) != 1 || reported[0].Status != status.InProgressStatus {
		t.Errorf("reported %v, want it in progress", reported)
	}
}
