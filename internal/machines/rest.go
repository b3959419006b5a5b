package machines

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Removing lists what Cluster API is removing, or removes next, in the cluster namespace/name:
// Machines and MachineSets being deleted, and the MachineSets a MachineDeployment has scaled to
// nothing beside another one, which its controller deletes as soon as it looks (its cleanup of old
// MachineSets, the end of every roll). clusterctl move lists a cluster's objects, then reads each
// one: an object removed in between fails the move, so an export waits until this is empty.
func Removing(ctx context.Context, c client.Reader, namespace, name string) ([]string, error) {
	// By spec.clusterName, which every Machine and MachineSet has (the label is a webhook's copy).
	var out []string
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list the Machines of %s: %w", name, err)
	}
	for _, m := range machines.Items {
		if m.Spec.ClusterName == name && !m.DeletionTimestamp.IsZero() {
			out = append(out, "Machine "+m.Name+" is being deleted")
		}
	}
	sets := &clusterv1.MachineSetList{}
	if err := c.List(ctx, sets, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list the MachineSets of %s: %w", name, err)
	}
	byDeployment := map[string][]clusterv1.MachineSet{}
	for _, ms := range sets.Items {
		if ms.Spec.ClusterName != name {
			continue
		}
		if !ms.DeletionTimestamp.IsZero() {
			out = append(out, "MachineSet "+ms.Name+" is being deleted")
			continue
		}
		for _, ref := range ms.OwnerReferences {
			if ref.Kind == "MachineDeployment" && ptr.Deref(ref.Controller, false) {
				byDeployment[ref.Name] = append(byDeployment[ref.Name], ms)
			}
		}
	}
	for md, owned := range byDeployment {
		if len(owned) < 2 {
			continue // its only MachineSet stays, even at zero replicas
		}
		for _, ms := range owned {
			if ptr.Deref(ms.Spec.Replicas, 0) == 0 && ptr.Deref(ms.Status.Replicas, 0) == 0 {
				out = append(out, fmt.Sprintf("MachineSet %s of MachineDeployment %s is scaled to nothing, to be deleted", ms.Name, md))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// WaitAtRest waits until Cluster API removes nothing more in the cluster (Removing is empty),
// telling progress, if set, what it still removes.
func WaitAtRest(ctx context.Context, c client.Reader, namespace, name string, interval, timeout time.Duration, progress func(what string, pending []string)) error {
	var last []string
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		removing, err := Removing(ctx, c, namespace, name)
		if err != nil {
			last = []string{err.Error()}
			return false, nil
		}
		if len(removing) == 0 {
			return true, nil
		}
		last = removing
		if progress != nil {
			progress(fmt.Sprintf("Cluster API to finish removing the old objects of %s", name), removing)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: Cluster API still removing objects after %s: %v", name, timeout, last)
	}
	return nil
}
