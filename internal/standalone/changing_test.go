package standalone

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cluster-init.dev/cluster-init/internal/kindcluster"
	"cluster-init.dev/cluster-init/internal/kube"
	"cluster-init.dev/cluster-init/internal/steps"
	"cluster-init.dev/cluster-init/internal/testenv"
)

// fakeKind stands in for kind, which needs Docker: clusters by name, and what was asked of it.
// Ensure returns the test's API server as the temporary management cluster.
type fakeKind struct {
	clusters map[string]bool
	ensured  []string
	deleted  []string
	cluster  *kube.Cluster
}

func (k *fakeKind) Exists(name string) (bool, error) { return k.clusters[name], nil }
func (k *fakeKind) Ensure(_ context.Context, cfg kindcluster.Config) (*kube.Cluster, bool, error) {
	created := !k.clusters[cfg.Name]
	k.clusters[cfg.Name] = true
	k.ensured = append(k.ensured, cfg.Name)
	return k.cluster, created, nil
}
func (k *fakeKind) KubeconfigPath(name string) string { return "/kind/" + name + "/kubeconfig" }
func (k *fakeKind) Delete(name string) error {
	delete(k.clusters, name)
	k.deleted = append(k.deleted, name)
	return nil
}

// fakeWork stands in for what the phases do in the clusters (the CNI, the providers, clusterctl
// move, Cluster API's machines: Docker): it records what ran, and a step can fail as a killed
// command would.
type fakeWork struct {
	f    *Changing
	ran  []string
	fail map[string]error
}

func (w *fakeWork) do(name string) error {
	w.ran = append(w.ran, name)
	return w.fail[name]
}
func (w *fakeWork) temporary(ctx context.Context) (*kube.Cluster, error) {
	c, _, err := w.f.Temporary.Kind.Ensure(ctx, w.f.st.BootstrapCluster.Kind(w.f.Env))
	if err != nil {
		return nil, err
	}
	return c, w.do("temporary")
}
func (w *fakeWork) providers(context.Context) error { return w.do("providers") }
func (w *fakeWork) restore(context.Context) error   { return w.do("restore") }
func (w *fakeWork) change(context.Context) error    { return w.do("change") }
func (w *fakeWork) export(context.Context) error {
	// What an export records: the machines as they are now.
	w.f.st.Machines = map[string]string{"solo-md-0-a": "docker:////solo-md-0-a", "solo-md-0-b": "docker:////solo-md-0-b"}
	return w.do("export")
}

