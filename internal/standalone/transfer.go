package standalone

import (
	"context"
	"fmt"
	"os"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/pivot"
)

// exportObjects writes the cluster's Cluster API objects into the state (clusterctl move
// --to-directory), its kubeconfig, its machine counts and machines.
func exportObjects(ctx context.Context, out Reporter, d Dir, k *Key, mc *kube.Cluster, kubeconfigPath string, st *State) error {
	view, err := machines.Read(ctx, mc.Client, st.Namespace, st.Cluster)
	if err != nil {
		return err
	}
	if !view.Found {
		return fmt.Errorf("Cluster %s/%s is not in the management cluster: nothing to export", st.Namespace, st.Cluster)
	}
	// At the end of a roll the MachineDeployment deletes its old MachineSet: one listed by the
	// move and gone when it reads it fails the export.
	if err := machines.WaitAtRest(ctx, mc.Client, st.Namespace, st.Cluster, waitInterval, 5*time.Minute, out.Waiting); err != nil {
		return err
	}
	// clusterctl refuses to export a paused Cluster; only an export or a restore killed half-way
	// leaves it paused, and this package is what runs them.
	if err := setPaused(ctx, mc, st, false); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(d.Path, ".export-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	c, err := pivot.Clusterctl(ctx)
	if err != nil {
		return err
	}
	out.Log("exporting the Cluster API objects of %s (clusterctl move --to-directory)", st.Cluster)
	if err := c.Move(ctx, clusterctl.MoveOptions{FromKubeconfig: clusterctl.Kubeconfig{Path: kubeconfigPath}, Namespace: st.Namespace, ToDirectory: tmp}); err != nil {
		return fmt.Errorf("export the objects of %s: %w", st.Cluster, err)
	}
	n, err := d.StoreObjects(k, tmp)
	if err != nil {
		return err
	}
	data, err := kubeconfig.FromSecret(ctx, mc.Client, client.ObjectKey{Namespace: st.Namespace, Name: st.Cluster})
	if err != nil {
		return fmt.Errorf("kubeconfig of %s: %w", st.Cluster, err)
	}
	if err := d.WriteKubeconfig(data); err != nil {
		return err
	}
	st.ControlPlane, st.Workers = 0, 0
	st.Machines = view.ProviderIDs()
	for _, m := range view.Machines {
		if m.ControlPlane {
			st.ControlPlane++
		} else {
			st.Workers++
		}
	}
	out.Log("exported %d objects of %s (its Secrets encrypted) to %s", n, st.Cluster, d.Path)
	return nil
}

// restoreObjects restores the cluster's objects into the temporary management cluster.
// clusterctl creates them with the Cluster paused and resumes it once every object is there: no
// controller sees part of the cluster, none creates a second one. Recorded as StepRestore, it is
// never run again while that cluster exists.
func restoreObjects(ctx context.Context, out Reporter, d Dir, k *Key, mc *kube.Cluster, kubeconfigPath string, st *State) error {
	dir, cleanup, err := d.RestoreDir(k)
	if err != nil {
		return err
	}
	defer cleanup()
	c, err := pivot.Clusterctl(ctx)
	if err != nil {
		return err
	}
	out.Log("restoring the objects of %s (clusterctl move --from-directory)", st.Cluster)
	if err := c.Move(ctx, clusterctl.MoveOptions{FromDirectory: dir, ToKubeconfig: clusterctl.Kubeconfig{Path: kubeconfigPath}}); err != nil {
		return fmt.Errorf("restore the objects of %s: %w", st.Cluster, err)
	}
	cleanup()
	list := &clusterv1.ClusterList{}
	if err := mc.Client.List(ctx, list, client.InNamespace(st.Namespace)); err != nil {
		return fmt.Errorf("list the Clusters restored: %w", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != st.Cluster {
		return fmt.Errorf("the temporary management cluster holds %d Clusters after the restore, expected exactly %s", len(list.Items), st.Cluster)
	}
	return nil
}

// setPaused sets the Cluster's spec.paused.
func setPaused(ctx context.Context, c *kube.Cluster, st *State, paused bool) error {
	cl := &clusterv1.Cluster{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: st.Namespace, Name: st.Cluster}, cl); err != nil {
		return fmt.Errorf("read Cluster %s: %w", st.Cluster, err)
	}
	if current := cl.Spec.Paused != nil && *cl.Spec.Paused; current == paused {
		return nil
	}
	patch := client.MergeFrom(cl.DeepCopy())
	cl.Spec.Paused = &paused
	if err := c.Client.Patch(ctx, cl, patch); err != nil {
		return fmt.Errorf("set Cluster %s paused=%t: %w", st.Cluster, paused, err)
	}
	return nil
}
