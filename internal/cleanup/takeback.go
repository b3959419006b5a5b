package cleanup

import (
	"context"
	"fmt"
	"os"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/fluxobjects"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/pivot"
	"cluster-init.dev/cluster-init/internal/records"
)

// takeBack is the cleanup of a self-managed management cluster whose machines are not containers
// of this host: a kind cluster of the environment left from its bootstrap goes first (with the
// Cluster, should it still be defined there: then nothing is left to take back), then the
// cluster is taken back and deleted (takeBackAndDelete).
func (c *cleaner) takeBack(ctx context.Context, m *kube.Cluster) error {
	deleted, err := c.deleteKindCluster(ctx, m)
	if err != nil {
		return err
	}
	if deleted {
		c.log("Cluster %s is deleted, and nothing its provider made is left", c.t.Cluster)
		return c.rec.Forget(c.log)
	}
	return takeBackAndDelete(ctx, c.kind, m, c.t, c.rec, c.log)
}

// takeBackAndDelete deletes a self-managed management cluster whose machines are not containers of this
// host (OpenStack): it cannot delete itself (its providers run on the machines they would
// delete), so it is taken back, as clusterctl's documentation does it, into a kind cluster with
// the same providers (bootstrap.TakeBack), and deleted there through Cluster API; its providers
// remove every machine and what they made for them (servers, ports, floating IPs, security
// groups, network). Interrupted, a cleanup run again finds the cluster where it was left.
func takeBackAndDelete(ctx context.Context, kind KindClusters, m *kube.Cluster, t Target, rec records.Environment, log func(string, ...any)) error {
	key := client.ObjectKey{Namespace: t.Namespace, Name: t.Cluster}
	err := m.Client.Get(ctx, key, &clusterv1.Cluster{})
	if _, statErr := os.Stat(rec.TakenBack); statErr == nil && err != nil {
		// An earlier cleanup moved the cluster into the kind cluster, which deleted it (the kind
		// cluster was looked at before): the management cluster, gone with its machines or
		// emptied by the move, records nothing more.
		log("Cluster %s was taken back into kind cluster %s and deleted there by an earlier cleanup (the management cluster: %v)", t.Cluster, t.Kind, err)
		return rec.Forget(log)
	}
	if err != nil {
		return fmt.Errorf("read Cluster %s in the management cluster %s: %w", key, m.Config.Host, err)
	}
	log("the machines of %s are not containers of this host, and a cluster cannot delete itself: taking it back into kind cluster %s, to delete it there", t.Cluster, t.Kind)
	// Nothing comes back from git from here on: not the workload clusters deleted next, not the
	// definitions the move takes away.
	if err := suspendSources(ctx, m, log); err != nil {
		return err
	}
	if err := suspendAll(ctx, m, t.Namespace, log); err != nil {
		return err
	}
	resume := fmt.Sprintf("the management cluster's units are suspended: run cleanup again, or resume them with `flux resume kustomization --all -n %s` and `flux resume helmrelease --all -n %s` to keep the cluster", t.Namespace, t.Namespace)
	// Their machines are not this host's either: only Cluster API can remove them, and the
	// management cluster is their only record.
	if _, err := deleteWorkloadClusters(ctx, m, t, log); err != nil {
		return fmt.Errorf("delete the workload clusters through the management cluster's Cluster API: %w; nothing was moved, %s", err, resume)
	}
	temporary, err := t.takeBack(ctx)
	if err != nil {
		return fmt.Errorf("make kind cluster %s to take %s back into: %w; nothing was moved, %s", t.Kind, t.Cluster, err, resume)
	}
	work, err := os.MkdirTemp("", "cluster-init-takeback-")
	if err != nil {
		return fmt.Errorf("a directory for the kubeconfigs of the move: %w", err)
	}
	defer os.RemoveAll(work)
	if err := os.WriteFile(rec.TakenBack, []byte(t.Kind+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the take-back: %w", err)
	}
	log("moving the definitions of %s from the management cluster into kind cluster %s (clusterctl move)", t.Cluster, t.Kind)
	if err := pivot.Move(ctx, m, temporary, t.Namespace, work); err != nil {
		return fmt.Errorf("%w; run cleanup again: it goes on with kind cluster %s", err, t.Kind)
	}
	if err := pivot.Wake(ctx, temporary.Client, t.Namespace); err != nil {
		return fmt.Errorf("%w; run cleanup again: it goes on with kind cluster %s", err, t.Kind)
	}
	if err := deleteCluster(ctx, temporary, t, log); err != nil {
		left, lerr := recordedResources(ctx, temporary.Client, t.Namespace, t.Cluster)
		return fmt.Errorf("cluster %s/%s was not deleted through Cluster API: %v; its provider recorded what it created (%s): kind cluster %s is kept, the only record of it. Run cleanup again once the provider can reach its infrastructure", t.Namespace, t.Cluster, err, describeLeft(left, lerr), t.Kind)
	}
	log("Cluster %s is deleted, and nothing its provider made is left", t.Cluster)
	log("deleting kind cluster %s", t.Kind)
	if err := kind.Delete(t.Kind); err != nil {
		return fmt.Errorf("delete kind cluster %s: %w", t.Kind, err)
	}
	return rec.Forget(log)
}

// suspendAll suspends every Kustomization and HelmRelease of the namespace: once the move has
// taken the definitions away, nothing in the management cluster applies them again.
func suspendAll(ctx context.Context, m *kube.Cluster, namespace string, log func(string, ...any)) error {
	suspended, err := fluxobjects.SuspendAll(ctx, m.Client, namespace)
	if err != nil {
		return err
	}
	log("suspended the management cluster's units: %d Kustomizations, %d releases", len(suspended.Kustomizations), len(suspended.HelmReleases))
	return nil
}