// Manage's decisions (standalone.Changing): which phases run for the change asked and the
// change under way, what the state records after each, what happens to the temporary cluster and
// to the state. Kind and the work in the clusters stand in (fakeKind, fakeWork); the temporary
// cluster's API is a real API server.
func TestAChangeRunsEachStepOnceAndResumesWhereItStopped(t *testing.T) {
	api := testenv.Start(t, "changing")
	ctx := t.Context()
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-init"}}); err != nil {
		t.Fatal(err)
	}
	two := 2
	k := newKey(t)
	type setup struct {
		pending   *Operation
		temporary bool // the temporary cluster exists
		version   string
	}
	type want struct {
		err       string
		ran       []string
		deleted   bool  // the temporary cluster
		kept      bool  // the state directory
		pending   *bool // a change left under way (nil: not checked)
		version   string
		unpaused  bool
		machines  int
		noEnsured bool
		attempts  int // of the change left under way
	}
	yes, no := ptr.To(true), ptr.To(false)
	for _, c := range []struct {
		name   string
		setup  setup
		change Change
		fail   map[string]error
		want   want
	}{
		{name: "a new scale runs every step once", change: Change{Command: CommandScale, Workers: &two},
			want: want{ran: []string{"temporary", "providers", "restore", "change", "export"}, deleted: true, kept: true, pending: no, machines: 2}},
		{name: "killed in the change: the temporary cluster and the change under way are kept", change: Change{Command: CommandScale, Workers: &two},
			fail: map[string]error{"change": errors.New("killed")},
			want: want{err: "scale step change: killed", ran: []string{"temporary", "providers", "restore", "change"}, kept: true, pending: yes, attempts: 1}},
		{name: "run again after a kill in the change: not restored again, the Cluster unpaused, the change made again",
			setup:  setup{pending: &Operation{Command: CommandScale, Workers: &two, Record: steps.Record{Done: []string{StepRestore}, Running: StepChange}}, temporary: true},
			change: Change{Command: CommandScale, Workers: &two},
			want:   want{ran: []string{"temporary", "providers", "change", "export"}, deleted: true, kept: true, pending: no, unpaused: true, machines: 2}},
		{name: "the temporary cluster gone after the restore: restored again from the last export",
			setup:  setup{pending: &Operation{Command: CommandScale, Workers: &two, Record: steps.Record{Done: []string{StepRestore}, Running: StepChange}}},
			change: Change{Command: CommandScale, Workers: &two},
			want:   want{ran: []string{"temporary", "providers", "restore", "change", "export"}, deleted: true, kept: true, pending: no, machines: 2}},
		{name: "a change made and kept, run again: only the temporary cluster goes",
			setup:  setup{pending: &Operation{Command: CommandScale, Workers: &two, Record: steps.Record{Done: []string{StepRestore, StepChange, StepExport}}}, temporary: true},
			change: Change{Command: CommandScale, Workers: &two},
			want:   want{deleted: true, kept: true, pending: no, noEnsured: true}},
		{name: "a deletion exports nothing and removes the state", change: Change{Command: CommandDelete},
			want: want{ran: []string{"temporary", "providers", "restore", "change"}, deleted: true}},
		{name: "an upgrade records the version once exported", setup: setup{version: "v1.36.3"}, change: Change{Command: CommandUpgrade, KubernetesVersion: "v1.37.0"},
			want: want{ran: []string{"temporary", "providers", "restore", "change", "export"}, deleted: true, kept: true, pending: no, version: "v1.37.0", machines: 2}},
		{name: "an upgrade the rules refuse creates nothing", setup: setup{version: "v1.37.0"}, change: Change{Command: CommandUpgrade, KubernetesVersion: "v1.36.3"},
			want: want{err: "a downgrade is not supported", kept: true, pending: no, version: "v1.37.0", noEnsured: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, st := newState(t, k)
			st.Bootstrap, st.Infrastructure, st.KubernetesVersion = "kubeadm", "capd", c.setup.version
			st.Machines = map[string]string{"solo-md-0-a": "docker:////solo-md-0-a"}
			st.Pending = c.setup.pending
			if err := d.Save(st); err != nil {
				t.Fatal(err)
			}
			// The Cluster as an export killed half-way leaves it in a temporary cluster: paused.
			cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-init", Name: "solo"}, Spec: clusterv1.ClusterSpec{
				Paused:            ptr.To(true),
				ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "solo"},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerCluster", Name: "solo"},
			}}
			_ = api.Client.Delete(ctx, &clusterv1.Cluster{ObjectMeta: cl.ObjectMeta})
			if err := api.Client.Create(ctx, cl); err != nil {
				t.Fatal(err)
			}
			kind := &fakeKind{clusters: map[string]bool{}, cluster: api}
			if c.setup.temporary {
				kind.clusters[st.BootstrapCluster.Name] = true
			}
			// The e2e kills a command on the word that the objects are restored: by then the
			// state must say so, or the next run would restore them again.
			out := testReporter{t: t, onLog: func(msg string) {
				if !strings.HasPrefix(msg, "restored the objects") {
					return
				}
				if saved, err := d.Load(); err != nil || saved.Pending == nil || !saved.Pending.IsDone(StepRestore) {
					t.Errorf("%q said before the state records the restore: %+v, %v", msg, saved, err)
				}
			}}
			f := &Changing{Root: filepath.Dir(d.Path), Env: st.Environment, Key: k, Change: c.change, Out: out, Temporary: Temporary{Kind: kind}}
			w := &fakeWork{f: f, fail: c.fail}
			f.work = w
			defer f.Close()
			var err error
			for _, p := range f.Phases() {
				if err = p.Run(ctx); err != nil {
					break
				}
			}
			if c.want.err == "" && err != nil || c.want.err != "" && (err == nil || !strings.Contains(err.Error(), c.want.err)) {
				t.Fatalf("error %v, want %q", err, c.want.err)
			}
			if !slices.Equal(w.ran, c.want.ran) {
				t.Errorf("ran %v, want %v", w.ran, c.want.ran)
			}
			if deleted := slices.Contains(kind.deleted, st.BootstrapCluster.Name); deleted != c.want.deleted {
				t.Errorf("temporary cluster deleted: %t, want %t", deleted, c.want.deleted)
			}
			if c.want.noEnsured && len(kind.ensured) > 0 {
				t.Errorf("a temporary cluster was asked for: %v", kind.ensured)
			}
			_, statErr := os.Stat(d.Path)
			if kept := statErr == nil; kept != c.want.kept {
				t.Fatalf("state kept: %t, want %t", kept, c.want.kept)
			}
			if !c.want.kept {
				return
			}
			saved, err := d.Load()
			if err != nil {
				t.Fatal(err)
			}
			if c.want.pending != nil && (saved.Pending != nil) != *c.want.pending {
				t.Errorf("change under way: %+v, want one: %t", saved.Pending, *c.want.pending)
			}
			if c.want.attempts > 0 && (saved.Pending == nil || saved.Pending.Attempts != c.want.attempts) {
				t.Errorf("change under way: %+v, want %d attempts", saved.Pending, c.want.attempts)
			}
			if c.want.version != "" && saved.KubernetesVersion != c.want.version {
				t.Errorf("version %s, want %s", saved.KubernetesVersion, c.want.version)
			}
			if c.want.machines > 0 && len(saved.Machines) != c.want.machines {
				t.Errorf("machines %v, want %d", saved.Machines, c.want.machines)
			}
			if c.want.pending != nil && !*c.want.pending && saved.Before != nil {
				t.Errorf("the machines before the change are still recorded: %v", saved.Before)
			}
			now := &clusterv1.Cluster{}
			if err := api.Client.Get(ctx, client.ObjectKeyFromObject(cl), now); err != nil {
				t.Fatal(err)
			}
			if unpaused := now.Spec.Paused != nil && !*now.Spec.Paused; unpaused != c.want.unpaused {
				t.Errorf("Cluster unpaused: %t, want %t", unpaused, c.want.unpaused)
			}
		})
	}
}

