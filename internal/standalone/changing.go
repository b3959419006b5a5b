package standalone

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/machines"
	"cluster-init.dev/cluster-init/internal/steps"
)

// Change is what a command changes on a standalone cluster.
type Change struct {
	Command string // CommandScale, CommandUpgrade or CommandDelete
	// Workers and ControlPlane are the machine counts a scale asks for (nil: unchanged).
	Workers, ControlPlane *int
	// KubernetesVersion is the version an upgrade asks for.
	KubernetesVersion string
}

// Changing is the flow of a command that changes a standalone cluster (`bootstrap scale|upgrade|
// delete ENV`): management brought back for the time of the change in a temporary kind cluster
// with the providers that created the cluster, the objects restored into it before any
// reconciler runs, the change, the objects exported again, the temporary cluster deleted. Run
// again after an interruption, it finishes the change: the steps done are recorded in the state
// (steps.Record), the objects are restored only into a temporary cluster that does not hold them
// yet, so no machine is replaced and no second CA made.
type Changing struct {
	// Root is the directory of the standalone states (statedir.Dir.Standalone).
	Root, Env string
	// Key decrypts the secrets of the state.
	Key       *Key
	Change    Change
	Temporary Temporary
	Out       Reporter

	dir  Dir
	st   *State
	lock *Lock
	mc   *kube.Cluster
	// steps moves the record of the change on (st.Pending.Record).
	steps *steps.Machine
	// work is what the phases do in the clusters: the real work, or a test's stand-in (kind and
	// clusterctl need Docker).
	work clusterWork
}

// clusterWork is what the phases of a change do in the clusters.
type clusterWork interface {
	// temporary creates (or finds) the temporary management cluster with its CNI.
	temporary(ctx context.Context) (*kube.Cluster, error)
	// providers applies the management units and waits until they are ready.
	providers(ctx context.Context) error
	restore(ctx context.Context) error
	change(ctx context.Context) error
	export(ctx context.Context) error
}

// inClusters is the real work of a change.
type inClusters struct{ f *Changing }

func (w inClusters) temporary(ctx context.Context) (*kube.Cluster, error) {
	return w.f.Temporary.ensure(ctx, w.f.Out, w.f.dir, w.f.Key, w.f.st)
}

func (w inClusters) providers(ctx context.Context) error {
	return applyManagement(ctx, w.f.Out, w.f.dir, w.f.Key, w.f.st, w.f.mc)
}

func (w inClusters) restore(ctx context.Context) error {
	return restoreObjects(ctx, w.f.Out, w.f.dir, w.f.Key, w.f.mc, w.f.Temporary.kubeconfig(w.f.st), w.f.st)
}

func (w inClusters) change(ctx context.Context) error {
	f := w.f
	switch f.Change.Command {
	case CommandDelete:
		return deleteCluster(ctx, f.Out, f.mc, f.st)
	case CommandUpgrade:
		return upgrade(ctx, f.Out, f.mc, f.st, f.Change.KubernetesVersion)
	case CommandScale:
		return scale(ctx, f.Out, f.mc, f.st, f.Change)
	}
	return fmt.Errorf("no change %q of a standalone cluster", f.Change.Command)
}

func (w inClusters) export(ctx context.Context) error {
	return exportObjects(ctx, w.f.Out, w.f.dir, w.f.Key, w.f.mc, w.f.Temporary.kubeconfig(w.f.st), w.f.st)
}

// Close lets the state go.
func (f *Changing) Close() { f.lock.Release() }

// Phases are the flow's phases, in order.
func (f *Changing) Phases() []Phase {
	if f.work == nil {
		f.work = inClusters{f}
	}
	// complete: the change is made and kept; only the temporary cluster is left to delete.
	unlessComplete := func(run func(ctx context.Context) error) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if f.st.Pending.Complete() {
				return nil
			}
			return run(ctx)
		}
	}
	phases := []Phase{
		{"state", f.begin},
		{"bootstrap cluster", unlessComplete(func(ctx context.Context) (err error) {
			f.mc, err = f.work.temporary(ctx)
			return err
		})},
		{"providers", unlessComplete(func(ctx context.Context) error {
			return f.work.providers(ctx)
		})},
		{"restore", unlessComplete(func(ctx context.Context) error {
			if f.st.Pending.IsDone(StepRestore) {
				f.Out.Log("the objects of %s are in the temporary management cluster already (restored by the interrupted command): not restored again", f.st.Cluster)
				// An export killed half-way leaves the Cluster paused.
				return setPaused(ctx, f.mc, f.st, false)
			}
			if err := f.step(ctx, StepRestore, f.work.restore); err != nil {
				return err
			}
			// Said once recorded: a command stopped from here on never restores again.
			f.Out.Log("restored the objects of %s into the temporary management cluster", f.st.Cluster)
			return nil
		})},
		{f.Change.Command, unlessComplete(func(ctx context.Context) error {
			return f.step(ctx, StepChange, f.work.change)
		})},
	}
	if f.Change.Command != CommandDelete {
		phases = append(phases, Phase{"export", unlessComplete(func(ctx context.Context) error {
			return f.step(ctx, StepExport, f.export)
		})})
	}
	return append(phases, Phase{"finish", f.finish})
}

