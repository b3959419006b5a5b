package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"cluster-init.dev/cluster-init/internal/apply"
	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/pivot"
	"cluster-init.dev/cluster-init/internal/render"
	"cluster-init.dev/cluster-init/internal/standalone"
	"cluster-init.dev/cluster-init/internal/units"
	"cluster-init.dev/cluster-init/internal/values"
)

// standaloneValues make the release define a cluster with no management in it and no pivot.
func standaloneValues() values.Layer {
	return values.FromMap("(--standalone)", map[string]any{"pivot": false, "standalone": true})
}

// refuseStandalone refuses a bootstrap of an environment that has a standalone cluster: it would
// define that cluster a second time, with a second CA.
func refuseStandalone(opts settings) error {
	d, err := standalone.DirOf(opts.StateDir.Standalone(), opts.Env.Name)
	if err != nil {
		return nil // no state can exist under a name that is not one
	}
	if exists, err := d.Exists(); err != nil || !exists {
		return err
	}
	return fmt.Errorf("environment %s has a standalone cluster (state %s): it would be defined a second time; change it with `bootstrap scale %s`, delete it with `bootstrap delete %s`", opts.Env.Name, d.Path, opts.Env.Name, opts.Env.Name)
}

// standaloneRun is a standalone creation's hold on its state directory.
type standaloneRun struct {
	dir  standalone.Dir
	lock *standalone.Lock
	// state is the state of an interrupted creation being finished, nil for a new one.
	state *standalone.State
}

// startStandalone locks the state directory of the environment's standalone cluster and says
// whether a creation may run: a cluster that exists is refused (a second creation would define
// it again, with a second CA); an interrupted creation is finished. done: the creation had only
// its bootstrap cluster left to delete, and it is gone.
func startStandalone(s *session) (run *standaloneRun, done bool, err error) {
	if s.opts.StandaloneKey == nil {
		return nil, false, errors.New("--standalone: no age key to encrypt the state's secrets with")
	}
	d, err := standalone.DirOf(s.opts.StateDir.Standalone(), s.opts.Env.Name)
	if err != nil {
		return nil, false, err
	}
	lock, err := d.Lock("bootstrap " + s.opts.Env.Name + " --standalone")
	if err != nil {
		return nil, false, err
	}
	run = &standaloneRun{dir: d, lock: lock}
	d.RemoveLeftovers()
	exists, err := d.Exists()
	if err != nil || !exists {
		return run, false, err
	}
	st, err := d.Load()
	if err != nil {
		return run, false, err
	}
	if st.Pending == nil || st.Pending.Command != standalone.CommandCreate {
		return run, false, fmt.Errorf("environment %s has a standalone cluster already (%s, state %s): change it with `bootstrap scale %s`, or delete it with `bootstrap delete %s`", st.Environment, st.Cluster, d.Path, st.Environment, st.Environment)
	}
	run.state = st
	kind := kindcluster.New(s.opts.StateDir.KindClusters(), func(msg string) { s.out.Log("kind: %s", strings.TrimSpace(msg)) })
	if !st.Pending.Finished {
		// Its export was not complete: the bootstrap cluster is the only record of the cluster.
		// Without it, a new run would define the cluster again, with a second CA.
		if up, err := kind.Exists(st.BootstrapCluster.Name); err != nil {
			return run, false, err
		} else if !up {
			return run, false, fmt.Errorf("the creation of standalone cluster %s was interrupted before its objects were exported, and its bootstrap cluster %s is gone: nothing can manage the cluster again; `bootstrap cleanup %s` removes its containers and this state", st.Cluster, st.BootstrapCluster.Name, st.Environment)
		}
		s.out.Log("continuing the interrupted creation of standalone cluster %s", st.Cluster)
		return run, false, nil
	}
	if err := deleteTemporaryCluster(s, kind, st); err != nil {
		return run, false, err
	}
	st.Pending = nil
	if err := d.Save(st); err != nil {
		return run, false, err
	}
	s.out.Log("standalone cluster %s was created and exported; its bootstrap cluster is gone now", st.Cluster)
	return run, true, nil
}

