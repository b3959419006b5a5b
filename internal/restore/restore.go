// Package restore takes a management cluster's backup into a new management cluster of the same
// environment, made from git with its tenants held (managementstate.State.HoldTenants): the
// Cluster API objects of each tenant's namespace go back with clusterctl's from-directory
// semantics (created paused, with their certificate authorities and kubeconfigs, then unpaused),
// Cluster API takes the running clusters back without replacing a machine, and only then are the
// tenants released, so that their directories reconcile the restored clusters from git, where
// git is the truth. Each step is recorded in the management cluster (ConfigMap
// names.RestoreRecord): a restore killed and run again continues, and clusterctl creates nothing
// twice (an object that exists is kept).
package restore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/backup"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/pivot"
	"cluster-init.dev/cluster-init/internal/steps"
)

// Options say which backup goes into which cluster.
type Options struct {
	// Management is the new management cluster, self-managed, its tenants held.
	Management *kube.Cluster
	// Key is the backup's name in the store; Backup its contents, read and checked.
	Key    string
	Backup backup.Contents
	// WorkDir holds clusterctl's directories and the kubeconfig it reads for the time of the
	// restore.
	WorkDir string
	// StepTimeout bounds each wait; Interval is how often a wait looks.
	StepTimeout time.Duration
	Interval    time.Duration
	Log         func(format string, args ...any)
	// Waiting, if set, is told at each look what a wait is for and what it still waits for.
	Waiting func(what string, pending []string)
	// AfterStep, if set, runs after each step is recorded done (a test's way to kill a restore).
	AfterStep func(ctx context.Context, step string) error
	// Clusterctl, if set, replaces clusterctl's library (tests).
	Clusterctl func(ctx context.Context) (clusterctl.Client, error)
}

// The steps of a restore, in order.
const (
	StepPlan     = "plan"
	StepRestore  = "restore the clusters"
	StepTakeBack = "wait for Cluster API to take them back"
	StepRelease  = "release the tenants"
	StepGit      = "wait for git to reconcile them"
)

// Run restores the backup into the cluster, or continues the restore its record says is under
// way. It refuses to continue from another backup than the one it began with.
func Run(ctx context.Context, o Options) (Record, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Interval == 0 {
		o.Interval = 5 * time.Second
	}
	if o.StepTimeout == 0 {
		o.StepTimeout = 20 * time.Minute
	}
	if o.Clusterctl == nil {
		o.Clusterctl = pivot.Clusterctl
	}
	c := o.Management.Client
	rec, found, err := ReadRecord(ctx, c)
	if err != nil {
		return rec, err
	}
	if found && rec.Backup != o.Key {
		return rec, fmt.Errorf("this management cluster is being restored from backup %s, not %s: run the restore again with --from %s",
			rec.Backup, o.Key, rec.Backup)
	}
	if rec.Completed != nil {
		o.Log("the restore from %s completed at %s", rec.Backup, rec.Completed.UTC().Format(time.RFC3339))
		return rec, nil
	}
	rec.Backup = o.Key
	r := &restore{Options: o, rec: &rec}
	m := &steps.Machine{Record: &rec.Record, What: "restore", Log: o.Log, AfterStep: o.AfterStep,
		Save: func(ctx context.Context) error { return WriteRecord(ctx, c, rec) }}
	err = m.Run(ctx, []steps.Step{
		{Name: StepPlan, Run: r.plan},
		{Name: StepRestore, Run: r.restoreClusters},
		{Name: StepTakeBack, Run: r.takenBack},
		{Name: StepRelease, Run: r.release},
		{Name: StepGit, Run: r.reconciledFromGit},
	})
	if err != nil {
		return rec, err
	}
	now := metav1.Now()
	rec.Completed = &now
	return rec, WriteRecord(ctx, c, rec)
}

type restore struct {
	Options
	rec *Record
}