// step runs one recorded step of the change (the project's step machine): recorded begun before
// it runs, done after, the state saved each time.
func (f *Changing) step(ctx context.Context, name string, run func(ctx context.Context) error) error {
	return f.steps.Do(ctx, steps.Step{Name: name, Run: run})
}

// begin locks the state, checks it and the change asked for, and records the change (or finds
// the interrupted one it continues).
func (f *Changing) begin(ctx context.Context) (err error) {
	if f.dir, err = DirOf(f.Root, f.Env); err != nil {
		return err
	}
	if exists, err := f.dir.Exists(); err != nil {
		return err
	} else if !exists {
		_, err := f.dir.Load()
		return err
	}
	if f.lock, err = f.dir.Lock("bootstrap " + f.Change.Command + " " + f.Env); err != nil {
		return err
	}
	f.dir.RemoveLeftovers()
	if f.Key == nil {
		return errors.New("no age key to decrypt the state's secrets with")
	}
	if f.st, err = f.dir.Check(f.Key); err != nil {
		return err
	}
	if f.Change.Command == CommandUpgrade {
		if err := checkUpgrade(f.st, f.Change.KubernetesVersion); err != nil {
			return err
		}
	}
	op := Operation{Command: f.Change.Command, Workers: f.Change.Workers, ControlPlane: f.Change.ControlPlane, KubernetesVersion: f.Change.KubernetesVersion}
	_, notes, err := f.dir.Begin(f.st, op, func() (bool, error) { return f.Temporary.exists(f.st) }, time.Now())
	for _, n := range notes {
		f.Out.Log("%s", n)
	}
	if err != nil {
		return err
	}
	f.steps = &steps.Machine{Record: &f.st.Pending.Record, Save: func(context.Context) error { return f.dir.Save(f.st) }, What: f.Change.Command}
	if f.st.Pending.Complete() {
		return nil
	}
	// One more attempt at the change, counted in the state.
	return f.steps.Begin(ctx)
}

// export exports the objects again, with what the change made of the state.
func (f *Changing) export(ctx context.Context) error {
	if err := f.work.export(ctx); err != nil {
		return err
	}
	if f.Change.Command == CommandUpgrade {
		// Every machine is replaced by one of the new version: that is the change.
		f.st.KubernetesVersion = f.Change.KubernetesVersion
		return nil
	}
	// A scale-down removes machines; a machine still there must have kept its provider ID.
	kept := map[string]string{}
	for name, id := range f.st.Before {
		if _, ok := f.st.Machines[name]; ok {
			kept[name] = id
		}
	}
	if replaced := machines.Replaced(kept, f.st.Machines); len(replaced) > 0 {
		f.Out.Log("warning: machines replaced during the change: %s", strings.Join(replaced, ", "))
	}
	return nil
}

// finish deletes the temporary cluster, then the state of a deleted cluster, or clears the change
// from the state of one that runs on.
func (f *Changing) finish(context.Context) error {
	if err := f.Temporary.delete(f.Out, f.st); err != nil {
		return err
	}
	if f.Change.Command == CommandDelete {
		if err := f.dir.Remove(); err != nil {
			return err
		}
		f.Out.Log("standalone cluster %s is deleted, with its state", f.st.Cluster)
		return nil
	}
	f.st.Pending, f.st.Before = nil, nil
	if err := f.dir.Save(f.st); err != nil {
		return err
	}
	f.Out.Log("standalone cluster %s: Kubernetes %s, %d control plane and %d worker machines; no management left running", f.st.Cluster, f.st.KubernetesVersion, f.st.ControlPlane, f.st.Workers)
	return nil
}

// Interrupted says how to go on after a failure, when the change is recorded ("" otherwise).
func (f *Changing) Interrupted() string {
	if f.st == nil || f.st.Pending == nil {
		return ""
	}
	return fmt.Sprintf("the change is recorded in %s and the temporary management cluster %s (if created) is kept: run the same `bootstrap %s` again to finish", f.dir.Path, f.st.BootstrapCluster.Name, f.Change.Command)
}
