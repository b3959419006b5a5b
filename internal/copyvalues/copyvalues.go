// Package copyvalues copies an environment's values, secrets and source (names.CopiedConfigMaps
// and names.CopiedSecrets: the values layers, and with a git source its credentials and the age
// key) from the bootstrap cluster into the management cluster, for the cluster-init release there. It runs in the
// management-configs Job, so that secret values never pass through a Flux object.
package copyvalues

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
)

// Run reads the objects from one cluster and applies them to the other.
func Run(ctx context.Context, from, to *kube.Cluster, namespace string) ([]string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	objs := []client.Object{ns}
	for _, name := range names.CopiedConfigMaps() {
		cm := &corev1.ConfigMap{}
		if err := from.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
			return nil, fmt.Errorf("read ConfigMap %s/%s from the %s cluster: %w", namespace, name, from.Name, err)
		}
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: copyMeta(cm.ObjectMeta), Data: cm.Data, BinaryData: cm.BinaryData})
	}
	required, optional := names.CopiedSecrets()
	for _, name := range append(required, optional...) {
		s := &corev1.Secret{}
		err := from.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)
		if apierrors.IsNotFound(err) && slices.Contains(optional, name) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read Secret %s/%s from the %s cluster: %w", namespace, name, from.Name, err)
		}
		objs = append(objs, &corev1.Secret{ObjectMeta: copyMeta(s.ObjectMeta), Type: s.Type, Data: s.Data})
	}

	var us []*unstructured.Unstructured
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		gvk, err := to.Client.GroupVersionKindFor(o)
		if err != nil {
			return nil, err
		}
		u.SetGroupVersionKind(gvk)
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		us = append(us, u)
	}
	cs, err := apply.New(to).Apply(ctx, us)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range cs.Entries {
		out = append(out, e.String())
	}
	return out, nil
}

func copyMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels}
}