// plan decides what is restored: the namespaces the backup saved that the environment's git
// still names as tenants (their namespaces exist, made by the release), each with the machines
// the backup has. The management cluster's own namespace is the new cluster's; a namespace
// left out of the backup, or no tenant's any more, is named with the reason and left.
func (r *restore) plan(ctx context.Context) error {
	tenants, err := tenantNamespaces(ctx, r.Management)
	if err != nil {
		return err
	}
	r.rec.Namespaces, r.rec.Left, r.rec.Machines = nil, map[string]string{}, nil
	// What the lost cluster ran itself is not taken back: its machines are recorded, for
	// `cleanup --lost`, never removed here.
	if r.rec.Lost, err = BackedUpMachines(r.Backup, names.Namespace); err != nil {
		return steps.Permanent(err)
	}
	for _, ns := range r.Backup.Namespaces(false) {
		switch {
		case ns.Skipped != "":
			r.rec.Left[ns.Name] = "not in the backup: " + ns.Skipped
		case ns.Objects == 0:
			r.rec.Left[ns.Name] = "the backup holds no object of it"
		case !slices.Contains(tenants, ns.Name):
			r.rec.Left[ns.Name] = "not a tenant's namespace in the environment's git (its clusters would have nothing reconciling them)"
		default:
			r.rec.Namespaces = append(r.rec.Namespaces, ns.Name)
			machines, err := BackedUpMachines(r.Backup, ns.Name)
			if err != nil {
				return steps.Permanent(err)
			}
			r.rec.Machines = append(r.rec.Machines, machines...)
		}
	}
	for ns, why := range r.rec.Left {
		r.Log("namespace %s is not restored: %s", ns, why)
	}
	r.Log("restoring %d namespaces (%s) with %d machines", len(r.rec.Namespaces), strings.Join(r.rec.Namespaces, ", "), len(r.rec.Machines))
	return nil
}

// restoreClusters has clusterctl create each namespace's objects from its directory: paused,
// owners before what they own, an object that exists kept (a second attempt creates nothing
// twice), then the clusters unpaused.
func (r *restore) restoreClusters(ctx context.Context) error {
	cc, err := r.Clusterctl(ctx)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(r.WorkDir, "management.kubeconfig")
	if err := os.WriteFile(kubeconfig, r.Management.Kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write the kubeconfig clusterctl reads: %w", err)
	}
	defer os.Remove(kubeconfig)
	for _, ns := range r.rec.Namespaces {
		dir := filepath.Join(r.WorkDir, "clusterctl", ns)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("restore namespace %s: %w", ns, err)
		}
		for name, data := range r.Backup.FilesIn(backup.ClusterctlDir(ns)) {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				return fmt.Errorf("restore namespace %s: %w", ns, err)
			}
		}
		r.Log("restoring namespace %s with clusterctl", ns)
		err := cc.Move(ctx, clusterctl.MoveOptions{FromDirectory: dir, ToKubeconfig: clusterctl.Kubeconfig{Path: kubeconfig}})
		os.RemoveAll(dir)
		if err != nil {
			return fmt.Errorf("restore namespace %s with clusterctl: %w", ns, err)
		}
	}
	return nil
}

// Record is a restore's record in the management cluster.
type Record struct {
	steps.Record
	// Backup is the backup restored (its name in the store).
	Backup string `json:"backup"`
	// Namespaces are the namespaces restored; Left those of the backup that are not, and why.
	Namespaces []string          `json:"namespaces,omitempty"`
	Left       map[string]string `json:"left,omitempty"`
	// Machines are the backup's machines of those namespaces: the ones Cluster API must take
	// back unreplaced.
	Machines []Machine `json:"machines,omitempty"`
	// Lost are the lost management cluster's own machines, as the backup holds them: never taken
	// back, named after the restore, removed only when asked (`bootstrap cleanup ENV --lost`).
	Lost []Machine `json:"lost,omitempty"`
	// Orphans are what the restore found that nothing manages: a node of a restored cluster
	// that no machine has (see nodesWithoutMachine), a restored cluster no longer in git.
	Orphans []string `json:"orphans,omitempty"`
	// Completed is set once every step is done.
	Completed *metav1.Time `json:"completed,omitempty"`
}

// Machine is a machine a backup holds.
type Machine struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Cluster    string `json:"cluster"`
	ProviderID string `json:"providerID"`
}

// BackedUpMachines are the Cluster API Machines the backup holds of namespace ns, by name.
func BackedUpMachines(c backup.Contents, ns string) ([]Machine, error) {
	var out []Machine
	for name, data := range c.FilesIn(backup.ClusterctlDir(ns)) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return nil, fmt.Errorf("backup file %s/%s: %w", backup.ClusterctlDir(ns), name, err)
		}
		if u.GetKind() != "Machine" || !strings.HasPrefix(u.GetAPIVersion(), v1beta2.GroupVersion.Group+"/") {
			continue
		}
		id, _, _ := unstructured.NestedString(u.Object, "spec", "providerID")
		out = append(out, Machine{Namespace: ns, Name: u.GetName(), Cluster: u.GetLabels()[v1beta2.ClusterNameLabel], ProviderID: id})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
