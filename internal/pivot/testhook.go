package pivot

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FailOnceAfterEnv is how the end-to-end tests, through a patch of the pivot Job in their values,
// ask the pivot to stop after its steps (a comma-separated list).
const FailOnceAfterEnv = "CLUSTER_INIT_PIVOT_FAIL_ONCE_AFTER"

// StopOnceAfter is the end-to-end tests' hook (Options.AfterStep): it stops the pivot once after
// each of steps, so that the test sees a restarted pivot resume. What it stopped after is
// remembered in a ConfigMap of its own, apart from the pivot's record.
func StopOnceAfter(c client.Client, namespace string, steps []string) func(context.Context, string) error {
	const name = "cluster-init-pivot-test-stops"
	return func(ctx context.Context, step string) error {
		if !slices.Contains(steps, step) {
			return nil
		}
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if _, stopped := cm.Data[step]; stopped {
			return nil
		}
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{step: "stopped"}}
			err = c.Create(ctx, cm)
		} else {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[step] = "stopped"
			err = c.Update(ctx, cm)
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("test hook: stopping after step %s", step)
	}
}