// exportStandalone is the last phase of a standalone creation: what manages the cluster again
// (the providers as built now, the bootstrap cluster's settings), then the cluster's objects, go
// to the state directory; then the bootstrap cluster is deleted. Nothing of management stays.
func exportStandalone(ctx context.Context, s *session, bc *bootstrapCluster, plan *render.Result, run *standaloneRun) error {
	v := plan.Settings
	k := s.opts.StandaloneKey
	st := run.state
	if st == nil {
		st = &standalone.State{}
	}
	st.Environment = s.opts.Env.Name
	st.Cluster = v.Cluster.Name
	st.Namespace = names.Namespace
	st.Bootstrap = v.Cluster.Providers.Bootstrap
	st.Infrastructure = v.Cluster.Providers.Infrastructure
	st.KubernetesVersion = v.Cluster.KubernetesVersion
	st.Versions = s.opts.Versions
	st.Source = sourceWithoutCredentials(plan.Merged["source"])
	st.BootstrapCluster = bootstrapClusterRecord(v)
	st.Recipient = k.Recipient()
	st.Pending = &standalone.Operation{Command: standalone.CommandCreate, Started: time.Now().UTC(), Restored: true, Applied: true}
	mgmt, err := storeManagement(ctx, s, run.dir, k, plan)
	if err != nil {
		return fmt.Errorf("keep what manages standalone cluster %s: %w", st.Cluster, err)
	}
	st.ManagementUnits = mgmt
	merged, err := yaml.Marshal(plan.Merged)
	if err != nil {
		return err
	}
	if err := run.dir.StoreValues(k, merged); err != nil {
		return err
	}
	if err := run.dir.Save(st); err != nil {
		return err
	}
	if err := exportObjects(ctx, s, run.dir, bc.cluster, s.result.Bootstrap, st); err != nil {
		return err
	}
	st.Pending.Finished = true
	if err := run.dir.Save(st); err != nil {
		return err
	}
	if s.opts.KeepBootstrap {
		s.out.Log("keeping the bootstrap cluster (--keep-bootstrap): %s; `bootstrap %s --standalone` deletes it", s.result.Bootstrap, st.Environment)
		return nil
	}
	if err := deleteTemporaryCluster(s, bc.kind, st); err != nil {
		return err
	}
	st.Pending = nil
	if err := run.dir.Save(st); err != nil {
		return err
	}
	s.result.Management = run.dir.KubeconfigPath()
	s.out.Log("standalone cluster %s runs with no management: %d control plane and %d worker machines", st.Cluster, st.ControlPlane, st.Workers)
	s.out.Log("kubeconfig (mode 0600): %s", run.dir.KubeconfigPath())
	s.out.Log("state (mode 0700, secrets encrypted to %s): %s", st.Recipient, run.dir.Path)
	s.out.Log("change it: bootstrap scale %s --workers N; delete it: bootstrap delete %s; back up its state: bootstrap standalone export %s -o FILE", st.Environment, st.Environment, st.Environment)
	return nil
}

// sourceWithoutCredentials is the source values as state.json keeps them: a URL's user
// information (a token, say) is dropped.
func sourceWithoutCredentials(v any) map[string]any {
	src, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := map[string]any{}
	for k, val := range src {
		out[k] = val
	}
	if raw, ok := out["url"].(string); ok {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			u.User = nil
			out["url"] = u.String()
		}
	}
	return out
}

func bootstrapClusterRecord(v values.Settings) standalone.BootstrapCluster {
	kc := v.BootstrapCluster
	return standalone.BootstrapCluster{
		Name:          kc.Name,
		NodeImage:     kc.NodeImage,
		PodSubnet:     kc.PodsCIDR,
		ServiceSubnet: kc.ServicesCIDR,
		Mirrors:       v.RegistryMirrors.HostsConfig,
	}
}

