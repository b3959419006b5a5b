package cleanup

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kube"
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
	// Elsewhere are its machines that are not containers of this host (a cloud's servers): their
	// provider IDs, for whoever removes them at their provider.
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
// name; a machine that is not a container of this host is named with its provider ID and left.
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
	for _, m := range rec.Lost {
		name, onHost := strings.CutPrefix(m.ProviderID, dockerProviderID)
		switch {
		case m.ProviderID == "":
			name = records.MachineContainer(m.Cluster, m.Name) // never provisioned, or its ID not yet recorded
		case !onHost || name == "":
			out.Elsewhere = append(out.Elsewhere, m)
			continue
		}
		lost[name] = m.Cluster
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
		log("machine %s of the lost cluster is not a container of this host: remove it at its provider (provider ID %s), with what the lost cluster made around it", m.Name, m.ProviderID)
	}
	if len(remove) == 0 {
		log("no container of the lost management cluster of %s is left on this host (%d machines in backup %s)", environment, len(rec.Lost), rec.Backup)
		return out, nil
	}
	log("removing %d containers of the lost management cluster: %s", len(remove), strings.Join(out.Removed, ", "))
	if err := host.Remove(ctx, remove); err != nil {
		return out, fmt.Errorf("remove the lost cluster's containers %s: %w", strings.Join(out.Removed, ", "), err)
	}
	return out, nil
}
