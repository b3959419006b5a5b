package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/backupjob"
	"cluster-init.dev/cluster-init/internal/envmarker"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/managementstate"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/records"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/values"
)

// connectManagement connects to the management cluster the bootstrap wrote the kubeconfig of (or
// the one given with --kubeconfig).
func connectManagement(ctx context.Context, s *session, given existingCluster) (*bootstrapCluster, managementstate.State, error) {
	var st managementstate.State
	path := given.kubeconfig
	if path == "" {
		path = s.opts.StateDir.Environment(s.opts.Env.Name).ManagementKubeconfig()
		if _, err := os.Stat(path); err != nil {
			return nil, st, fmt.Errorf("no management cluster for environment %s (%s): bootstrap it first, or give --kubeconfig", s.opts.Env.Name, path)
		}
	}
	c, err := kube.Load("management", path, given.context)
	if err != nil {
		return nil, st, err
	}
	// An adopted cluster carries the mark of its environment: not another's values into it.
	if err := envmarker.Check(ctx, c.Client, s.opts.Env.Name); err != nil {
		return nil, st, fmt.Errorf("%s: %w", path, err)
	}
	st, found, err := managementstate.Read(ctx, c.Client)
	if err != nil {
		return nil, st, err
	}
	if !found || !st.Managed() {
		return nil, st, fmt.Errorf("%s (%s) is not a management cluster of cluster-init yet (no pivot has finished there, no adoption): finish its bootstrap with `bootstrap %s` (or `bootstrap %s --kubeconfig FILE --adopt`)", c.Config.Host, path, s.opts.Env.Name, s.opts.Env.Name)
	}
	s.out.Log("management cluster: %s (%s), %s", c.Config.Host, path, st)
	return &bootstrapCluster{cluster: c}, st, nil
}

// Apply is day 2: it re-applies the environment to its self-managed management cluster (values,
// secrets, source), has the release take the new values and follows the units until the change
// is rolled out, machines included.
func Apply(ctx context.Context, opts ApplyOptions) (*Result, error) {
	s, err := newSession(opts.Common, opts.Source)
	if err != nil {
		return &Result{}, err
	}
	defer s.close()

	f := &flow{s: s} // its cluster: the management cluster, whose units are followed
	var state managementstate.State
	return s.run(ctx, "", []phase{
		{"management cluster", func(ctx context.Context) (err error) {
			// Its state says how its release renders: self-managed (its own definitions since the
			// pivot) or adopted (none).
			f.bc, state, err = connectManagement(ctx, s, existingCluster{opts.Kubeconfig, opts.Context})
			return err
		}},
		{"validate", f.validate(func(ctx context.Context, s *session, src *publishedSource) (*render.Result, error) {
			return validateManagement(ctx, s, src, state)
		})},
		{"backup", func(ctx context.Context) error {
			if opts.NoBackup {
				s.out.Log("no backup before the change (--no-backup)")
				return nil
			}
			return backupBeforeChange(ctx, s, f.bc.cluster)
		}},
		{"source", f.source},
		{"environment", func(ctx context.Context) error {
			if err := applyRelease(ctx, s, f.bc.cluster, f.plan, f.src); err != nil {
				return err
			}
			return reconcileRelease(ctx, s, f.bc.cluster)
		}},
		{"units", f.units},
		{"machines", func(ctx context.Context) error {
			if state.Adopted {
				s.out.Log("the management cluster is adopted: its machines are not Cluster API's")
				return nil
			}
			return waitForMachines(ctx, s, f.bc, f.plan.Settings)
		}},
	})
}

// backupBeforeChange takes a backup of the management cluster before the change is applied, where
// it runs the backup unit: its Job once, waited for. A backup that fails stops the change, which
// changes nothing yet; --no-backup goes on without one.
func backupBeforeChange(ctx context.Context, s *session, c *kube.Cluster) error {
	job, err := backupjob.Start(ctx, c.Client, names.Namespace, backup.ReasonBeforeChange, time.Now())
	if errors.Is(err, backupjob.ErrNoBackupUnit) {
		s.out.Log("no backup before the change: the management cluster runs no backup unit (values backup)")
		return nil
	}
	if err != nil {
		return err
	}
	st, err := backupjob.Wait(ctx, c, names.Namespace, job, func(what string) { s.out.Waiting("the backup before the change", []string{what}) })
	if err != nil {
		return fmt.Errorf("%w; nothing was changed (give --no-backup to apply the change without a backup)", err)
	}
	if last := st.LastSuccess; last != nil {
		s.out.Log("backup before the change: %s (%d bytes)", last.Key, last.Size)
	}
	return nil
}

// waitForMachines waits until the management cluster's machines have settled, its nodes read from
// the cluster itself through the kubeconfig Cluster API wrote, and records their containers.
func waitForMachines(ctx context.Context, s *session, mc *bootstrapCluster, v values.Settings) error {
	name := v.Cluster.Name
	nodes, err := kube.ClusterAPICluster(ctx, mc.cluster.Client, names.Namespace, name)
	if err != nil {
		return fmt.Errorf("connect to cluster %s to read its nodes: %w", name, err)
	}
	view, err := machines.WaitSettled(ctx, mc.cluster.Client, nodes.Client, machines.Settling{
		Namespace: names.Namespace, Name: name, Timeout: 30 * time.Minute, Interval: pollInterval, Progress: s.out.Waiting,
	})
	if err != nil {
		return err
	}
	s.out.Log("cluster %s has its %d machines ready", name, len(view.Machines))
	// New machines have new names: cleanup must know them even if the cluster is gone.
	if v.Cluster.OnDocker() {
		if err := records.RecordContainers(ctx, s.opts.StateDir.Environment(s.opts.Env.Name).ContainersRecord(), mc.cluster.Client); err != nil {
			s.out.Log("could not record the containers of %s for cleanup: %v", name, err)
		}
	}
	return nil
}
