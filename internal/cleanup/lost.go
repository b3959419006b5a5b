package cleanup

import (
	"context"
	"fmt"
	"sort"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/lostservers"
	"cluster-init.dev/cluster-init/internal/records"
	"cluster-init.dev/cluster-init/internal/restore"
	"cluster-init.dev/cluster-init/internal/statedir"
)

// dockerProviderID is how CAPD's provider IDs begin: the rest is the machine's container name.
const dockerProviderID = "docker:////"

// Lost is what `cleanup --lost` found of the management cluster a restore replaced.
type Lost struct {
	// Removed are the containers of its machines that were still on this host, removed.
	Removed []string
	// Kept are containers of its machines' names that the new management cluster defines (its
	// load balancer is named after the cluster, as the lost one's was): never removed.
	Kept []string
	// Cloud is what was removed at the OpenStack cloud of its servers (lostservers).
	Cloud lostservers.Result
	// Elsewhere are its machines that are neither containers of this host nor OpenStack servers:
	// their provider IDs, for whoever removes them at their provider.
	Elsewhere []restore.Machine
}

// RemoveLostOf is RemoveLost for the environment's management cluster, reached through the
// kubeconfig this machine recorded for it (the one the restore wrote).
func RemoveLostOf(ctx context.Context, host Containers, state statedir.Dir, environment string, log func(string, ...any)) (Lost, error) {
	path := records.Of(state, environment).Kubeconfig
	m, err := kube.FromFile("management", path)
	if err != nil {
		return Lost{}, fmt.Errorf("the management kubeconfig of %s (%s), which the restore wrote: %w", environment, path, err)
	}
	return RemoveLost(ctx, m.Client, host, environment, log)
}

// RemoveLost removes from this host what the lost management cluster left behind, once a restore
// replaced it: the containers of its own machines, as the restore recorded them from its backup
// (restore.Record.Lost), that still run, labelled as a node of its cluster. The new management
// cluster's containers, and those of every cluster it defines, are never removed, whatever their
// name. Its servers at an OpenStack cloud are removed there, with the ports, floating IPs and
// load-balancer members made for them (lostservers); a machine of another provider is named with
// its provider ID and left.
// Refused unless a restore into the management cluster has completed: before that, nothing is
// known to be lost.
func RemoveLost(ctx context.Context, management client.Reader, host Containers, environment string, log func(string, ...any)) (Lost, error) {
	var out Lost
	rec, found, err := restore.ReadRecord(ctx, management)
	if err != nil {
		return out, err
	}
	if !found {
		return out, fmt.Errorf("no restore ran in the management cluster of %s: nothing of it is known to be lost, nothing was removed", environment)
	}
	if rec.Completed == nil {
		return out, fmt.Errorf("the restore of %s from %s has not completed: run `bootstrap restore %s` again to its end first; nothing was removed", environment, rec.Backup, environment)
	}
	keep, err := records.OwnedContainers(ctx, management)
	if err != nil {
		return out, fmt.Errorf("read the containers of the new management cluster's clusters, which stay: %w", err)
	}
	// The containers the lost machines had, by name, each with the cluster label CAPD gave it.
	lost := map[string]string{}
	var servers []restore.Machine
	for _, m := range rec.Lost {
		name, onHost := strings.CutPrefix(m.ProviderID, dockerProviderID)
		_, isServer := lostservers.Of(m.ProviderID)
		switch {
		case m.ProviderID == "":
			name = records.MachineContainer(m.Cluster, m.Name) // never provisioned, or its ID not yet recorded
		case isServer:
			servers = append(servers, m)
			continue
		case !onHost || name == "":
			out.Elsewhere = append(out.Elsewhere, m)
			continue
		}
		lost[name] = m.Cluster
	}
	if len(servers) > 0 {
		keep, err := providerIDs(ctx, management)
		if err != nil {
			return out, err
		}
		if out.Cloud, err = lostservers.Remove(ctx, management, servers, keep, log); err != nil {
			return out, err
		}
	}
	all, err := host.Labelled(ctx)
	if err != nil {
		return out, err
	}
	var remove []Container
	for _, c := range all {
		cluster, ok := lost[c.Name]
		switch {
		case !ok || c.Cluster != cluster:
		case keep[c.Name]:
			out.Kept = append(out.Kept, c.Name)
		default:
			remove = append(remove, c)
			out.Removed = append(out.Removed, c.Name)
		}
	}
	sort.Strings(out.Kept)
	sort.Strings(out.Removed)
	for _, name := range out.Kept {
		log("keeping container %s: a machine of the new management cluster's clusters has that name", name)
	}
	for _, m := range out.Elsewhere {
		log("machine %s of the lost cluster is neither a container of this host nor an OpenStack server: remove it at its provider (provider ID %s), with what the lost cluster made around it", m.Name, m.ProviderID)
	}
	if len(remove) == 0 {
		if len(servers) > 0 {
			return out, nil
		}
		log("no container of the lost management cluster of %s is left on this host (%d machines in backup %s)", environment, len(rec.Lost), rec.Backup)
		return out, nil
	}
	log("removing %d containers of the lost management cluster: %s", len(remove), strings.Join(out.Removed, ", "))
	if err := host.Remove(ctx, remove); err != nil {
		return out, fmt.Errorf("remove the lost cluster's containers %s: %w", strings.Join(out.Removed, ", "), err)
	}
	return out, nil
}

// providerIDs are the provider IDs of every machine the new management cluster has: what is
// theirs is never removed, whatever the lost cluster's record says.
func providerIDs(ctx context.Context, management client.Reader) (map[string]bool, error) {
	list := &clusterv1.MachineList{}
	if err := management.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list the machines of the new management cluster, which stay: %w", err)
	}
	out := map[string]bool{}
	for _, m := range list.Items {
		if m.Spec.ProviderID != "" {
			out[m.Spec.ProviderID] = true
		}
	}
	return out, nil
}
