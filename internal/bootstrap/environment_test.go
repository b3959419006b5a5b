package bootstrap

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// The revision of the applied Secrets moves when, and only when, their content does.
func TestSecretsRevisionFollowsTheContent(t *testing.T) {
	c := testenv.Start(t, "bootstrap")
	ctx := t.Context()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "cluster-init"}}}
	secret := func(password string) []*unstructured.Unstructured {
		return []*unstructured.Unstructured{{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"namespace": "cluster-init", "name": "cluster-init-secrets"},
			"stringData": map[string]any{"secrets.yaml": "credentials:\n  git:\n    password: " + password + "\n"}}}}
	}
	a := apply.New(c)
	if _, err := a.Apply(ctx, []*unstructured.Unstructured{ns}); err != nil {
		t.Fatal(err)
	}
	revision := func(password string) string {
		t.Helper()
		objs := secret(password)
		if _, err := a.Apply(ctx, objs); err != nil {
			t.Fatal(err)
		}
		r, err := secretsRevision(ctx, c, objs)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first, same, changed := revision("one"), revision("one"), revision("two")
	if first != same || first == changed {
		t.Errorf("revisions %q, %q (same content), %q (changed): want equal, then different", first, same, changed)
	}
}

func release(generation, observed int64, handled string, suspend bool, conds ...metav1.Condition) *helmv2.HelmRelease {
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "cluster-init", Generation: generation}}
	hr.Spec.Suspend = suspend
	hr.Status.ObservedGeneration = observed
	hr.Status.LastHandledReconcileAt = handled
	hr.Status.Conditions = conds
	return hr
}

func readyAt(generation int64, s metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: meta.ReadyCondition, Status: s, Reason: reason, Message: reason + " message", ObservedGeneration: generation}
}

// The release has taken the new values once it handled the request and is ready at its
// generation; its last attempt failing ends the wait at once, with Flux's reason and message.
func TestReleaseReconciled(t *testing.T) {
	const request = "2026-11-21T10:00:00Z"
	for _, c := range []struct {
		name string
		hr   *helmv2.HelmRelease
		done bool
		err  string // "": none
	}{
		{"request not handled yet", release(2, 2, "earlier", false, readyAt(2, "True", helmv2.UpgradeSucceededReason)), false, ""},
		{"ready", release(2, 2, request, false, readyAt(2, "True", helmv2.UpgradeSucceededReason)), true, ""},
		{"ready for an older generation", release(3, 2, request, false, readyAt(2, "True", helmv2.UpgradeSucceededReason)), false, ""},
		{"upgrading", release(2, 1, request, false, readyAt(2, "Unknown", meta.ProgressingReason)), false, ""},
		{"waiting for a dependency", release(2, 1, request, false, readyAt(2, "False", meta.DependencyNotReadyReason)), false, ""},
		{"upgrade failed (helm-controller retries)", release(2, 1, request, false, readyAt(2, "False", helmv2.UpgradeFailedReason)), false, "release cluster-init: UpgradeFailed: UpgradeFailed message"},
		{"failed for an older generation", release(3, 1, request, false, readyAt(2, "False", helmv2.UpgradeFailedReason)), false, ""},
		{"stalled", release(2, 1, request, false, readyAt(2, "False", helmv2.InstallFailedReason), metav1.Condition{Type: meta.StalledCondition, Status: "True", Reason: "RetriesExceeded", Message: "retries exhausted"}),
			false, "release cluster-init: RetriesExceeded: retries exhausted"},
		{"suspended", release(3, 2, "earlier", true, readyAt(2, "True", helmv2.UpgradeSucceededReason)), false, "release cluster-init is suspended"},
	} {
		_, done, err := releaseReconciled(c.hr, request)
		if done != c.done || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: done %t, error %v; want done %t, error %q", c.name, done, err, c.done, c.err)
		}
	}
}

// reconcileRelease against an API server, helm-controller played by the test: a failed attempt
// ends the wait at once with its reason and message, a ready release ends it without error.
func TestReconcileReleaseEndsWithTheReleasesAnswer(t *testing.T) {
	c := testenv.Start(t, "bootstrap")
	// Well within reconcileRelease's own timeout: a wait that does not end on the answer fails.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-init"}}); err != nil {
		t.Fatal(err)
	}
	hr := &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "cluster-init"}, Spec: helmv2.HelmReleaseSpec{
		Interval: metav1.Duration{Duration: time.Hour},
		Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "./charts/cluster-init",
			SourceRef: helmv2.CrossNamespaceObjectReference{Kind: "GitRepository", Name: "cluster-init"}}},
	}}
	if err := c.Client.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	out, err := progress.New(io.Discard, progress.Plain, nil, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{out: out}
	// answer handles the next reconciliation request as helm-controller would: the outcome in the
	// Ready condition, of the generation handled; status.observedGeneration moves on success only.
	answer := func(status metav1.ConditionStatus, reason, msg string) {
		go func() {
			for ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
				got := &helmv2.HelmRelease{}
				if err := c.Client.Get(ctx, client.ObjectKeyFromObject(hr), got); err != nil {
					continue
				}
				requested := got.Annotations[meta.ReconcileRequestAnnotation]
				if requested == "" || requested == got.Status.LastHandledReconcileAt {
					continue
				}
				got.Status.LastHandledReconcileAt = requested
				if status == metav1.ConditionTrue {
					got.Status.ObservedGeneration = got.Generation
				}
				apimeta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: meta.ReadyCondition, Status: status, Reason: reason, Message: msg, ObservedGeneration: got.Generation})
				if err := c.Client.Status().Update(ctx, got); err == nil {
					return
				}
			}
		}()
	}

	answer(metav1.ConditionFalse, helmv2.UpgradeFailedReason, "values don't meet the specifications of the schema")
	err = reconcileRelease(ctx, s, c)
	if err == nil || !strings.Contains(err.Error(), "UpgradeFailed: values don't meet the specifications of the schema") {
		t.Errorf("a failed upgrade: %v", err)
	}

	answer(metav1.ConditionTrue, helmv2.UpgradeSucceededReason, "Helm upgrade succeeded")
	if err := reconcileRelease(ctx, s, c); err != nil {
		t.Errorf("a ready release: %v", err)
	}
}
