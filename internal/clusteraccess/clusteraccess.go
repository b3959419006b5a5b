// Package clusteraccess finds a cluster of a management cluster by name and reads the kubeconfig
// Cluster API wrote for it: what `bootstrap kubeconfig ENV CLUSTER` gives an operator, or a
// tenant's people with their own identity (workload_clusters.tenants.<ns>.readers_group).
package clusteraccess

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Find is the Cluster named name: in namespace if it is given, else the one of that name in any
// namespace the caller may list.
func Find(ctx context.Context, c client.Reader, namespace, name string) (client.ObjectKey, error) {
	if namespace != "" {
		key := client.ObjectKey{Namespace: namespace, Name: name}
		err := c.Get(ctx, key, &clusterv1.Cluster{})
		switch {
		case apierrors.IsNotFound(err):
			return key, fmt.Errorf("no cluster %s in namespace %s", name, namespace)
		case apierrors.IsForbidden(err):
			return key, fmt.Errorf("cluster %s/%s: this identity may not read the clusters of namespace %s (a tenant's readers_group may read its own)", namespace, name, namespace)
		case err != nil:
			return key, fmt.Errorf("read cluster %s/%s: %w", namespace, name, err)
		}
		return key, nil
	}
	var list clusterv1.ClusterList
	if err := c.List(ctx, &list); err != nil {
		if apierrors.IsForbidden(err) {
			return client.ObjectKey{}, fmt.Errorf("find cluster %s: this identity may not list the clusters of every namespace: give the cluster's (--namespace, a tenant's namespace)", name)
		}
		return client.ObjectKey{}, fmt.Errorf("find cluster %s: %w", name, err)
	}
	var found []string
	var key client.ObjectKey
	for _, cl := range list.Items {
		if cl.Name == name {
			key = client.ObjectKeyFromObject(&cl)
			found = append(found, cl.Namespace+"/"+cl.Name)
		}
	}
	switch len(found) {
	case 0:
		var all []string
		for _, cl := range list.Items {
			all = append(all, cl.Namespace+"/"+cl.Name)
		}
		return key, fmt.Errorf("no cluster %s: the clusters are %s", name, orNone(all))
	case 1:
		return key, nil
	default:
		return key, fmt.Errorf("%d clusters are named %s (%s): give its namespace (--namespace)", len(found), name, strings.Join(found, ", "))
	}
}

// Kubeconfig is the admin kubeconfig of the cluster at key (its Secret <name>-kubeconfig).
func Kubeconfig(ctx context.Context, c client.Reader, key client.ObjectKey) ([]byte, error) {
	data, err := kubeconfig.FromSecret(ctx, c, key)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("cluster %s/%s has no kubeconfig yet (Secret %s-kubeconfig): its control plane is not initialized", key.Namespace, key.Name, key.Name)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("the kubeconfig of cluster %s/%s: this identity may not read it (a tenant's readers_group may read its own clusters')", key.Namespace, key.Name)
	case err != nil:
		return nil, fmt.Errorf("the kubeconfig of cluster %s/%s: %w", key.Namespace, key.Name, err)
	}
	return data, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