// A change killed in its change step records it begun: a different command is then refused
// (a deletion begun is finished by a deletion only).
func TestADeletionBegunIsFinishedByADeletionOnly(t *testing.T) {
	k := newKey(t)
	d, st := newState(t, k)
	kind := &fakeKind{clusters: map[string]bool{}}
	f := &Changing{Root: filepath.Dir(d.Path), Env: st.Environment, Key: k, Change: Change{Command: CommandDelete}, Out: testReporter{t: t}, Temporary: Temporary{Kind: kind}}
	w := &fakeWork{f: f, fail: map[string]error{"change": errors.New("killed")}}
	f.work = w
	var err error
	for _, p := range f.Phases() {
		if err = p.Run(t.Context()); err != nil {
			break
		}
	}
	f.Close()
	if err == nil || !strings.Contains(f.Interrupted(), "run the same `bootstrap delete` again") {
		t.Fatalf("%v; %q", err, f.Interrupted())
	}
	two := 2
	g := &Changing{Root: filepath.Dir(d.Path), Env: st.Environment, Key: k, Change: Change{Command: CommandScale, Workers: &two}, Out: testReporter{t: t}, Temporary: Temporary{Kind: kind}}
	g.work = &fakeWork{f: g}
	defer g.Close()
	if err := g.Phases()[0].Run(t.Context()); err == nil || !strings.Contains(err.Error(), "is being deleted") {
		t.Errorf("a scale of a cluster being deleted: %v", err)
	}
}

// testReporter writes a flow's messages to the test's log; onLog, if set, sees each message.
type testReporter struct {
	t     *testing.T
	onLog func(msg string)
}

func (r testReporter) Log(format string, args ...any) {
	r.t.Logf(format, args...)
	if r.onLog != nil {
		r.onLog(fmt.Sprintf(format, args...))
	}
}
func (r testReporter) Waiting(what string, pending []string) {
	r.t.Logf("waiting for %s: %s", what, strings.Join(pending, "; "))
}
