// Package records keeps, in the state directory, what a bootstrap created that cleanup must find
// again when the clusters cannot say it any more: the management kubeconfig (written once the
// cluster was self-managed), the containers of the environment's clusters, the mark of an adopted
// management cluster, and the mark of a cluster taken back into kind to be deleted there.
// Bootstrap writes them, cleanup reads and forgets them; neither imports the other for it.
package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/atomicfile"
	"cluster-init.dev/cluster-init/internal/statedir"
)

// Environment are the record files of one environment.
type Environment struct {
	// Kubeconfig is the management kubeconfig: removed with the cluster, so that a new bootstrap
	// is not refused for a cluster that is gone.
	Kubeconfig string
	// Containers lists the containers of its clusters (RecordContainers): what is removed
	// directly when the clusters cannot say it any more.
	Containers string
	// Adopted marks an adopted management cluster: it stays, only what cluster-init installed goes.
	Adopted string
	// TakenBack marks a cluster moved into a kind cluster to be deleted there.
	TakenBack string
	// Restore marks a restore begun (its backup): cleaned up, there is none to continue.
	Restore string
}

// Of are the records of environment env in the state directory dir.
func Of(dir statedir.Dir, env string) Environment {
	e := dir.Environment(env)
	return Environment{Kubeconfig: e.ManagementKubeconfig(), Containers: e.ContainersRecord(), Adopted: e.AdoptedRecord(), TakenBack: e.TakenBackRecord(),
		Restore: e.RestoreRecord()}
}

// Forget removes the records, logging each file removed.
func (e Environment) Forget(log func(string, ...any)) error {
	for _, path := range []string{e.Kubeconfig, e.Containers, e.Adopted, e.TakenBack, e.Restore} {
		if err := os.Remove(path); err == nil {
			log("removed %s", path)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
	}
	return nil
}

// Owned is the set of container names that belong to the clusters of one environment.
type Owned map[string]bool

// MachineContainer is the name CAPD gives a machine's container: the Machine's name, prefixed
// by its cluster's when it does not start with it (CAPD's docker.MachineContainerName).
func MachineContainer(cluster, machine string) string {
	if strings.HasPrefix(machine, cluster) {
		return machine
	}
	return cluster + "-" + machine
}

// OwnedContainers are the containers of the clusters defined in c: each Machine's, and each
// Cluster's load balancer (<cluster>-lb).
func OwnedContainers(ctx context.Context, c client.Reader) (Owned, error) {
	owned := Owned{}
	clusters := &clusterv1.ClusterList{}
	if err := c.List(ctx, clusters); err != nil {
		return nil, fmt.Errorf("list Clusters: %w", err)
	}
	for _, cl := range clusters.Items {
		owned[cl.Name+"-lb"] = true
	}
	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list Machines: %w", err)
	}
	for _, m := range list.Items {
		owned[MachineContainer(m.Spec.ClusterName, m.Name)] = true
		if id, ok := strings.CutPrefix(m.Spec.ProviderID, "docker:////"); ok && id != "" {
			owned[id] = true
		}
	}
	return owned, nil
}

// RecordContainers adds the containers of the clusters c defines to the record at path, so that a cleanup that cannot
// reach the clusters any more still knows their containers.
func RecordContainers(ctx context.Context, path string, c client.Reader) error {
	owned, err := OwnedContainers(ctx, c)
	if err != nil {
		return err
	}
	return MergeContainers(path, owned)
}

// ReadContainers reads the record of containers at path; none if there is no record.
func ReadContainers(path string) (Owned, error) {
	owned := Owned{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return owned, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	if err := json.Unmarshal(data, &names); err != nil {
		return nil, fmt.Errorf("%s: not a list of container names: %w", path, err)
	}
	for _, n := range names {
		owned[n] = true
	}
	return owned, nil
}

// MergeContainers adds more to the record at path.
func MergeContainers(path string, more Owned) error {
	owned, err := ReadContainers(path)
	if err != nil {
		return err
	}
	for n := range more {
		owned[n] = true
	}
	names := make([]string, 0, len(owned))
	for n := range owned {
		names = append(names, n)
	}
	sort.Strings(names)
	data, err := json.Marshal(names)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}
