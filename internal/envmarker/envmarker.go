// Package envmarker owns the mark a cluster carries of the environment it serves: a ConfigMap
// that cluster-init writes into a kind bootstrap cluster it creates, an existing cluster given
// with --kubeconfig, and an adopted management cluster. A cluster marked for another environment
// is refused; a cluster without a mark was not made or taken by cluster-init.
package envmarker

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/names"
)

// The mark: a ConfigMap in kube-system, whose key "environment" names the environment.
const (
	Namespace = "kube-system"
	Name      = "cluster-init-bootstrap"
)

// Read returns the environment the cluster is marked for; found is false without a mark.
func Read(ctx context.Context, c client.Reader) (environment string, found bool, err error) {
	cm := &corev1.ConfigMap{}
	err = c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: Name}, cm)
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read ConfigMap %s/%s: %w", Namespace, Name, err)
	}
	return cm.Data["environment"], true, nil
}

// Check fails when the cluster is marked for another environment; no mark is fine (an existing
// cluster given explicitly).
func Check(ctx context.Context, c client.Reader, environment string) error {
	env, found, err := Read(ctx, c)
	if err != nil {
		return err
	}
	if found && env != environment {
		return fmt.Errorf("this cluster bootstraps environment %q, not %q", env, environment)
	}
	return nil
}

// Write marks the cluster for environment; a mark there already is left as it is (Check first).
func Write(ctx context.Context, c client.Client, environment string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name, Labels: names.Labels(false)},
		Data:       map[string]string{"environment": environment},
	}
	err := c.Create(ctx, cm)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("mark cluster as bootstrapping %s: %w", environment, err)
	}
	return nil
}