// storeManagement keeps what a temporary management cluster runs: the bootstrap cluster's CNI,
// then every unit the cluster definitions depend on (cert-manager, Cluster API, the providers),
// as built now. Bringing management back then needs no checkout, and runs the versions that
// created the cluster.
func storeManagement(ctx context.Context, s *session, d standalone.Dir, k *standalone.Key, plan *render.Result) ([]standalone.ManagementUnit, error) {
	cni, err := bootstrapCNI(ctx, s, plan.Settings)
	if err != nil {
		return nil, err
	}
	if err := storeUnit(d, k, standalone.CNIUnit, cni); err != nil {
		return nil, err
	}
	out := []standalone.ManagementUnit{{Name: standalone.CNIUnit}}
	cu, ok := plan.Graph.ByRole(units.RoleCluster)
	if !ok {
		return nil, errors.New("the release defines no cluster (no unit of role cluster)")
	}
	for _, name := range plan.Graph.DependenciesOf(cu.Name) {
		u := plan.Graph.Units[name]
		var objs []*unstructured.Unstructured
		for _, o := range plan.Objects {
			if o.Unit == name {
				objs = append(objs, o.Object)
			}
		}
		if len(objs) == 0 {
			return nil, fmt.Errorf("unit %s: no objects rendered", name)
		}
		if err := storeUnit(d, k, name, objs); err != nil {
			return nil, err
		}
		mu := standalone.ManagementUnit{Name: name, WaitFor: []string{standalone.CNIUnit}}
		for _, dep := range u.DependsOn {
			if !u.NeedsOnlyApplied(dep) {
				mu.WaitFor = append(mu.WaitFor, dep)
			}
		}
		out = append(out, mu)
	}
	return out, nil
}

func storeUnit(d standalone.Dir, k *standalone.Key, name string, objs []*unstructured.Unstructured) error {
	var buf bytes.Buffer
	hasSecret := false
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("unit %s: %w", name, err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
		hasSecret = hasSecret || (o.GetKind() == "Secret" && o.GetAPIVersion() == "v1")
	}
	return d.StoreManagement(k, name, buf.Bytes(), hasSecret)
}

// exportObjects writes the cluster's Cluster API objects into the state (clusterctl move
// --to-directory), its kubeconfig, its machine counts and machines.
func exportObjects(ctx context.Context, s *session, d standalone.Dir, mc *kube.Cluster, kubeconfigPath string, st *standalone.State) error {
	view, err := machines.Read(ctx, mc.Client, st.Namespace, st.Cluster)
	if err != nil {
		return err
	}
	if !view.Found {
		return fmt.Errorf("Cluster %s/%s is not in the management cluster: nothing to export", st.Namespace, st.Cluster)
	}
	// clusterctl refuses to export a paused Cluster; only an export or a restore killed half-way
	// leaves it paused, and this command is what runs them.
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
	s.out.Log("exporting the Cluster API objects of %s (clusterctl move --to-directory)", st.Cluster)
	if err := c.Move(ctx, clusterctl.MoveOptions{FromKubeconfig: clusterctl.Kubeconfig{Path: kubeconfigPath}, Namespace: st.Namespace, ToDirectory: tmp}); err != nil {
		return fmt.Errorf("export the objects of %s: %w", st.Cluster, err)
	}
	n, err := d.StoreObjects(s.opts.StandaloneKey, tmp)
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
	s.out.Log("exported %d objects of %s (its Secrets encrypted) to %s", n, st.Cluster, d.Path)
	return nil
}

