// Package status reads what `bootstrap status` shows of an environment: which of this machine's
// clusters hold its units, and one look at each (its units, its tenants' workload clusters, its
// applications and the commits they run). Printing is the caller's.
package status

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	appsv1alpha1 "cluster-init.dev/cluster-init/api/apps/v1alpha1"
	"cluster-init.dev/cluster-init/internal/backupjob"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/placement"
	"cluster-init.dev/cluster-init/internal/progress"
	"cluster-init.dev/cluster-init/internal/revisions"
	"cluster-init.dev/cluster-init/internal/statedir"
)

// Look is what status shows of one cluster.
type Look struct {
	Units     progress.Observed
	Tenants   []progress.Tenant
	Apps      []appsv1alpha1.Application
	Revisions map[string]map[string]revisions.Revision // by namespace/name of the application, then cluster
	// UnitsRead is false when the units could not be read: there is no tree to show.
	UnitsRead bool
	// Backup: the backups of a management cluster that runs the backup unit.
	Backup backupjob.View
}

// LookAt reads one cluster's units, workload clusters, applications and backups, side by side:
// on a management cluster loaded with clusters coming up, each read waits, and status must stay
// quick. A part that cannot be read does not keep the others from being shown: each part read is
// in look, and err says which were not.
func LookAt(ctx context.Context, c *kube.Cluster, clusterName string) (look Look, err error) {
	var unitsErr, tenantsErr, appsErr, backupErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		if look.Units, unitsErr = (progress.Source{Cluster: c, ClusterName: clusterName, Revisions: true}).Observe(ctx); unitsErr != nil {
			unitsErr = fmt.Errorf("read the units of the %s cluster: %w", c.Name, unitsErr)
		}
	})
	wg.Go(func() {
		if look.Tenants, tenantsErr = progress.ObserveWorkloadClusters(ctx, c.Client); tenantsErr != nil {
			tenantsErr = fmt.Errorf("read the workload clusters of the %s cluster: %w", c.Name, tenantsErr)
		}
	})
	wg.Go(func() {
		apps, err := placement.List(ctx, c.Client)
		if err != nil {
			appsErr = fmt.Errorf("read the applications of the %s cluster: %w", c.Name, err)
			return
		}
		rd := revisions.NewReader(c.Client)
		revs := map[string]map[string]revisions.Revision{}
		for i := range apps {
			if revs[apps[i].Namespace+"/"+apps[i].Name], err = placement.Revisions(ctx, c.Client, rd, &apps[i]); err != nil {
				appsErr = err
				return
			}
		}
		look.Apps, look.Revisions = apps, revs
	})
	wg.Go(func() {
		if look.Backup, backupErr = backupjob.Observe(ctx, c.Client, names.Namespace); backupErr != nil {
			backupErr = fmt.Errorf("read the backups of the %s cluster: %w", c.Name, backupErr)
		}
	})
	wg.Wait()
	look.UnitsRead = unitsErr == nil
	return look, errors.Join(unitsErr, tenantsErr, appsErr, backupErr)
}

// Clusters are the clusters of this machine that hold environment env's units: its kind
// bootstrap cluster (kindName) and its management cluster, whichever exist, in that order.
func Clusters(dir statedir.Dir, env, kindName string) ([]*kube.Cluster, error) {
	var clusters []*kube.Cluster
	m := kindcluster.New(dir.KindClusters(), func(string) {})
	if ok, err := m.Exists(kindName); err != nil {
		return nil, err
	} else if ok {
		c, err := m.Connect(kindName)
		if err != nil {
			return nil, err
		}
		clusters = append(clusters, c)
	}
	path := dir.Environment(env).ManagementKubeconfig()
	if _, err := os.Stat(path); err == nil {
		c, err := kube.FromFile("management", path)
		if err != nil {
			return nil, err
		}
		clusters = append(clusters, c)
	}
	if len(clusters) == 0 {
		return nil, fmt.Errorf("no bootstrap of %s here: no kind cluster %s and no management kubeconfig %s: run `bootstrap %s` first", env, kindName, path, env)
	}
	return clusters, nil
}
