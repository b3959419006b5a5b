package bootstrap

import (
	"context"
	"fmt"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/fluxobjects"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/readiness"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/units"
)

// applyRelease applies to the followed cluster what the CLI applies itself: the environment,
// --values, the source values and the Secrets of a git source, and the build of the unit of the
// release (the cluster-init HelmRelease and its source, which Flux keeps in sync from then on).
// plan is the validated render of the context; only the release unit is built again, with the
// source. A git source must then answer the cluster's source-controller.
func applyRelease(ctx context.Context, s *session, c *kube.Cluster, plan *render.Result, src *publishedSource) error {
	release, ok := plan.Graph.ByRole(units.RoleRelease)
	if !ok {
		return fmt.Errorf("the environment's %s context has no unit of role %s: nothing would reconcile the release", plan.Graph.Context, units.RoleRelease)
	}
	// The Secrets go first: what the cluster says of them once applied is a value of the release.
	secretObjs, err := sourceSecrets(s.opts.Env, src)
	if err != nil {
		return err
	}
	secretObjs = append([]*unstructured.Unstructured{s.opts.Env.Secrets.DeepCopy()}, secretObjs...)
	// Their namespace comes with the release unit: applied with them, as the release renders it,
	// so that the second apply finds it unchanged.
	var first []*unstructured.Unstructured
	for _, o := range plan.Objects {
		if o.Unit == release.Name && o.Object.GetKind() == "Namespace" && o.Object.GetName() == names.Namespace {
			first = append(first, o.Object.DeepCopy())
		}
	}
	applier := apply.New(c)
	cs, err := applier.Apply(ctx, append(first, secretObjs...))
	if err != nil {
		return err
	}
	s.logChanges(cs)
	revision, err := secretsRevision(ctx, c, secretObjs)
	if err != nil {
		return err
	}

	opts := plan.Options
	opts.Source = src.values
	opts.Units = []string{release.Name}
	opts.SecretsRevision = revision
	res, err := s.renderer.Render(ctx, opts)
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, o := range res.Objects {
		applied := o.Object.GetKind() == "Secret" && o.Object.GetName() == names.SecretsSecret
		if (o.Unit == "" && o.Origin != render.UmbrellaChart || o.Unit == release.Name) && !applied {
			objs = append(objs, o.Object)
		}
	}
	if cs, err = applier.Apply(ctx, objs); err != nil {
		return err
	}
	s.logChanges(cs)
	if src.git == nil {
		return nil
	}
	// Nothing goes on without the repository: say now if the cluster cannot read it.
	var gitRepos []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "GitRepository" {
			gitRepos = append(gitRepos, o)
		}
	}
	return readiness.Wait(ctx, c, gitRepos, 3*time.Minute, func(pending []readiness.NotReady) {
		list := make([]string, len(pending))
		for i, p := range pending {
			list[i] = fmt.Sprintf("%s: %s", p.Object, p.Message)
		}
		s.out.Waiting("the cluster to read "+src.git.String(), list)
	})
}

// secretsRevision reads back the resource versions of the applied Secrets: they change when, and
// only when, a Secret's content does (a server-side apply that changes nothing writes nothing).
func secretsRevision(ctx context.Context, c *kube.Cluster, secrets []*unstructured.Unstructured) (string, error) {
	var parts []string
	for _, o := range secrets {
		sec := &corev1.Secret{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}, sec); err != nil {
			return "", fmt.Errorf("read back Secret %s: %w", o.GetName(), err)
		}
		parts = append(parts, sec.Name+"="+sec.ResourceVersion)
	}
	return strings.Join(parts, ","), nil
}

// reconcileRelease asks the cluster-init HelmRelease to reconcile now rather than at its next
// interval, as `flux reconcile` does, and waits until it has handled that request and is ready:
// from then on the units carry the new values.
func reconcileRelease(ctx context.Context, s *session, c *kube.Cluster) error {
	key := client.ObjectKey{Namespace: names.Namespace, Name: names.Release}
	at, err := fluxobjects.RequestReconcile(ctx, c.Client, &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, time.Now())
	if err != nil {
		return fmt.Errorf("request a reconciliation of HelmRelease %s: %w", key.Name, err)
	}
	const timeout = 10 * time.Minute
	var failed error
	err = wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		hr := &helmv2.HelmRelease{}
		if err := c.Client.Get(ctx, key, hr); err != nil {
			s.out.Waiting("the cluster-init release to take the new values", nil)
			return false, nil
		}
		st, done, err := releaseReconciled(hr, at)
		switch {
		case err != nil:
			failed = err
			return false, err
		case done:
			s.out.Log("release %s reconciled: %s", key.Name, st.Message)
			return true, nil
		}
		s.out.Waiting("the cluster-init release to take the new values", nil)
		return false, nil
	})
	switch {
	case failed != nil:
		return failed
	case err != nil:
		return fmt.Errorf("release %s did not reconcile within %s: %w", key.Name, timeout, err)
	}
	return nil
}

// releaseReconciled is the status of the release, and whether it has handled the reconciliation
// requested at `at` and is ready. Its last attempt failing is an error at once: helm-controller
// retries it, but with the same values and chart, which someone must fix. Suspended, it would not
// take the new values at all.
func releaseReconciled(hr *helmv2.HelmRelease, at string) (readiness.Status, bool, error) {
	st := readiness.Of(hr)
	if st.State == readiness.Suspended {
		return st, false, fmt.Errorf("release %s is suspended: it takes no new values until it is resumed (flux resume helmrelease -n %s %s)", hr.Name, hr.Namespace, hr.Name)
	}
	if hr.Status.LastHandledReconcileAt != at {
		return st, false, nil
	}
	switch {
	case st.State == readiness.Ready:
		return st, true, nil
	case st.State == readiness.Failed || st.Failing:
		return st, false, fmt.Errorf("release %s: %s: %s", hr.Name, st.Reason, st.Message)
	}
	return st, false, nil
}