// setPaused sets the Cluster's spec.paused.
func setPaused(ctx context.Context, c *kube.Cluster, st *standalone.State, paused bool) error {
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

func deleteTemporaryCluster(s *session, kind *kindcluster.Manager, st *standalone.State) error {
	name := st.BootstrapCluster.Name
	exists, err := kind.Exists(name)
	if err != nil || !exists {
		return err
	}
	s.stopBackground()
	s.out.Log("deleting the temporary management cluster %s", name)
	if err := kind.Delete(name); err != nil {
		return fmt.Errorf("delete the temporary management cluster %s: %w", name, err)
	}
	return nil
}

// Change is what a command changes on a standalone cluster.
type Change struct {
	Command string // standalone.CommandScale, CommandUpgrade or CommandDelete
	// Workers and ControlPlane are the machine counts a scale asks for (nil: unchanged).
	Workers, ControlPlane *int
	// KubernetesVersion is the version an upgrade asks for.
	KubernetesVersion string
}

// Manage brings management back for a standalone cluster for the time of a change: a temporary
// kind cluster with the providers that created the cluster, the objects restored into it before
// any reconciler runs, the change, the objects exported again, the temporary cluster deleted.
// Run again after an interruption, it finishes the change: the objects are restored only into a
// temporary cluster that does not hold them yet, so no machine is replaced and no second CA made.
func Manage(ctx context.Context, mo ManageOptions) (*Result, error) {
	opts, m := mo.settings(), mo.Change
	s, err := newSession(opts)
	if err != nil {
		return &Result{}, err
	}
	defer s.close()

	var (
		d      standalone.Dir
		st     *standalone.State
		lock   *standalone.Lock
		kind   = kindcluster.New(opts.StateDir.KindClusters(), func(msg string) { s.out.Log("kind: %s", strings.TrimSpace(msg)) })
		mc     *kube.Cluster
		done   bool // the change is complete and kept: only the temporary cluster remains
		k      = opts.StandaloneKey
		change = map[string]string{standalone.CommandScale: "scale", standalone.CommandDelete: "delete", standalone.CommandUpgrade: "upgrade"}[m.Command]
	)
	defer func() { lock.Release() }()
	skipDone := func(f func(ctx context.Context) error) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if done {
				return nil
			}
			return f(ctx)
		}
	}
	phases := []phase{
		{"state", func(ctx context.Context) (err error) {
			if d, err = standalone.DirOf(opts.StateDir.Standalone(), opts.Env.Name); err != nil {
				return err
			}
			if exists, err := d.Exists(); err != nil {
				return err
			} else if !exists {
				_, err := d.Load()
				return err
			}
			if lock, err = d.Lock("bootstrap " + m.Command + " " + opts.Env.Name); err != nil {
				return err
			}
			d.RemoveLeftovers()
			if k == nil {
				return errors.New("no age key to decrypt the state's secrets with")
			}
			if st, err = d.Check(k); err != nil {
				return err
			}
			if m.Command == standalone.CommandUpgrade {
				if err := checkStandaloneUpgrade(st, m.KubernetesVersion); err != nil {
					return err
				}
			}
			st, done, err = beginOperation(s, d, st, kind, m)
			return err
		}},
		{"bootstrap cluster", skipDone(func(ctx context.Context) (err error) {
			mc, err = ensureTemporaryCluster(ctx, s, d, st, kind)
			return err
		})},
		{"providers", skipDone(func(ctx context.Context) error {
			return applyManagement(ctx, s, d, st, mc)
		})},
		{"restore", skipDone(func(ctx context.Context) error {
			return restoreObjects(ctx, s, d, st, mc, kind.KubeconfigPath(st.BootstrapCluster.Name))
		})},
		{change, skipDone(func(ctx context.Context) error {
			switch m.Command {
			case standalone.CommandDelete:
				return deleteCluster(ctx, s, d, st, mc)
			case standalone.CommandUpgrade:
				return upgradeCluster(ctx, s, d, st, mc, m.KubernetesVersion)
			}
			return scaleCluster(ctx, s, d, st, mc, m)
		})},
	}
	if m.Command != standalone.CommandDelete {
		phases = append(phases, phase{"export", skipDone(func(ctx context.Context) error {
			if err := exportObjects(ctx, s, d, mc, kind.KubeconfigPath(st.BootstrapCluster.Name), st); err != nil {
				return err
			}
			if m.Command == standalone.CommandUpgrade {
				// Every machine is replaced by one of the new version: that is the change.
				st.KubernetesVersion = m.KubernetesVersion
				st.Pending.Finished = true
				return d.Save(st)
			}
			// A scale-down removes machines; a machine still there must have kept its provider ID.
			kept := map[string]string{}
			for name, id := range st.Before {
				if _, ok := st.Machines[name]; ok {
					kept[name] = id
				}
			}
			if replaced := machines.Replaced(kept, st.Machines); len(replaced) > 0 {
				s.out.Log("warning: machines replaced during the change: %s", strings.Join(replaced, ", "))
			}
			st.Pending.Finished = true
			return d.Save(st)
		})})
	}
	phases = append(phases, phase{"finish", func(ctx context.Context) error {
		if err := deleteTemporaryCluster(s, kind, st); err != nil {
			return err
		}
		if m.Command == standalone.CommandDelete {
			if err := d.Remove(); err != nil {
				return err
			}
			s.out.Log("standalone cluster %s is deleted, with its state", st.Cluster)
			return nil
		}
		st.Pending, st.Before = nil, nil
		if err := d.Save(st); err != nil {
			return err
		}
		s.out.Log("standalone cluster %s: Kubernetes %s, %d control plane and %d worker machines; no management left running", st.Cluster, st.KubernetesVersion, st.ControlPlane, st.Workers)
		return nil
	}})
	res, err := s.run(ctx, phases)
	if err != nil && st != nil && st.Pending != nil {
		s.out.Log("the change is recorded in %s and the temporary management cluster %s (if created) is kept: run the same `bootstrap %s` again to finish", d.Path, st.BootstrapCluster.Name, m.Command)
	}
	return res, err
}

// beginOperation records the command in the state, or finds the interrupted one it continues.
func beginOperation(s *session, d standalone.Dir, st *standalone.State, kind *kindcluster.Manager, m Change) (*standalone.State, bool, error) {
	exists := func() (bool, error) { return kind.Exists(st.BootstrapCluster.Name) }
	done, notes, err := d.Begin(st, standalone.Operation{Command: m.Command, Workers: m.Workers, ControlPlane: m.ControlPlane, KubernetesVersion: m.KubernetesVersion}, exists, time.Now())
	for _, n := range notes {
		s.out.Log("%s", n)
	}
	return st, done, err
}

// ensureTemporaryCluster creates (or finds) the temporary management cluster with its CNI.
func ensureTemporaryCluster(ctx context.Context, s *session, d standalone.Dir, st *standalone.State, kind *kindcluster.Manager) (*kube.Cluster, error) {
	cfg := st.BootstrapCluster.Kind(st.Environment)
	if exists, err := kind.Exists(cfg.Name); err != nil {
		return nil, err
	} else if exists {
		s.out.Log("temporary management cluster %s exists: continuing with it", cfg.Name)
	} else {
		s.out.Log("creating the temporary management cluster %s (node image %s, %d registry mirrors)", cfg.Name, cfg.NodeImage, len(cfg.Mirrors))
	}
	c, _, err := kind.Ensure(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.result.Bootstrap = kind.KubeconfigPath(cfg.Name)
	objs, err := managementObjects(d, s.opts.StandaloneKey, standalone.CNIUnit)
	if err != nil {
		return nil, err
	}
	if err := applyAndWait(ctx, s, c, "the CNI", objs, objs, 5*time.Minute); err != nil {
		return nil, fmt.Errorf("the CNI of the temporary management cluster: %w", err)
	}
	return c, nil
}

func managementObjects(d standalone.Dir, k *standalone.Key, unit string) ([]*unstructured.Unstructured, error) {
	data, err := d.ManagementObjects(k, unit)
	if err != nil {
		return nil, err
	}
	objs, err := ssautil.ReadObjects(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("management unit %s of the state: %w", unit, err)
	}
	return objs, nil
}

// applyManagement applies the providers in order, each once the units it needs ready are, and
// waits until every one is ready.
func applyManagement(ctx context.Context, s *session, d standalone.Dir, st *standalone.State, mc *kube.Cluster) error {
	applied := map[string][]*unstructured.Unstructured{}
	ready := map[string]bool{standalone.CNIUnit: true}
	waitFor := func(names []string) error {
		for _, n := range names {
			if ready[n] {
				continue
			}
			if err := waitReady(ctx, s, mc, "unit "+n, applied[n], 10*time.Minute); err != nil {
				return fmt.Errorf("unit %s in the temporary management cluster: %w", n, err)
			}
			s.out.Log("unit %s is ready", n)
			ready[n] = true
		}
		return nil
	}
	var all []string
	for _, u := range st.ManagementUnits {
		if u.Name == standalone.CNIUnit {
			continue
		}
		if err := waitFor(u.WaitFor); err != nil {
			return err
		}
		objs, err := managementObjects(d, s.opts.StandaloneKey, u.Name)
		if err != nil {
			return err
		}
		s.out.Log("applying unit %s (%d objects)", u.Name, len(objs))
		if _, err := apply.New(mc).Apply(ctx, objs); err != nil {
			return fmt.Errorf("apply unit %s to the temporary management cluster: %w", u.Name, err)
		}
		applied[u.Name] = objs
		all = append(all, u.Name)
	}
	return waitFor(all)
}

// restoreObjects restores the cluster's objects into the temporary management cluster, unless
// it holds them already. clusterctl creates them with the Cluster paused and resumes it once
// every object is there: no controller sees part of the cluster, none creates a second one.
func restoreObjects(ctx context.Context, s *session, d standalone.Dir, st *standalone.State, mc *kube.Cluster, kubeconfigPath string) error {
	if st.Pending.Restored {
		s.out.Log("the objects of %s are in the temporary management cluster already (restored by the interrupted command): not restored again", st.Cluster)
		// An export killed half-way leaves the Cluster paused.
		return setPaused(ctx, mc, st, false)
	}
	dir, cleanup, err := d.RestoreDir(s.opts.StandaloneKey)
	if err != nil {
		return err
	}
	defer cleanup()
	c, err := pivot.Clusterctl(ctx)
	if err != nil {
		return err
	}
	s.out.Log("restoring the objects of %s (clusterctl move --from-directory)", st.Cluster)
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
	st.Pending.Restored = true
	if err := d.Save(st); err != nil {
		return err
	}
	s.out.Log("restored the objects of %s into the temporary management cluster", st.Cluster)
	return nil
}

// scaleCluster sets the replicas of the workers' MachineDeployment and of the control plane, and
// waits until the cluster has them, every node ready.
func scaleCluster(ctx context.Context, s *session, d standalone.Dir, st *standalone.State, mc *kube.Cluster, m Change) error {
	// Recorded before the change: a command killed right after it must know it may have happened.
	st.Pending.Applied = true
	if err := d.Save(st); err != nil {
		return err
	}
	if m.Workers != nil {
		mds := &clusterv1.MachineDeploymentList{}
		if err := mc.Client.List(ctx, mds, client.InNamespace(st.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: st.Cluster}); err != nil {
			return fmt.Errorf("list the MachineDeployments of %s: %w", st.Cluster, err)
		}
		if len(mds.Items) != 1 {
			return fmt.Errorf("cluster %s has %d MachineDeployments: --workers scales a cluster with exactly one", st.Cluster, len(mds.Items))
		}
		if err := setReplicas(ctx, mc, &mds.Items[0], *m.Workers); err != nil {
			return err
		}
		s.out.Log("MachineDeployment %s: %d replicas", mds.Items[0].Name, *m.Workers)
	}
	if m.ControlPlane != nil {
		cp, err := controlPlaneOf(ctx, mc, st.Namespace, st.Cluster)
		if err != nil {
			return err
		}
		if err := setReplicas(ctx, mc, cp, *m.ControlPlane); err != nil {
			return err
		}
		s.out.Log("%s %s: %d replicas", cp.GetKind(), cp.GetName(), *m.ControlPlane)
	}
	nodes, err := clusterOf(ctx, mc, st.Cluster)
	if err != nil {
		return fmt.Errorf("connect to cluster %s to read its nodes: %w", st.Cluster, err)
	}
	return settleMachines(ctx, s, mc, nodes, st.Cluster)
}

func setReplicas(ctx context.Context, mc *kube.Cluster, obj client.Object, replicas int) error {
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))
	if err := mc.Client.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("set the replicas of %s to %d: %w", obj.GetName(), replicas, err)
	}
	return nil
}

// deleteCluster deletes the Cluster and waits until Cluster API has deleted its machines and it
// is gone.
func deleteCluster(ctx context.Context, s *session, d standalone.Dir, st *standalone.State, mc *kube.Cluster) error {
	// Recorded before the deletion: a command killed right after it must know it may have begun.
	st.Pending.Applied = true
	if err := d.Save(st); err != nil {
		return err
	}
	const timeout = 20 * time.Minute
	_, err := machines.DeleteClusters(ctx, mc.Client, machines.Deletion{
		Clusters: []client.ObjectKey{{Namespace: st.Namespace, Name: st.Cluster}},
		Timeout:  timeout,
		Interval: pollInterval,
		Progress: func(left []machines.View, _ time.Duration) {
			for _, v := range left {
				s.out.Waiting(fmt.Sprintf("the deletion of cluster %s (%d machines left)", st.Cluster, len(v.Machines)), v.Lines())
			}
		},
	})
	if err != nil {
		return fmt.Errorf("cluster %s not deleted within %s: %w", st.Cluster, timeout, err)
	}
	s.out.Log("cluster %s and its machines are deleted", st.Cluster)
	st.Pending.Finished = true
	return d.Save(st)
}
